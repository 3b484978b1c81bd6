"""An async Kafka-protocol connection from this broker to another one, for the
replica fetcher (Fetch with replica_id set, OffsetForLeaderEpoch, ListOffsets).

One request in flight at a time: a fetcher waits for each answer before it
sends the next, so nothing more is needed. Every call is bounded by a timeout;
any failure closes the connection and raises BrokerUnreachable, and the caller
reconnects after its backoff.

A response frame is read into one receive buffer the connection keeps (grown,
never shrunk, up to RESPONSE_BYTES_MAX); on a plaintext connection straight from
the socket (client/transport.py). `request_frame` hands the frame itself to the
caller (the replica fetcher walks a Fetch answer in Rust); `request` decodes a
copy."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from pybroker import _core, protocol
from pybroker.client import transport
from pybroker.client.deadline import RequestDeadline
from pybroker.security.inter_broker import InterBrokerSecurity
from pybroker.security.scram import SaslFailed

#: a response larger than this is refused (a follower asks for at most
#: replica.fetch.response.max.bytes, so a bigger frame means a broken peer)
RESPONSE_BYTES_MAX = 256 << 20
#: the receive buffer's first size; a larger frame replaces it with one twice as big
FRAME_BUFFER_BYTES_INITIAL = 1 << 20
INT32 = struct.Struct(">i")
#: the replica Fetch request_fetch sends, and the one version its answer is read at
FETCH = 1
FETCH_VERSION = 12


if sys.version_info < (3, 11):
    @contextlib.asynccontextmanager
    async def deadline(seconds: float) -> AsyncIterator[None]:
        with anyio.fail_after(seconds):
            yield


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
        self._stream: transport.Transport | None = None
        self._correlation_id = 0
        #: the receive buffer frames are read into (allocated on the first frame)
        self._frame = bytearray()
        #: where in it the bytes received past the last frame are (a peer that answered
        #: early): the next frame starts with them
        self._early_start = 0
        self._early_end = 0
        #: the requests' time limit: one loop timer for the connection (client/deadline.py)
        self._deadline = RequestDeadline()
        #: the replica Fetch's encoder and receive buffer (made on the first Fetch)
        self._fetch_channel: _core.FetchChannel | None = None

    async def request(self, api_key: int, api_version: int, body: dict[str, Any],
                      timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request and return the decoded response body."""
        return await self._call(self._exchange, api_key, api_version, body, timeout_s)

    async def request_frame(self, api_key: int, api_version: int, body: dict[str, Any],
                            timeout_s: float | None = None) -> memoryview:
        """Send one request and return its response frame (header and body, without
        the size prefix; the correlation id checked), undecoded. The view is into the
        connection's receive buffer: valid until the next request on it."""
        return await self._call(self._exchange_frame, api_key, api_version, body, timeout_s)

    async def request_fetch(self, body: dict[str, Any],
                            logs: Callable[[], dict[tuple[str, int], Any]],
                            timeout_s: float | None = None) -> _core.FetchApplied:
        """Send a replica Fetch (v12) and apply its answer: every partition's records
        appended to `logs()[(topic, partition)]` (called once the answer is whole, so
        it names only the logs still followed then), as _core.apply_fetch_response
        does. On a plaintext connection the request is encoded and the answer read and
        applied in Rust (_core.FetchChannel): Python only waits for readiness between
        reads (issue 26). A malformed answer closes the connection (BrokerUnreachable)."""
        async def exchange(api_key: int, api_version: int, body: dict[str, Any]) -> Any:
            return await self._exchange_fetch(body, logs)
        return await self._call(exchange, FETCH, FETCH_VERSION, body, timeout_s)

    async def _call(self, exchange: Any, api_key: int, api_version: int,
                    body: dict[str, Any], timeout_s: float | None) -> Any:
        seconds = timeout_s if timeout_s is not None else self.timeout_s
        try:
            if sys.version_info < (3, 11):
                async with deadline(seconds):
                    if self._stream is None:
                        await self._connect()
                    return await exchange(api_key, api_version, body)
            limit = self._deadline
            limit.start(seconds)
            try:
                if self._stream is None:
                    await self._connect()
                result = await exchange(api_key, api_version, body)
            except asyncio.CancelledError:
                if limit.stop(cancelled=True):
                    raise TimeoutError from None
                raise
            except BaseException:
                limit.stop(cancelled=False)
                raise
            limit.stop(cancelled=False)
            return result
        except BrokerUnreachable:
            await self.close()
            raise
        except (OSError, TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError,
                protocol.ProtocolError, SaslFailed) as exc:
            await self.close()
            raise BrokerUnreachable(f"{self}: {exc!r}") from exc
        except BaseException:
            # cancelled (or anything else) mid-exchange: the rest of an answer may still
            # come, and must not be read as the next one's
            await self.close()
            raise

    async def _connect(self) -> None:
        security = self.security
        self._stream = await transport.connect(
            self.host, self.port, security.ssl_context if security is not None else None)
        if security is not None:
            await security.authenticate(self._exchange)

    async def _exchange(self, api_key: int, api_version: int,
                        body: dict[str, Any]) -> dict[str, Any]:
        frame = await self._exchange_frame(api_key, api_version, body)
        # decoded from a copy: decoded records would be views of the receive buffer
        _, decoded = protocol.decode_response(api_key, api_version, bytes(frame))
        return decoded

    async def _exchange_frame(self, api_key: int, api_version: int,
                              body: dict[str, Any]) -> memoryview:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        parts = protocol.encode_request(api_key, api_version, self._correlation_id,
                                        self.client_id, body)
        assert self._stream is not None
        await self._stream.send(b"".join(bytes(p) for p in parts))
        frame = await self._read_frame()
        (correlation_id,) = INT32.unpack_from(frame)
        if correlation_id != self._correlation_id:
            raise BrokerUnreachable(
                f"correlation id {correlation_id} != {self._correlation_id} from {self}")
        return frame

    async def _exchange_fetch(self, body: dict[str, Any],
                              logs: Callable[[], dict[tuple[str, int], Any]]
                              ) -> _core.FetchApplied:
        stream = self._stream
        assert stream is not None
        self._correlation_id = correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        channel = self._fetch_channel
        if channel is None:
            channel = self._fetch_channel = _core.FetchChannel(self.client_id,
                                                               RESPONSE_BYTES_MAX)
        request = channel.encode_fetch(correlation_id, body)
        await stream.send(request)
        try:
            if isinstance(stream, transport.SocketTransport) and \
                    self._early_end == self._early_start:
                fd = stream.fileno()
                # the request has just gone out: its answer is not there yet
                await stream.wait_readable(4)
                while need := channel.receive(fd):
                    await stream.wait_readable(need)
                return channel.apply(correlation_id, logs())
            # TLS (anyio's stream makes the chunks), or bytes held from an earlier answer
            frame = await self._read_frame()
            (answered,) = INT32.unpack_from(frame)
            if answered != correlation_id:
                raise BrokerUnreachable(
                    f"correlation id {answered} != {correlation_id} from {self}")
            return _core.apply_fetch_response(frame, FETCH_VERSION, logs())
        except _core.CorruptRecordError as exc:
            raise BrokerUnreachable(f"{self}: {exc}") from exc

    async def _read_frame(self) -> memoryview:
        """The next response frame (without its size prefix), read into the receive
        buffer: the prefix and as much of the frame as is there in one receive, not a
        receive of the four bytes first (a syscall and a loop turn fewer per follower
        round trip, issue 26). Bytes past the frame (a peer that answers early) are kept
        for the next one."""
        assert self._stream is not None
        if not self._frame:
            self._frame = bytearray(FRAME_BUFFER_BYTES_INITIAL)
        buf = self._frame
        have = self._early_end - self._early_start
        if have:
            buf[:have] = buf[self._early_start:self._early_end]
            self._early_start = self._early_end = 0
        view = memoryview(buf)
        # nothing held: the request has just gone out and its answer is not there yet
        wait_first = not have
        while have < 4:
            # the wake-up waits for the prefix only: the frame may be small
            have += await self._stream.receive_into(view[have:], 4 - have,
                                                    wait_first=wait_first)
            wait_first = False
        (size,) = INT32.unpack_from(view)
        if not 4 <= size <= RESPONSE_BYTES_MAX:
            raise BrokerUnreachable(f"response size {size} from {self}")
        end = 4 + size
        if have > end:
            self._early_start, self._early_end = end, have
        elif len(view) < end:
            # a new buffer rather than a resize: a caller's view of the old one stays valid
            grown = bytearray(min(RESPONSE_BYTES_MAX + 4, max(end, 2 * len(view))))
            grown[:have] = view[:have]
            self._frame = grown
            view = memoryview(grown)
        while have < end:
            have += await self._stream.receive_into(view[have:end])
        return view[4:end]

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        self._early_start = self._early_end = 0
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    def __str__(self) -> str:
        return f"broker at {self.host}:{self.port}"
