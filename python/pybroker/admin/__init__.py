"""Topic administration: create, delete, grow and configure topics, with
Kafka's validation and error codes."""

from pybroker.admin.topics import TopicAdmin

__all__ = ["TopicAdmin"]
