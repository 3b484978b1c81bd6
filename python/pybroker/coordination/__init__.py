"""Cluster metadata: which topics exist, their partitions, leaders and configs.

`base.MetadataStore` is the interface; `embedded` keeps it in a file for a single
node (what `pybroker serve` runs by default). A ZooKeeper backend plugs in here."""
