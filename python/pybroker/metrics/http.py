"""The Prometheus scrape endpoint: a minimal HTTP/1.0-style server on anyio.

`GET /metrics` (or `/`) answers the text exposition and closes the connection;
anything else gets 404 / 405. Requests are bounded (head at most
`REQUEST_HEAD_BYTES_MAX`, `REQUEST_TIMEOUT_S` to send it)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from pybroker.errors import BUG_REPORT
from pybroker.metrics.exposition import CONTENT_TYPE, render

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

REQUEST_HEAD_BYTES_MAX = 8192
REQUEST_TIMEOUT_S = 10.0
PATHS = ("/metrics", "/")


def response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8",
             head_only: bool = False) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return head if head_only else head + body


def answer(broker: BrokerContext, request_head: bytes) -> bytes:
    """The response bytes for one request head (everything before the blank line)."""
    try:
        method, target, _ = request_head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    except ValueError:
        return response("400 Bad Request", b"bad request\n")
    path = target.split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return response("405 Method Not Allowed", b"only GET\n")
    if path not in PATHS:
        return response("404 Not Found", b"metrics are at /metrics\n")
    body = render(broker.metrics, broker).encode()
    return response("200 OK", body, CONTENT_TYPE, head_only=method == "HEAD")


async def handle_client(broker: BrokerContext, stream: anyio.abc.SocketStream) -> None:
    async with stream:
        head = b""
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                while b"\r\n\r\n" not in head and b"\n\n" not in head:
                    if len(head) > REQUEST_HEAD_BYTES_MAX:
                        await stream.send(response("431 Request Header Fields Too Large", b""))
                        return
                    head += await stream.receive(4096)
                await stream.send(answer(broker, head))
        except (anyio.EndOfStream, anyio.BrokenResourceError, TimeoutError, OSError):
            return
        except Exception:
            log.exception("a /metrics request failed (the scraper gets no answer and "
                          "tries again); " + BUG_REPORT)


async def serve_metrics(broker: BrokerContext, host: str, port: int, *,
                        task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Listen on host:port and answer scrapes until cancelled."""
    listener = await anyio.create_tcp_listener(local_host=host or None, local_port=port,
                                               reuse_port=False)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    log.info("metrics on http://%s:%d/metrics", host or "0.0.0.0", bound)
    task_status.started(bound)
    async with listener:
        await listener.serve(lambda stream: handle_client(broker, stream))
