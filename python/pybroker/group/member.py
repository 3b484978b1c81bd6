"""One member of a classic consumer group, and the waiters its long-polling
JoinGroup / SyncGroup requests park on."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio


class Waiter:
    """A response a request handler waits for; completed at most once."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.result: dict[str, Any] | None = None

    def complete(self, result: dict[str, Any]) -> None:
        if self.result is None:
            self.result = result
            self.event.set()

    async def wait(self) -> dict[str, Any]:
        await self.event.wait()
        assert self.result is not None
        return self.result


@dataclasses.dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: monotonic ms after which a silent member is removed
    heartbeat_deadline_ms: float = 0.0
    #: joined during the current rebalance (not yet part of a generation)
    is_new: bool = True
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def finish_join(self, result: dict[str, Any]) -> None:
        if self.join_waiter is not None:
            self.join_waiter.complete(result)
            self.join_waiter = None

    def finish_sync(self, result: dict[str, Any]) -> None:
        if self.sync_waiter is not None:
            self.sync_waiter.complete(result)
            self.sync_waiter = None
