"""A small admin client over pybroker's own protocol codec, for the tools whose
APIs confluent-kafka does not offer (AlterPartitionReassignments,
ListPartitionReassignments, ElectLeaders): it reads Metadata from a bootstrap
broker, finds the controller, and sends it requests, retrying retriable errors
(NOT_CONTROLLER while the controller moves, ...). Kafka's wire format, so it works
against any broker that serves these APIs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from pybroker.client.connection import BrokerConnection, BrokerUnreachable
from pybroker.errors import ErrorCode
from pybroker.tools._common import ToolError
from pybroker.tools._retry import Retriable, check, retrying

METADATA = 3
METADATA_VERSION = 8


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
        """Send to the controller; ask again while the answer's error (error_of(response),
        default its top-level error_code) is retriable -- NOT_CONTROLLER while the
        controller moves, a controller still loading -- or no controller is known, up to
        the timeout (tools/_retry.py)."""
        def attempt() -> dict[str, Any]:
            view = self.metadata()
            address = view.brokers.get(view.controller_id)
            if address is None:
                raise Retriable("no controller is known", ErrorCode.NOT_CONTROLLER)
            try:
                response = anyio.run(self._request, address, api_key, version, body)
            except BrokerUnreachable as exc:
                raise Retriable(f"the controller did not answer ({exc})",
                                ErrorCode.NETWORK_EXCEPTION) from None
            code = (error_of or (lambda r: r.get("error_code", 0)))(response)
            check({"error_code": code}, "the controller's answer")
            return response

        try:
            return retrying(attempt, self.timeout_s, "a request to the controller")
        except Retriable as exc:
            raise ToolError(f"the controller did not answer within {self.timeout_s:.0f}s "
                            f"({exc})") from None

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
