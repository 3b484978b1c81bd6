"""A small admin client over pybroker's own protocol codec, for the tools whose
APIs confluent-kafka does not offer (AlterPartitionReassignments,
ListPartitionReassignments, ElectLeaders): it reads Metadata from a bootstrap
broker, finds the controller, and sends it requests, retrying NOT_CONTROLLER
while the controller moves. Kafka's wire format, so it works against any
broker that serves these APIs."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from pybroker.client.connection import BrokerConnection, BrokerUnreachable
from pybroker.errors import ErrorCode
from pybroker.tools._common import ToolError

METADATA = 3
METADATA_VERSION = 8
#: pause before asking again for the controller after NOT_CONTROLLER
RETRY_S = 0.5


@dataclass
class ClusterView:
    """What Metadata said: brokers (id -> host, port), the controller, and each
    topic's partitions as (leader, replicas, isr)."""

    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, dict[int, tuple[int, list[int], list[int]]]] = field(default_factory=dict)


class RawAdmin:
    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        self.bootstrap = []
        for item in bootstrap.split(","):
            host, _, port = item.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ToolError(f"invalid --bootstrap-server '{item}': expected host:port")
            self.bootstrap.append((host, int(port)))
        self.timeout_s = timeout_s

    def metadata(self) -> ClusterView:
        return anyio.run(self._metadata)

    def controller_request(self, api_key: int, version: int, body: dict[str, Any],
                           error_of: Any = None) -> dict[str, Any]:
        """Send to the controller; retry while the answer (error_of(response), default
        its top-level error_code) is NOT_CONTROLLER, up to the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            view = self.metadata()
            address = view.brokers.get(view.controller_id)
            if address is not None:
                try:
                    response = anyio.run(self._request, address, api_key, version, body)
                except BrokerUnreachable as exc:
                    response = None
                    reason = str(exc)
                else:
                    code = (error_of or (lambda r: r.get("error_code", 0)))(response)
                    if code != ErrorCode.NOT_CONTROLLER:
                        return response
                    reason = "NOT_CONTROLLER"
            else:
                reason = "no controller is known"
            if time.monotonic() >= deadline:
                raise ToolError(f"the controller did not answer within {self.timeout_s:.0f}s "
                                f"({reason})")
            time.sleep(RETRY_S)

    async def _request(self, address: tuple[str, int], api_key: int, version: int,
                       body: dict[str, Any]) -> dict[str, Any]:
        connection = BrokerConnection(address[0], address[1], "pybroker-admin", self.timeout_s)
        try:
            return await connection.request(api_key, version, body)
        finally:
            await connection.close()

    async def _metadata(self) -> ClusterView:
        last: Exception | None = None
        for address in self.bootstrap:
            try:
                response = await self._request(address, METADATA, METADATA_VERSION, {
                    "topics": None, "allow_auto_topic_creation": False})
            except BrokerUnreachable as exc:
                last = exc
                continue
            view = ClusterView(
                brokers={b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]},
                controller_id=response["controller_id"])
            for topic in response["topics"]:
                if topic["error_code"] != 0:
                    continue
                view.topics[topic["name"]] = {
                    p["partition_index"]: (p["leader_id"], list(p["replica_nodes"]),
                                           list(p["isr_nodes"]))
                    for p in topic["partitions"]}
            return view
        raise ToolError(f"no broker of {self.bootstrap} answered: {last}")
