"""Every partition state, through persistent recursive watches (issue 25).

One persistent recursive watch per topic, on /brokers/topics/<topic>/partitions
(zkpersistent.py), reports each of its partition state znodes that is created, changed
or deleted; a standard children watch on /brokers/topics finds the topics (as before).
The changed states are collected (on kazoo's thread: a set, and one wake-up of the
dispatcher while a re-read is due), then read in multiReads, pipelined
(zkmultiread.py): a controller's batch of 10,000 state changes costs a watching broker
about 20 requests, not 10,000 get()s sent one loop turn at a time. The watch is never
set again by a read, so a change made between a notification and its re-read is
reported too (by a notification after the read, and another re-read).

Why not one recursive watch on /brokers/topics: ZooKeeper (3.8 here) then stops
sending the children-changed events of a standard watch that the same connection holds
on that path (the topics watch's, and the controller's), so new topics would go
unseen.

Full re-reads (refresh_all): the first, and after every reconnect or new session (the
backend calls it), since the server forgets these watches with the connection: the
topics are listed, each topic's watch is added again, then its partitions are listed
and its states read, so whatever changes after that is notified. States that vanished
meanwhile are reported gone. A topic found later gets its watch before its states are
read, the same way; a topic gone loses its watch and its states are reported gone.

A server before 3.6 answers addWatch UNIMPLEMENTED: the standard watches of
zkwatches.PartitionStatesWatch (one per partition state, re-armed by re-reading) are
used instead, for the life of this watch."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import UnimplementedError

from pybroker.coordination import znodes as zn
from pybroker.coordination.errors import CoordinationUnavailable, MalformedZNode
from pybroker.coordination.watches import Dispatcher, invoke
from pybroker.coordination.zkclient import AsyncKazoo
from pybroker.coordination.zkmultiread import Read, children_of_many, get_many
from pybroker.coordination.zkpersistent import (
    EventTap,
    add_recursive_watch,
    remove_recursive_watch,
)
from pybroker.coordination.zkwatches import (
    ChildrenDataWatch,
    Decoder,
    PartitionStatesWatch,
    ZkWatch,
)

log = logging.getLogger(__name__)

#: how long a re-read waits for more changes to arrive, while they keep arriving
COLLECT_STEP_S = 0.002
COLLECT_MAX_S = 0.02
#: ... and the batch size at which it stops waiting
COLLECT_ENOUGH = 5000
#: a re-read of at least this many states logs a line at INFO (a controller's batch:
#: when it was notified, read and handed on), smaller ones at DEBUG
LOGGED_REREAD = 1000

Key = tuple[str, int]


def state_key(path: str) -> Key | None:
    """(topic, partition) of a partition state znode's path; None for any other path
    under /brokers/topics (a topic's assignment, a partition's parent znode)."""
    parts = path.split("/")
    # ['', 'brokers', 'topics', topic, 'partitions', partition, 'state']
    if (len(parts) != 7 or parts[4] != "partitions" or parts[6] != "state"
            or not parts[5].isdigit() or "/".join(parts[:3]) != zn.TOPICS):
        return None
    return parts[3], int(parts[5])


class _NoPersistentWatches(Exception):
    """The server answered addWatch UNIMPLEMENTED (ZooKeeper before 3.6)."""


class RecursiveStatesWatch(ZkWatch):
    """Every partition state: on_state(topic, partition, value | None, version) per
    change, on_refreshed() after each full re-read (as PartitionStatesWatch)."""

    def __init__(self, zk: AsyncKazoo, dispatcher: Dispatcher, tap: EventTap,
                 decode: Decoder[Any], on_state: Callable[[str, int, Any, int], Any],
                 on_refreshed: Callable[[], Any] | None,
                 standard: Callable[[], PartitionStatesWatch]) -> None:
        super().__init__(zk, dispatcher)
        self.tap = tap
        self.decode = decode
        self.on_state = on_state
        self.on_refreshed = on_refreshed
        self._standard = standard
        #: the standard watches used instead, on a server without persistent watches
        self.fallback: PartitionStatesWatch | None = None
        self.topics: ChildrenDataWatch[Any] = ChildrenDataWatch(
            zk, dispatcher, zn.TOPICS, on_set=self._topics_changed)
        #: topics whose partitions have a recursive watch (as far as this client knows)
        self.watched: set[str] = set()
        #: each state reported, by the mzxid of the znode version reported
        self.known: dict[Key, int] = {}
        #: states notified and not read since (added on kazoo's thread)
        self._dirty: set[Key] = set()
        self._lock = threading.Lock()
        self._scheduled = False
        #: time.monotonic() of the notification that scheduled the re-read due
        self._notified_at = 0.0
        self._full_read = False
        tap.listen(zn.TOPICS, self._notified)

    # --- notifications (kazoo's thread) -------------------------------------------------
    def _notified(self, kind: int, path: str) -> None:
        key = state_key(path)
        if key is None or self.cancelled:
            return
        with self._lock:
            self._dirty.add(key)
            if self._scheduled:
                return  # a re-read is due already; it takes this one too
            self._scheduled = True
            self._notified_at = time.monotonic()
        self.dispatcher.submit(self._reread_dirty, key=(self, "dirty"))

    # --- re-reads (the dispatcher) ------------------------------------------------------
    async def _reread_dirty(self) -> None:
        if self.cancelled or self.fallback is not None:
            return
        # collect a moment longer while notifications keep coming: one multiRead batch
        # for a burst rather than one for its first few
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COLLECT_MAX_S
        seen = len(self._dirty)
        while seen < COLLECT_ENOUGH and loop.time() < deadline:
            await asyncio.sleep(COLLECT_STEP_S)
            now = len(self._dirty)
            if now == seen:
                break
            seen = now
        with self._lock:
            keys = sorted(self._dirty)
            self._dirty.clear()
            self._scheduled = False
            notified_at = self._notified_at
        if not keys:
            return
        started = time.monotonic()
        if not self.zk.kazoo.connected:
            self._again(keys, schedule=False)  # the reconnect's full re-read covers them
            return
        try:
            reads = await get_many(self.zk, [zn.partition_state_path(t, p) for t, p in keys])
        except CoordinationUnavailable as exc:
            log.debug("re-reading %d partition state(s) interrupted: %s", len(keys), exc)
            self._again(keys, schedule=bool(self.zk.kazoo.connected))
            return
        read_s = time.monotonic() - started
        for key, read in zip(keys, reads, strict=True):
            await self._apply(key, read)
        log.log(logging.INFO if len(keys) >= LOGGED_REREAD else logging.DEBUG,
                "re-read %d changed partition state(s): notified %.3f s before, read in "
                "%.3f s, handed on in %.3f s", len(keys), started - notified_at, read_s,
                time.monotonic() - started - read_s)

    def _again(self, keys: list[Key], schedule: bool) -> None:
        """Keep keys whose re-read failed, to be read with the next batch (or by the
        full re-read after a reconnect, which reads everything anyway)."""
        with self._lock:
            self._dirty.update(keys)
            if not schedule or self._scheduled:
                return
            self._scheduled = True
        self.dispatcher.submit(self._reread_dirty, key=(self, "dirty"))

    async def _apply(self, key: Key, read: Read) -> None:
        """Report the state as read, if it differs from what was reported."""
        topic, partition = key
        if read is None:
            if self.known.pop(key, None) is not None:
                await self._emit(topic, partition, None, -1)
            return
        data, stat = read
        if self.known.get(key) == stat.mzxid:
            return
        try:
            value = self.decode(zn.partition_state_path(topic, partition), data, stat)
        except MalformedZNode as exc:
            log.error("%s: taken as absent until it is readable; correct or delete that "
                      "znode (zkCli.sh)", exc)
            if self.known.pop(key, None) is not None:
                await self._emit(topic, partition, None, -1)
            return
        self.known[key] = stat.mzxid
        await self._emit(topic, partition, value, stat.version)

    async def _emit(self, topic: str, partition: int, value: Any, version: int) -> None:
        if not self.cancelled:
            await invoke(self.on_state, topic, partition, value, version)

    # --- topics -------------------------------------------------------------------------
    async def _topics_changed(self, topics: dict[str, Any]) -> None:
        if self.cancelled or self.fallback is not None:
            return
        for name in sorted(self.watched - set(topics)):
            self.watched.discard(name)
            remove_recursive_watch(self.zk, zn.partitions_path(name))
            for key in sorted(k for k in self.known if k[0] == name):
                del self.known[key]
                await self._emit(key[0], key[1], None, -1)
        fresh = sorted(set(topics) - self.watched)
        if self._full_read or not fresh:
            return  # the full re-read under way reads every topic
        try:
            await self._watch_and_read(fresh)
        except _NoPersistentWatches:
            self._use_standard_watches()
            assert self.fallback is not None
            await self.fallback.refresh_all()

    async def _watch_and_read(self, topics: list[str]) -> set[Key]:
        """Add each topic's recursive watch, then read every state of those topics
        (what changes after the watch is in place is notified); the states found."""
        added = await asyncio.gather(
            *(add_recursive_watch(self.zk, zn.partitions_path(t)) for t in topics),
            return_exceptions=True)
        for outcome in added:
            if isinstance(outcome, UnimplementedError):
                raise _NoPersistentWatches
            if isinstance(outcome, BaseException):
                raise outcome
        self.watched.update(topics)
        lists = await children_of_many(self.zk, [zn.partitions_path(t) for t in topics])
        keys = [(topic, int(p)) for topic, children in zip(topics, lists, strict=True)
                for p in sorted(children or (), key=lambda c: (len(c), c)) if p.isdigit()]
        reads = await get_many(self.zk, [zn.partition_state_path(t, p) for t, p in keys])
        found = set()
        for key, read in zip(keys, reads, strict=True):
            if read is not None:
                found.add(key)
            await self._apply(key, read)
        return found

    def _use_standard_watches(self) -> None:
        log.info("ZooKeeper before 3.6 (no persistent watches): partition states are "
                 "watched one znode at a time")
        self.tap.forget(zn.TOPICS, self._notified)
        self.topics.cancel()
        self.fallback = self._standard()

    # --- full re-reads ----------------------------------------------------------------
    async def refresh_all(self) -> None:
        if self.fallback is None:
            await self._guarded(self._read_everything)
        if self.fallback is not None:
            await self.fallback.refresh_all()  # calls on_refreshed itself
        elif self.on_refreshed is not None and not self.cancelled:
            await invoke(self.on_refreshed)

    async def _read_everything(self) -> None:
        self._full_read = True
        try:
            await self.topics.refresh_all()  # lists the topics, drops the gone ones
        finally:
            self._full_read = False
        topics = sorted(self.topics.children)
        # every notification from here on is for a change the reads below may not see;
        # those before are for changes they do see
        with self._lock:
            self._dirty.clear()
        try:
            found = await self._watch_and_read(topics)
        except _NoPersistentWatches:
            self._use_standard_watches()  # refresh_all reads through them next
            return
        for key in sorted(k for k in self.known if k not in found):
            del self.known[key]
            await self._emit(key[0], key[1], None, -1)

    def cancel(self) -> None:
        if self.cancelled:
            return
        super().cancel()
        self.topics.cancel()
        if self.fallback is not None:
            self.fallback.cancel()
            return
        self.tap.forget(zn.TOPICS, self._notified)
        for name in sorted(self.watched):
            remove_recursive_watch(self.zk, zn.partitions_path(name))
        self.watched.clear()
