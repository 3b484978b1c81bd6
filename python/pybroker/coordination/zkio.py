"""kazoo's socket I/O, made cheap per message (issue 25).

kazoo's connection thread handles one ZooKeeper message per turn of its loop, and every
turn costs three select() calls (the loop's own, then one before each of the two recv()s
of the message: its length, then its body), each of which builds and closes an epoll
object (kazoo's selector_select: five system calls and a good deal of Python). Under
the GIL that the broker's event loop shares, that capped a client at about 1,000-1,500
messages a second on this 2-core machine: a controller's batch of 10,000 state changes
reached each watching broker as 10,000 notifications, taking it 8-30 s to take in.

Two changes, both below kazoo's protocol handling (which is untouched):
- `PollSelect.select`: one poll() system call instead of the epoll object per call.
- `ReadBuffer`: the connection's `_read` (kazoo's ConnectionHandler method, replaced
  on our client's instance) receives up to READ_CHUNK bytes at a time into a buffer
  and serves the reads from it, so a burst of small messages costs one recv() and no
  select() each. The loop's select() reports the socket readable while the buffer
  holds bytes (with a zero timeout, so the loop's other descriptor, the request
  queue's wake-up socket, is still looked at every turn). The buffer belongs to one
  socket: a new connection starts with an empty one.

If kazoo's internals are not as expected (a kazoo release that changed them), the
buffer is not installed and kazoo reads as it always did."""

from __future__ import annotations

import logging
import select
import ssl
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import ConnectionDropped
from kazoo.handlers.threading import SequentialThreadingHandler

log = logging.getLogger(__name__)

#: bytes asked of one recv(): many notifications (~100 bytes each) at a time
READ_CHUNK = 256 * 1024

_READABLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP | select.POLLNVAL
_WRITABLE = select.POLLOUT | select.POLLERR | select.POLLHUP | select.POLLNVAL


def _fd(obj: Any) -> int:
    return obj if isinstance(obj, int) else int(obj.fileno())


class PollSelect(SequentialThreadingHandler):
    """kazoo's threading handler whose select() is one poll() call. `buffered(sock)`
    (set by ReadBuffer) tells it a socket has bytes waiting in user space."""

    buffered: Callable[[Any], bool] = staticmethod(lambda sock: False)

    def select(self, rlist: list[Any], wlist: list[Any], xlist: list[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
        if xlist or not hasattr(select, "poll"):  # kazoo passes none; keep its way if so
            return super().select(rlist, wlist, xlist, timeout)
        ready_now = [r for r in rlist if self.buffered(r)]
        if ready_now:
            timeout = 0
        poller = select.poll()
        masks: dict[int, int] = {}
        for obj in rlist:
            masks[_fd(obj)] = masks.get(_fd(obj), 0) | select.POLLIN | select.POLLPRI
        for obj in wlist:
            masks[_fd(obj)] = masks.get(_fd(obj), 0) | select.POLLOUT
        for fd, mask in masks.items():
            try:
                poller.register(fd, mask)
            except (ValueError, OSError) as exc:  # as kazoo's selector_select
                raise ValueError("Invalid event mask or fd") from exc
        events = dict(poller.poll(None if timeout is None else max(0.0, timeout) * 1000))
        readable = [r for r in rlist if events.get(_fd(r), 0) & _READABLE or r in ready_now]
        writable = [w for w in wlist if events.get(_fd(w), 0) & _WRITABLE]
        return readable, writable, []


class ReadBuffer:
    """Replaces a kazoo ConnectionHandler's `_read(length, timeout)` (see the module
    docstring). Runs on kazoo's connection thread only, as `_read` does."""

    def __init__(self, connection: Any, handler: PollSelect) -> None:
        self.connection = connection
        self.handler = handler
        self._sock: Any = None
        self._buf = bytearray()

    @classmethod
    def install(cls, client: Any, handler: PollSelect) -> ReadBuffer | None:
        connection = getattr(client, "_connection", None)
        if (connection is None or not callable(getattr(connection, "_read", None))
                or not hasattr(connection, "_socket")
                or not callable(getattr(connection, "_socket_error_handling", None))):
            log.info("kazoo's connection is not as expected: its reads are not buffered")
            return None
        reader = cls(connection, handler)
        connection._read = reader.read
        handler.buffered = reader.holds
        return reader

    def holds(self, sock: Any) -> bool:
        """Whether a read on `sock` can be served without waiting."""
        if sock is not self._sock:
            return False
        pending = getattr(sock, "pending", None)  # TLS: decrypted bytes inside ssl
        return bool(self._buf) or (pending is not None and pending() > 0)

    def read(self, length: int, timeout: float) -> bytes:
        sock = self.connection._socket
        if sock is not self._sock:  # a new connection: nothing of the old one is kept
            self._sock, self._buf = sock, bytearray()
        buf = self._buf
        with self.connection._socket_error_handling():
            while len(buf) < length:
                pending = getattr(sock, "pending", None)
                if not (pending is not None and pending() > 0) and not self.handler.select(
                        [sock], [], [], timeout)[0]:
                    raise self.handler.timeout_exception("socket time-out during read")
                try:
                    chunk = sock.recv(max(READ_CHUNK, length - len(buf)))
                except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    # woken without data, or TLS wants more
                    continue
                if not chunk:
                    raise ConnectionDropped("socket connection broken")
                buf += chunk
        out = bytes(buf[:length])
        del buf[:length]
        return out
