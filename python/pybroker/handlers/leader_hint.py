"""KIP-951 leader hints: a Produce (v10+) answered NOT_LEADER_OR_FOLLOWER, or a Fetch
(v16+) answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, names the partition's
current leader and epoch, and the answer carries that leader's endpoint on the client's
listener, so the client moves on without a metadata round trip. As Kafka's
KafkaApis.getCurrentLeader: (-1, -1) for a partition the metadata does not know, and no
endpoint for a leader that is not alive."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.security.session import listener_of

if TYPE_CHECKING:
    from pybroker.metadata.cache import MetadataCache


class LeaderHints:
    def __init__(self, metadata: MetadataCache, conn: object) -> None:
        self.metadata = metadata
        self.conn = conn
        self._endpoints: dict[int, dict[str, Any]] = {}

    def current_leader(self, topic: str, index: int) -> dict[str, int]:
        state = self.metadata.partition(topic, index)
        if state is None:
            return {"leader_id": -1, "leader_epoch": -1}
        node = self.metadata.brokers.get(state.leader)
        if node is not None:
            # the listener is looked up only for a hint given: an answer without an
            # error (every acks=all produce, issue 26) needs none
            host, port = node.address(listener_of(self.conn))
            self._endpoints[node.node_id] = {"node_id": node.node_id, "host": host,
                                             "port": port, "rack": node.rack}
        return {"leader_id": state.leader, "leader_epoch": state.leader_epoch}

    def node_endpoints(self) -> list[dict[str, Any]]:
        return list(self._endpoints.values())
