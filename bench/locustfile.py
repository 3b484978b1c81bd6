"""Locust load test for any Kafka-protocol broker: the locustfile shipped in the package
(pybroker/tools/_load/locustfile.py, what `pybroker load-test` runs), importable here so
that `locust -f bench/locustfile.py ...` keeps working from a clone.  Options and user
classes are the packaged file's; see its docstring."""

from pybroker.tools._load.locustfile import *  # noqa: F403 - locust finds the User classes
from pybroker.tools._load.locustfile import ConsumerUser, ProducerUser

__all__ = ["ConsumerUser", "ProducerUser"]
