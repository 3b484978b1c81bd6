"""pybroker: a Kafka-protocol broker."""
