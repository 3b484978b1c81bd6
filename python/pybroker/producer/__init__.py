"""Producer ids for idempotent producers (InitProducerId)."""
