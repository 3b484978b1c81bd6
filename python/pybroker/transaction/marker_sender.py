"""Sends the COMMIT/ABORT markers of a completing transaction to every partition
in it (Kafka's TransactionMarkerChannelManager).

Partitions this broker leads get them through `markers.write_markers`; the
others through WriteTxnMarkers to their leader. Partitions that fail with a
retriable error (no leader, leader moved, not enough replicas, timeout) are
retried after a backoff, with fresh leaders, until every partition has its
marker, the topic is deleted, or the coordinator is no longer the coordinator
(then its successor resends them)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from pybroker.client.connection import BrokerConnection, BrokerUnreachable
from pybroker.client.peer import connect_peer
from pybroker.errors import ErrorCode
from pybroker.transaction import markers

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 2.0
#: a marker request waits for the ISR on the other side (up to 30 s there)
REQUEST_TIMEOUT_S = 40.0

TopicPartition = tuple[str, int]


class MarkerSender:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._connections: dict[int, tuple[BrokerConnection, anyio.Lock]] = {}

    async def send(self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                   commit: bool, partitions: Sequence[TopicPartition],
                   still_coordinator: Callable[[], bool]) -> bool:
        """Write the markers to every partition; False when this broker stopped
        coordinating the transaction (or was fenced) before that was done."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S
        while remaining:
            if not still_coordinator():
                return False
            # a deleted topic's partitions need no marker (Kafka does the same)
            remaining = {tp for tp in remaining if self.ctx.metadata.partition(*tp) is not None}
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                state = self.ctx.metadata.partition(*tp)
                if state is not None and state.leader >= 0:
                    by_leader.setdefault(state.leader, []).append(tp)
            results: dict[TopicPartition, ErrorCode] = {}

            async def one(leader: int, tps: list[TopicPartition],
                          results: dict[TopicPartition, ErrorCode]) -> None:
                if leader == self.ctx.broker_id:
                    results.update(await markers.write_markers(
                        self.ctx, producer_id=producer_id, producer_epoch=producer_epoch,
                        coordinator_epoch=coordinator_epoch, commit=commit, partitions=tps))
                else:
                    results.update(await self._remote(leader, producer_id, producer_epoch,
                                                      coordinator_epoch, commit, tps))

            async with anyio.create_task_group() as tg:
                for leader, tps in by_leader.items():
                    tg.start_soon(one, leader, tps, results)
            for tp, code in results.items():
                if code == ErrorCode.NONE:
                    remaining.discard(tp)
                elif code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                    log.info("transaction markers of producer %d: a newer coordinator wrote to "
                             "%s-%d; leaving the transaction to it", producer_id, *tp)
                    return False
                elif code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    # the partition knows a newer epoch of this producer: nothing of this
                    # transaction can still be open there
                    log.warning("marker for producer %d epoch %d on %s-%d: %s; skipped",
                                producer_id, producer_epoch, tp[0], tp[1], code.name)
                    remaining.discard(tp)
                else:
                    log.debug("marker for producer %d on %s-%d: %s; retrying", producer_id,
                              tp[0], tp[1], code.name)
            if remaining:
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        return True

    async def _remote(self, leader: int, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int, commit: bool, tps: list[TopicPartition]
                      ) -> dict[TopicPartition, ErrorCode]:
        endpoint = self.ctx.metadata.broker(leader)
        if endpoint is None:
            return {tp: ErrorCode.NOT_LEADER_OR_FOLLOWER for tp in tps}
        held = self._connections.get(leader)
        if held is None or (held[0].host, held[0].port) != (endpoint.host, endpoint.port):
            held = (connect_peer(self.ctx.config, endpoint,
                                 f"broker-{self.ctx.broker_id}-txn-markers", REQUEST_TIMEOUT_S),
                    anyio.Lock())
            self._connections[leader] = held
        connection, lock = held
        topics: dict[str, list[int]] = {}
        for topic, index in tps:
            topics.setdefault(topic, []).append(index)
        body = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]}
        try:
            async with lock:
                response = await connection.request(WRITE_TXN_MARKERS,
                                                    WRITE_TXN_MARKERS_VERSION, body)
        except BrokerUnreachable as exc:
            log.info("transaction markers to broker %d: %s", leader, exc)
            return {tp: ErrorCode.NOT_LEADER_OR_FOLLOWER for tp in tps}
        results = {tp: ErrorCode.UNKNOWN_SERVER_ERROR for tp in tps}
        for marker in response.get("markers") or []:
            for topic in marker.get("topics") or []:
                for part in topic.get("partitions") or []:
                    key = (topic["name"], part["partition_index"])
                    if key in results:
                        try:
                            results[key] = ErrorCode(part["error_code"])
                        except ValueError:
                            results[key] = ErrorCode.UNKNOWN_SERVER_ERROR
        return results

    async def close(self) -> None:
        for connection, _ in self._connections.values():
            await connection.close()
        self._connections.clear()
