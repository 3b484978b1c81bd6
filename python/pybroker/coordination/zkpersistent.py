"""ZooKeeper's persistent recursive watches (3.6+), which kazoo 2.11 does not offer.

A standard ZooKeeper watch fires once and is set again by a read, so whoever keeps one
per znode pays a read per change, one request at a time, and must re-read to learn
what changed after the notification. A persistent recursive watch (addWatch, opcode
106, mode PERSISTENT_RECURSIVE) stays set and reports every creation, data change and
deletion of the watched znode and of every znode below it (no child-list events): the
client learns which znodes changed and reads them when it likes, in multiReads, with
no watch to set again and so no moment in which a change could go unreported.

What the server does not do: keep the watch across a broken connection. Watches live
with the server's connection; the Java client sends them again on reconnect
(SetWatches2), kazoo knows only its own standard watches. So whoever adds one here must
add it again after every reconnect and, since changes in between were not reported,
read everything again (the backends' refresh_all on CONNECTED and after a new session).

kazoo hands a notification to the standard watchers registered for that path and drops
it otherwise; `EventTap` sees every notification first (kazoo's ConnectionHandler
`_read_watch_event`, wrapped on our client's instance) and passes those under a
registered root to its listeners, on kazoo's connection thread (a listener only
records the path and wakes the event loop). One notification can serve both a standard
watch and a persistent one on the same connection (the server sends it once), so
kazoo's own handling runs too whenever kazoo holds a standard watch the notification
can fire; when it holds none (a state change under a broker's recursive watch, 30,000
of them when a controller moves a dead broker's partitions) it is skipped: it would
decode the notification a second time to find nobody to tell (a quarter of the
notification's cost on kazoo's thread, issue 25's fail30k).

Requests as ZooKeeper's jute declares them: AddWatchRequest {ustring path; int mode},
answered with an empty body; RemoveWatchesRequest {ustring path; int type} (opcode 18),
type 5 for a persistent recursive watch. A server before 3.6 answers addWatch with
UNIMPLEMENTED: the caller falls back to standard watches."""

from __future__ import annotations

import logging
import threading
from collections import namedtuple
from collections.abc import Callable
from typing import Any

from kazoo.protocol.serialization import Watch, int_struct, write_string

from pybroker.coordination.zkclient import AsyncKazoo

log = logging.getLogger(__name__)

#: AddWatchModes.persistentRecursive
PERSISTENT_RECURSIVE = 1
#: Watcher.WatcherType.PersistentRecursive, for removeWatches
WATCHER_PERSISTENT_RECURSIVE = 5
#: the notification types a persistent recursive watch sends (EventType values)
CREATED, DELETED, CHANGED = 1, 2, 3

#: (event type, path without the chroot), on kazoo's connection thread
Listener = Callable[[int, str], None]


class AddWatch(namedtuple("AddWatch", "path mode")):
    """addWatch, in kazoo's request shape (type, serialize, deserialize)."""

    type = 106

    def serialize(self) -> bytes:
        return bytes(write_string(self.path)) + int_struct.pack(self.mode)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> None:
        return None


class RemoveWatches(namedtuple("RemoveWatches", "path watcher_type")):
    type = 18

    def serialize(self) -> bytes:
        return bytes(write_string(self.path)) + int_struct.pack(self.watcher_type)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> None:
        return None


def _chrooted(zk: AsyncKazoo, path: str) -> str:
    chroot = zk.kazoo.chroot
    return chroot + path if chroot else path


async def add_recursive_watch(zk: AsyncKazoo, path: str) -> None:
    """Set a persistent recursive watch on `path` (it need not exist). kazoo's errors
    pass through: UnimplementedError from a server before 3.6."""
    result = zk.kazoo.handler.async_result()
    zk.kazoo._call(AddWatch(_chrooted(zk, path), PERSISTENT_RECURSIVE), result)
    await zk.wait(result)


def remove_recursive_watch(zk: AsyncKazoo, path: str) -> None:
    """Ask the server to drop this connection's persistent recursive watch on `path`;
    not awaited (a watch that is gone already, or a connection that is, is fine)."""
    if not zk.kazoo.connected:
        return
    result = zk.kazoo.handler.async_result()
    zk.kazoo._call(RemoveWatches(_chrooted(zk, path), WATCHER_PERSISTENT_RECURSIVE), result)


class EventTap:
    """Passes the notifications under registered roots to their listeners. One per
    client (`for_client`)."""

    def __init__(self, zk: AsyncKazoo) -> None:
        self.zk = zk
        self._listeners: dict[str, list[Listener]] = {}
        self._lock = threading.Lock()
        connection = zk.kazoo._connection
        self._kazoos = connection._read_watch_event
        connection._read_watch_event = self._read_watch_event

    @classmethod
    def for_client(cls, zk: AsyncKazoo) -> EventTap | None:
        """The client's tap, installed on first use; None if kazoo's connection is not
        as expected (a kazoo release that changed it): use standard watches then."""
        tap = getattr(zk, "_event_tap", None)
        if tap is None:
            connection = getattr(zk.kazoo, "_connection", None)
            if not callable(getattr(connection, "_read_watch_event", None)):
                log.info("kazoo's connection is not as expected: no persistent watches")
                return None
            tap = cls(zk)
            zk._event_tap = tap  # type: ignore[attr-defined]
        return tap

    def listen(self, root: str, listener: Listener) -> None:
        with self._lock:
            self._listeners.setdefault(root, []).append(listener)

    def forget(self, root: str, listener: Listener) -> bool:
        """Stop passing `root`'s notifications to `listener`; True when nobody listens
        to that root any more (its server-side watch may go)."""
        with self._lock:
            listeners = self._listeners.get(root, [])
            if listener in listeners:
                listeners.remove(listener)
            if listeners:
                return False
            self._listeners.pop(root, None)
            return True

    def _read_watch_event(self, buffer: bytes, offset: int) -> Any:  # kazoo's thread
        if self._listeners and not self._tapped(buffer, offset):
            return None
        return self._kazoos(buffer, offset)

    def _tapped(self, buffer: bytes, offset: int) -> bool:
        """Pass the notification to the listeners under its path; whether kazoo's own
        handling is due too (False only when a listener took it and kazoo holds no
        standard watch it fires)."""
        try:
            event, _ = Watch.deserialize(buffer, offset)
            kind = event.type
            if kind not in (CREATED, DELETED, CHANGED):
                return True
            kazoo = self.zk.kazoo
            path = kazoo.unchroot(event.path)
            with self._lock:
                matched = [listener for root, listeners in self._listeners.items()
                           if path == root or path.startswith(root + "/")
                           for listener in listeners]
            for listener in matched:
                listener(kind, path)
            # kazoo fires a data watch on the path (any of these three kinds), and a
            # child watch too when the znode was deleted. Looked up on kazoo's thread,
            # which is the one that registers and fires them
            return (not matched or event.path in kazoo._data_watchers
                    or (kind == DELETED and event.path in kazoo._child_watchers))
        except Exception:  # never break kazoo's connection thread
            log.exception("handling a ZooKeeper notification")
            return True
