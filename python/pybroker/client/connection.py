"""An async Kafka-protocol connection from this broker to another one, for the
replica fetcher (Fetch with replica_id set, OffsetForLeaderEpoch, ListOffsets).

One request in flight at a time: a fetcher waits for each answer before it
sends the next, so nothing more is needed. Every call is bounded by a timeout;
any failure closes the connection and raises BrokerUnreachable, and the caller
reconnects after its backoff."""

from __future__ import annotations

import struct
from typing import Any

import anyio
import anyio.abc

from pybroker import protocol
from pybroker.security.inter_broker import InterBrokerSecurity
from pybroker.security.scram import SaslFailed

#: a response larger than this is refused (a follower asks for at most
#: replica.fetch.response.max.bytes, so a bigger frame means a broken peer)
RESPONSE_BYTES_MAX = 256 << 20


class BrokerUnreachable(Exception):
    """The other broker could not be reached or answered nonsense."""


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 security: InterBrokerSecurity | None = None) -> None:
        self.host = host
        #: TLS and SASL of the inter-broker listener (pybroker.security.inter_broker)
        self.security = security
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._stream: anyio.abc.SocketStream | None = None
        self._correlation_id = 0
        self._buffer = bytearray()

    async def request(self, api_key: int, api_version: int, body: dict[str, Any],
                      timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request and return the decoded response body."""
        try:
            with anyio.fail_after(timeout_s if timeout_s is not None else self.timeout_s):
                if self._stream is None:
                    await self._connect()
                return await self._exchange(api_key, api_version, body)
        except BrokerUnreachable:
            await self.close()
            raise
        except (OSError, TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError,
                protocol.ProtocolError, SaslFailed) as exc:
            await self.close()
            raise BrokerUnreachable(f"{self}: {exc!r}") from exc

    async def _connect(self) -> None:
        security = self.security
        if security is None or security.ssl_context is None:
            self._stream = await anyio.connect_tcp(self.host, self.port)
        else:
            self._stream = await anyio.connect_tcp(
                self.host, self.port, ssl_context=security.ssl_context,
                tls_standard_compatible=False)
        if security is not None:
            await security.authenticate(self._exchange)

    async def _exchange(self, api_key: int, api_version: int,
                        body: dict[str, Any]) -> dict[str, Any]:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        parts = protocol.encode_request(api_key, api_version, self._correlation_id,
                                        self.client_id, body)
        assert self._stream is not None
        await self._stream.send(b"".join(bytes(p) for p in parts))
        (size,) = struct.unpack(">i", await self._receive(4))
        if not 4 <= size <= RESPONSE_BYTES_MAX:
            raise BrokerUnreachable(f"response size {size} from {self}")
        frame = await self._receive(size)
        correlation_id, decoded = protocol.decode_response(api_key, api_version, frame)
        if correlation_id != self._correlation_id:
            raise BrokerUnreachable(
                f"correlation id {correlation_id} != {self._correlation_id} from {self}")
        return decoded

    async def _receive(self, count: int) -> bytes:
        assert self._stream is not None
        while len(self._buffer) < count:
            self._buffer += await self._stream.receive()
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        self._buffer.clear()
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    def __str__(self) -> str:
        return f"broker at {self.host}:{self.port}"
