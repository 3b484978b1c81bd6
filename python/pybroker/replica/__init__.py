"""The replica layer: each partition's role on this broker (leader or follower),
its leader epoch, ISR and high watermark, and the manager that appends and reads
through it."""

from pybroker.replica.manager import ReplicaManager
from pybroker.replica.partition import ReplicaPartition

__all__ = ["ReplicaManager", "ReplicaPartition"]
