"""Cluster metadata: brokers, controller election, topics, partition states, configs.

`base.CoordinationBackend` is the interface (async, with watches and versioned,
controller-fenced writes); `embedded.EmbeddedBackend` keeps it in a snapshot file and
a journal (`journal.py`) for a single node (what `pybroker serve` runs by default) and
`zookeeper.ZooKeeperBackend` keeps it in ZooKeeper with Kafka's znode layout
(`znodes.py`), for `zookeeper.connect`.
`embedded.EmbeddedStore` is the broker's older synchronous view of the embedded data."""
