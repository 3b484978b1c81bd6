"""Decode a request frame, run its handler, encode and write the response."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from pybroker import protocol
from pybroker.errors import BUG_REPORT, ErrorCode
from pybroker.handlers.registry import HANDLERS
from pybroker.security.authorizer import authorizer_for
from pybroker.security.checks import authorize_request
from pybroker.security.client_quotas import quotas_for
from pybroker.server.bad_requests import RateLimitedLog
from pybroker.server.connection import SMALL_FRAME_BYTES, Connection
from pybroker.server.deferred import MAX_DEFERRED, DeferredAnswers, DeferredResponse

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext

log = logging.getLogger(__name__)
#: refused requests, logged at a bounded rate (a hostile client must not fill the log)
refused = RateLimitedLog(log)

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
#: produce acks of requests up to this size are held to go out together (see handle_frame)
COALESCE_REQUEST_BYTES = SMALL_FRAME_BYTES


@dataclasses.dataclass
class Request:
    header: protocol.RequestHeader
    body: dict[str, Any]
    connection: Connection
    received_ms: float
    #: the handler may answer with a DeferredResponse (see pybroker.server.deferred)
    may_defer: bool = False

    @property
    def version(self) -> int:
        return self.header.api_version


class Dispatcher:
    def __init__(self, ctx: BrokerContext) -> None:
        self.context = ctx
        self.metrics = ctx.metrics
        #: the ACL authorizer (authorizer.class.name), None without one
        self.authorizer = authorizer_for(ctx.config, ctx.admin.backend)
        #: client quotas (producer/consumer byte rates, request percentage)
        self.quotas = quotas_for(ctx.config, ctx.admin.backend)

    async def handle_frame(self, conn: Connection, frame: memoryview) -> bool:
        """Handle one request; False closes the connection."""
        # a connection from a listener has its session (pybroker.security.session)
        session = getattr(conn, "session", None)
        if session is not None and session.raw_sasl:
            from pybroker.handlers.sasl import handle_raw_token

            return await handle_raw_token(self.context, conn, frame)
        try:
            header, body = protocol.decode_request(frame)
        except protocol.UnsupportedVersionError as exc:
            if exc.header.api_key == API_VERSIONS_KEY:
                # clients probe with their newest ApiVersions: answer v0 with the ranges
                await conn.write(protocol.encode_response(
                    API_VERSIONS_KEY, 0, exc.header.correlation_id,
                    api_versions_body(ErrorCode.UNSUPPORTED_VERSION)))
                return True
            refused.warning("closing %s: unsupported version %d of API %d", conn.peer,
                        exc.header.api_version, exc.header.api_key)
            return False
        except protocol.UnknownApiError as exc:
            refused.warning("closing %s: unknown API key (%s)", conn.peer, exc)
            return False
        except protocol.MalformedRequestError as exc:
            refused.warning("closing %s: malformed request: %s", conn.peer, exc)
            return False
        spec = HANDLERS.get(header.api_key)
        if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
            if spec is not None and header.api_key == API_VERSIONS_KEY:
                await conn.write(protocol.encode_response(
                    API_VERSIONS_KEY, 0, header.correlation_id,
                    api_versions_body(ErrorCode.UNSUPPORTED_VERSION)))
                return True
            refused.warning("closing %s: API %d v%d not supported", conn.peer, header.api_key,
                        header.api_version)
            return False
        if session is not None and not session.admits(header.api_key):
            refused.warning("closing %s: %s v%d before SASL authentication completed (or "
                            "after its session expired)", conn.peer,
                            protocol.APIS[header.api_key].name, header.api_version)
            return False
        # only produce acks are held back to be sent together; anything else (a fetch
        # may long-poll) first lets earlier answers go. Holding pays only for small
        # requests (a send per tiny request was a third of the broker's time at
        # linger.ms=0); a large request's ack goes at once, with those held before it,
        # as Kafka sends each response when it is ready: held behind the next large
        # request being read, acks of a pipelining producer came back in bursts and
        # doubled its request latency (issue 18, bench/RESULTS.md)
        coalesce = header.api_key == PRODUCE_KEY and len(frame) <= COALESCE_REQUEST_BYTES
        quotas = self.quotas if self.quotas.active else None
        # an acks=all produce may leave its wait for the followers behind and let the
        # connection read on (pybroker.server.deferred); not under client quotas, whose
        # throttle time is the response's and mutes the connection
        deferred: DeferredAnswers | None = getattr(conn, "deferred", None)
        may_defer = (deferred is not None and quotas is None and header.api_key == PRODUCE_KEY
                     and body.get("acks") == -1)
        if deferred:
            if may_defer:
                await deferred.wait_below(MAX_DEFERRED)
            else:
                # anything else is handled once every earlier answer is out, as if the
                # connection had waited for each
                await deferred.drain()
        if not coalesce:
            await conn.flush()
        decision = None
        if self.authorizer is not None:
            decision = await authorize_request(self.authorizer, conn, header.api_key,
                                               header.api_version, body, self.metrics,
                                               self.context.metadata)
            if decision is not None and decision.close:
                return False
        request = Request(header, body, conn, time.monotonic(), may_defer)
        # marks the connection busy (not idle); a handler still waiting after a
        # moment gets its socket watched by the sweeper, and is cancelled if the
        # client goes away meanwhile (see pybroker.server.registry)
        conn.request_started(request.received_ms)
        cpu_start = time.process_time() if quotas is not None else 0.0
        try:
            if decision is not None and decision.response is not None:
                response = decision.response
            else:
                response = await spec.fn(self.context, request)
                if (decision is not None and decision.merge is not None and response is not None
                        and not isinstance(response, DeferredResponse)):
                    decision.merge(response)
        except Exception:
            log.exception("%s v%d from %s failed: the connection is closed (the client "
                          "reconnects and retries); " + BUG_REPORT,
                          protocol.APIS[header.api_key].name, header.api_version, conn.peer)
            return False
        finally:
            conn.request_done()
        if deferred is not None and (isinstance(response, DeferredResponse)
                                     or (may_defer and deferred)):
            # answered later (or now, but after answers still owed): the connection
            # reads on. Nothing here may keep the request (its bytes are reused)
            merge = decision.merge if decision is not None else None
            waits = response if isinstance(response, DeferredResponse) else None
            deferred.add(waits, functools.partial(self._answer_later, header, response,
                                                  merge, request.received_ms))
            return True
        throttle_ms = 0
        if response is not None:
            if quotas is not None:
                throttle_ms = await quotas.on_response(
                    conn, header.api_key, header.client_id, len(frame), response,
                    time.process_time() - cpu_start)
            await conn.write(protocol.encode_response(
                header.api_key, header.api_version, header.correlation_id, response),
                flush=not coalesce or throttle_ms > 0)
        if throttle_ms:
            # Kafka mutes the channel for the throttle time: nothing more is read
            self.metrics.throttled(protocol.APIS[header.api_key].name, throttle_ms)
            await anyio.sleep(throttle_ms / 1000)
        self.metrics.observe_request(header.api_key, time.monotonic() - request.received_ms)
        if session is not None and session.close_after_response:
            await conn.flush()
            return False
        return True


    def _answer_later(self, header: protocol.RequestHeader,
                      response: DeferredResponse | dict[str, Any],
                      merge: Callable[[dict[str, Any]], None] | None,
                      received_ms: float) -> list[object]:
        """The encoded answer of a request whose handler deferred it (called once it
        is settled or past its deadline)."""
        if isinstance(response, DeferredResponse):
            response = response.finish()
            if merge is not None:
                merge(response)
        self.metrics.observe_request(header.api_key, time.monotonic() - received_ms)
        return protocol.encode_response(header.api_key, header.api_version,
                                        header.correlation_id, response)


def api_versions_body(error: ErrorCode = ErrorCode.NONE) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "api_keys": [
            {"api_key": s.api_key, "min_version": s.advertised[0],
             "max_version": s.advertised[1]}
            for s in sorted(HANDLERS.values(), key=lambda s: s.api_key)
        ],
        "throttle_time_ms": 0,
    }
