"""Transactions (Kafka's exactly-once): the coordinator and the transaction APIs,
and the markers that end a transaction in the partition logs (markers.py)."""
