"""What `pybroker load-test` and `pybroker compare` run: the packaged locustfile and the
produce/consume workloads with their measurements (bench/ imports them from here)."""
