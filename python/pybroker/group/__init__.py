"""Consumer groups: the group coordinator (classic Join/Sync/Heartbeat protocol)
and committed offsets stored in `__consumer_offsets`."""

from pybroker.group.coordinator import GroupConfig, GroupCoordinator

__all__ = ["GroupConfig", "GroupCoordinator"]
