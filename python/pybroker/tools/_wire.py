"""A small blocking Kafka-protocol client for the tools whose requests confluent-kafka
does not make, or does not report whole (DescribeLogDirs; DescribeConfigs synonyms,
which librdkafka keys by name and so loses a key set in several layers).

It speaks pybroker's codec (pybroker.protocol), so it works against stock Kafka as
well: each connection starts with ApiVersions and every request uses the highest
version both sides know. Requests for a broker go to that broker's advertised
address, learnt from Metadata. Every call is bounded by the tool's timeout."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from pybroker import protocol
from pybroker.tools._common import ToolError

API_VERSIONS = 18
METADATA = 3
#: Metadata version asked for: v4+ is what Kafka 4 still serves; an empty topic list
#: (not null) asks for brokers only
METADATA_VERSION = 4
RESPONSE_BYTES_MAX = 256 << 20


class WireClient:
    def __init__(self, bootstrap: str, timeout_ms: int) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_ms / 1000
        self._addresses: dict[int, tuple[str, int]] = {}
        self._sockets: dict[tuple[str, int], socket.socket] = {}
        self._versions: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
        self._correlation = 0

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- routing ----------------------------------------------------------------
    def brokers(self) -> dict[int, tuple[str, int]]:
        """Live brokers (id -> host, port), from any bootstrap server."""
        if not self._addresses:
            answer = self._request_any(METADATA, {"topics": [], "allow_auto_topic_creation":
                                                  False})
            self._addresses = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
        return dict(self._addresses)

    def leaders(self, topics: list[str] | None = None) -> dict[tuple[str, int], int]:
        """(topic, partition) -> leader id (-1 when none) of `topics` (None: all)."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        answer = self._request_any(METADATA, body)
        self._addresses = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
        return {(t["name"], p["partition_index"]): p["leader_id"]
                for t in answer["topics"] if t["error_code"] == 0 for p in t["partitions"]}

    def request(self, api_key: int, body: dict[str, Any], node: int | None = None,
                max_version: int | None = None) -> dict[str, Any]:
        """Send one request (to broker `node`, or to any bootstrap server) at the highest
        version both sides support (at most max_version); the decoded response."""
        if node is None:
            return self._request_any(api_key, body, max_version)
        address = self.brokers().get(node)
        if address is None:
            raise ToolError(f"broker {node} is not in the cluster")
        return self._call(address, api_key, body, max_version)

    def _request_any(self, api_key: int, body: dict[str, Any],
                     max_version: int | None = None) -> dict[str, Any]:
        last: Exception | None = None
        for item in self.bootstrap.split(","):
            host, _, port = item.strip().rpartition(":")
            try:
                return self._call((host, int(port)), api_key, body, max_version)
            except (OSError, ValueError) as exc:
                last = exc
        raise ToolError(f"no broker reachable at {self.bootstrap} within "
                        f"{int(self.timeout_s * 1000)} ms (last error: {last})")

    # --- one call ---------------------------------------------------------------
    def _call(self, address: tuple[str, int], api_key: int, body: dict[str, Any],
              max_version: int | None) -> dict[str, Any]:
        api = protocol.APIS[api_key]
        theirs = self._broker_versions(address).get(api_key)
        top = min(api.max_version, max_version if max_version is not None else api.max_version)
        if theirs is None or theirs[1] < api.min_version or theirs[0] > top:
            raise ToolError(f"the broker at {address[0]}:{address[1]} does not support "
                            f"{api.name}")
        return self._send(address, api_key, min(top, theirs[1]), body)

    def _broker_versions(self, address: tuple[str, int]) -> dict[int, tuple[int, int]]:
        if address not in self._versions:
            answer = self._send(address, API_VERSIONS, 0, {})
            self._versions[address] = {a["api_key"]: (a["min_version"], a["max_version"])
                                       for a in answer["api_keys"]}
        return self._versions[address]

    def _send(self, address: tuple[str, int], api_key: int, version: int,
              body: dict[str, Any]) -> dict[str, Any]:
        sock = self._sockets.get(address)
        if sock is None:
            sock = socket.create_connection(address, timeout=self.timeout_s)
            self._sockets[address] = sock
        deadline = time.monotonic() + self.timeout_s
        self._correlation += 1
        parts = protocol.encode_request(api_key, version, self._correlation, "pybroker-tools",
                                        body)
        try:
            sock.sendall(b"".join(bytes(p) for p in parts))
            (size,) = struct.unpack(">i", _receive(sock, 4, deadline))
            if not 4 <= size <= RESPONSE_BYTES_MAX:
                raise OSError(f"response size {size}")
            correlation, decoded = protocol.decode_response(api_key, version,
                                                            _receive(sock, size, deadline))
        except (OSError, protocol.ProtocolError):
            sock.close()
            self._sockets.pop(address, None)
            raise
        if correlation != self._correlation:
            raise OSError(f"correlation id {correlation} != {self._correlation}")
        return decoded


def _receive(sock: socket.socket, count: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        sock.settimeout(left)
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return bytes(data)


#: Kafka's default messages of the errors the tools print per partition (the text of
#: the exception the Java tools print); other codes print their name
KAFKA_MESSAGES = {
    "OFFSET_OUT_OF_RANGE": "The requested offset is not within the range of offsets "
                           "maintained by the server.",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "LEADER_NOT_AVAILABLE": "There is no leader for this topic-partition as we are in the "
                            "middle of a leadership election.",
    "NOT_LEADER_OR_FOLLOWER": "For requests intended only for the leader, this error "
                              "indicates that the broker is not the current leader. For "
                              "requests intended for any replica, this error indicates that "
                              "the broker is not a replica of the topic partition.",
    "REQUEST_TIMED_OUT": "The request timed out.",
    "POLICY_VIOLATION": "Request parameters do not satisfy the configured policy.",
}


def error_text(code: int) -> str:
    """A Kafka error code as the Java tools print it: the exception's message."""
    from pybroker.errors import ErrorCode

    try:
        name = ErrorCode(code).name
    except ValueError:
        return f"error code {code}"
    return KAFKA_MESSAGES.get(name, name)
