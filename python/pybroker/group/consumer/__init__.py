"""KIP-848 consumer groups (group.protocol=consumer): server-side assignment,
member epochs, revocation before reassignment."""

from pybroker.group.consumer.coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator

__all__ = ["ConsumerGroupConfig", "ConsumerGroupCoordinator"]
