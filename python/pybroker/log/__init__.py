"""Partition logs: the Python side of storage. Policy (what to open, when to
checkpoint) lives here; the mechanism (segments, indexes, recovery) is the Rust
`pybroker._core.PartitionLog`."""
