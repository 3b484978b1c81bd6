"""A blocking client over pybroker's own codec, for protocol-level tests of flexible
versions (rawclient.py hand-encodes the classic ones): any API, any version, a dict body
with Kafka's field names; the broker is a real process on a real socket."""

from __future__ import annotations

import socket
import struct
from typing import Any

from pybroker import protocol

TIMEOUT_S = 15.0


class ProtoClient:
    def __init__(self, bootstrap: str, client_id: str = "proto-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.sock.settimeout(TIMEOUT_S)
        self.client_id = client_id
        self.correlation_id = 0

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        parts = protocol.encode_request(api_key, version, self.correlation_id, self.client_id,
                                        body)
        self.sock.sendall(b"".join(bytes(p) for p in parts))
        (size,) = struct.unpack(">i", self._recv(4))
        correlation_id, decoded = protocol.decode_response(api_key, version, self._recv(size))
        assert correlation_id == self.correlation_id
        return decoded

    def sasl_plain(self, user: str, password: str) -> None:
        """Authenticate with SASL/PLAIN (SaslHandshake v1, then SaslAuthenticate v2)."""
        shake = self.request(17, 1, {"mechanism": "PLAIN"})
        assert shake["error_code"] == 0, shake
        token = b"\0" + user.encode() + b"\0" + password.encode()
        reply = self.request(36, 2, {"auth_bytes": token})
        assert reply["error_code"] == 0, reply

    def _recv(self, count: int) -> bytes:
        buf = bytearray()
        while len(buf) < count:
            chunk = self.sock.recv(count - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> ProtoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
