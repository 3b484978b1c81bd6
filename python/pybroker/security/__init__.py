"""Security: TLS listeners, SASL authentication, principals (Kafka's names and rules)."""
