"""ZooKeeper watches that keep firing: one-shot kazoo watches, re-armed by re-reading.

A ZooKeeper watch fires once. Each watch here owns stable kazoo watcher functions;
when one fires (on a kazoo thread), a refresh job goes to the dispatcher, which
re-reads the znode with the watch set again and calls back if the value changed.
Missing znodes get an existence watch, so their creation is seen too.

kazoo forgets every watch when the connection drops (and the server forgets them when
the session expires), telling each watcher with an event of type NONE. Those events
are ignored here; instead the backend calls `refresh_all()` on every watch once the
client is connected again, which re-reads everything and re-arms every watch (and
reports whatever changed while disconnected).

Costs: a `ChildrenDataWatch` holds 1 + n watches (the children list and each child's
data) and re-reads a child only when it changes (every child changed by the time the
re-read runs, in one pipelined batch: one dispatcher job, not one per child); on
reconnect it re-reads all n in one pipelined batch. `PartitionStatesWatch` holds one
ChildrenDataWatch per topic, so 1 + T + P watches for T topics and P partitions; it is
what the partition states are watched with only when the server lacks persistent
watches (ZooKeeper before 3.6): zkstatewatch.py holds one persistent watch per topic
and reads the changed states together."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

from pybroker.coordination.errors import CoordinationUnavailable, MalformedZNode
from pybroker.coordination.watches import Dispatcher, invoke
from pybroker.coordination.zkclient import AsyncKazoo
from pybroker.coordination.zkmultiread import get_many

log = logging.getLogger(__name__)

V = TypeVar("V")
#: turns (child name, data, stat) into a value; raises MalformedZNode on bad data
Decoder = Callable[[str, bytes | None, ZnodeStat], V]
Watcher = Callable[[WatchedEvent], None]


async def read_many(zk: AsyncKazoo, paths: list[str],
                    watchers: list[Watcher | None]) -> list[tuple[bytes | None, ZnodeStat] | None]:
    """get() several znodes in one pipelined batch: every request is sent before the
    first answer is awaited. None for a missing znode (with an existence watch armed
    when a watcher is given, so its creation fires it). Without any watcher, in
    multiReads (zkmultiread.py)."""
    if all(w is None for w in watchers):
        return await get_many(zk, paths)
    pending = [zk.kazoo.get_async(p, watch=w) for p, w in zip(paths, watchers, strict=True)]
    outcomes = await asyncio.gather(*(zk.wait(r) for r in pending), return_exceptions=True)
    results: list[tuple[bytes | None, ZnodeStat] | None] = []
    for path, watcher, outcome in zip(paths, watchers, outcomes, strict=True):
        if isinstance(outcome, NoNodeError):
            if watcher is not None and await zk.call("exists", path, watch=watcher):
                # created between the two reads: read it again (and watch it)
                again = await read_many(zk, [path], [watcher])
                results.append(again[0])
                continue
            results.append(None)
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            results.append(outcome)
    return results


class ZkWatch:
    """Base of the watches: cancel(), the kazoo-thread entry point, refresh_all()."""

    def __init__(self, zk: AsyncKazoo, dispatcher: Dispatcher) -> None:
        self.zk = zk
        self.dispatcher = dispatcher
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def _trigger(self, job: Callable[[], Awaitable[None]], key: Any,
                 event: WatchedEvent) -> None:
        # type NONE = the connection dropped; refresh_all() re-arms on reconnect
        if not self.cancelled and event.type != EventType.NONE:
            self.dispatcher.submit(job, key=key)

    async def refresh_all(self) -> None:
        raise NotImplementedError

    async def _guarded(self, job: Callable[[], Awaitable[None]]) -> None:
        """Run a refresh; losing ZooKeeper midway is not an error here (refresh_all
        runs again after the reconnect)."""
        if self.cancelled or not self.zk.kazoo.connected:
            return
        try:
            await job()
        except CoordinationUnavailable as exc:
            log.debug("watch refresh interrupted: %s", exc)


class DataWatch(ZkWatch, Generic[V]):
    """One znode's value (None while it does not exist)."""

    def __init__(self, zk: AsyncKazoo, dispatcher: Dispatcher, path: str,
                 decode: Decoder[V], on_change: Callable[[V | None], Any]) -> None:
        super().__init__(zk, dispatcher)
        self.path = path
        self.decode = decode
        self.on_change = on_change
        self._version: int | None = None
        self._fired = False

    def _watcher(self, event: WatchedEvent) -> None:
        self._trigger(self.refresh_all, self, event)

    async def refresh_all(self) -> None:
        await self._guarded(self._refresh)

    async def _refresh(self) -> None:
        (read,) = await read_many(self.zk, [self.path], [self._watcher])
        version = read[1].mzxid if read is not None else None
        if self._fired and version == self._version:
            return
        value = None
        if read is not None:
            try:
                value = self.decode(self.path, read[0], read[1])
            except MalformedZNode as exc:
                log.error("%s: taken as absent until it is readable; correct or delete that "
                          "znode (zkCli.sh)", exc)
        self._version, self._fired = version, True
        await invoke(self.on_change, value)


class ChildrenDataWatch(ZkWatch, Generic[V]):
    """The children of `parent` and, with `data_path`, each child's decoded data.

    on_child(child, value | None, version) fires per child that appeared, changed or
    went (value None); on_set(dict child -> (value, version)) fires after each refresh
    that changed something, and always after the first one. Without `data_path`
    values are None (children only). A child whose data znode is missing counts as
    absent; one whose data is malformed too (logged with its path), unless
    `malformed_keeps_last`: then a child known before keeps its last good value, for
    watches where 'absent' would make the reader do something it cannot undo (a topic
    that vanishes from /brokers/topics has its logs deleted)."""

    def __init__(self, zk: AsyncKazoo, dispatcher: Dispatcher, parent: str, *,
                 data_path: Callable[[str], str] | None = None,
                 decode: Decoder[V] | None = None,
                 on_child: Callable[[str, V | None, int], Any] | None = None,
                 on_set: Callable[[dict[str, tuple[V | None, int]]], Any] | None = None,
                 malformed_keeps_last: bool = False) -> None:
        super().__init__(zk, dispatcher)
        self.parent = parent
        self.malformed_keeps_last = malformed_keeps_last
        self.data_path = data_path
        self.decode = decode
        self.on_child = on_child
        self.on_set = on_set
        #: children listed now, and the values (with znode versions) of those that have one
        self.children: set[str] = set()
        self.values: dict[str, tuple[V | None, int]] = {}
        self._zxids: dict[str, int] = {}
        self._child_watchers: dict[str, Watcher] = {}
        #: children whose data watch fired, to re-read (added on kazoo's threads)
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._fired = False

    def _children_watcher(self, event: WatchedEvent) -> None:
        self._trigger(self._refresh_children_job, (self, None), event)

    def _watcher_for(self, child: str) -> Watcher:
        watcher = self._child_watchers.get(child)
        if watcher is None:
            def watcher(event: WatchedEvent) -> None:  # on a kazoo thread
                if event.type != EventType.NONE:
                    with self._dirty_lock:
                        self._dirty.add(child)
                # one job re-reads every child changed by then, pipelined: a controller's
                # batch of 10,000 states is not 10,000 jobs of one round trip each
                self._trigger(self._refresh_dirty_job, (self, "data"), event)

            self._child_watchers[child] = watcher
        return watcher

    async def _refresh_dirty_job(self) -> None:
        with self._dirty_lock:
            children = sorted(self._dirty)
            self._dirty.clear()
        # a change seen after this point adds its child again and queues this job again
        await self._guarded(lambda: self._refresh_children_data(children))

    async def _refresh_children_job(self) -> None:
        await self._guarded(self._refresh_children)

    async def refresh_all(self) -> None:
        async def everything() -> None:
            await self._refresh_children(reread=True)
        await self._guarded(everything)

    async def _list(self) -> list[str]:
        try:
            return await self.zk.call("get_children", self.parent,
                                      watch=self._children_watcher)
        except NoNodeError:
            if await self.zk.call("exists", self.parent, watch=self._children_watcher):
                return await self._list()
            return []

    async def _refresh_children(self, reread: bool = False) -> None:
        listed = set(await self._list())
        gone = self.children - listed
        fresh = listed - self.children
        self.children = listed
        changed = False
        for child in sorted(gone):
            self._child_watchers.pop(child, None)
            self._zxids.pop(child, None)
            if self.values.pop(child, None) is not None or self.data_path is None:
                changed = True
                await self._emit(child, None, -1)
        to_read = sorted(listed if reread else fresh)
        changed = await self._refresh_children_data(to_read, final=False) or changed
        if changed or not self._fired:
            await self._emit_set()

    async def _refresh_children_data(self, children: list[str], final: bool = True) -> bool:
        """Re-read `children`'s data; emit per child that changed. True if any did."""
        children = [c for c in children if c in self.children]
        if self.data_path is None:
            changed = False
            for child in children:
                if child not in self.values:
                    self.values[child] = (None, -1)
                    changed = True
                    await self._emit(child, None, -1)
            return changed
        assert self.decode is not None
        paths = [self.data_path(c) for c in children]
        reads = await read_many(self.zk, paths, [self._watcher_for(c) for c in children])
        changed = False
        for child, path, read in zip(children, paths, reads, strict=True):
            if read is None:
                self._zxids.pop(child, None)
                if self.values.pop(child, None) is not None:
                    changed = True
                    await self._emit(child, None, -1)
                continue
            data, stat = read
            if self._zxids.get(child) == stat.mzxid and child in self.values:
                continue
            self._zxids[child] = stat.mzxid
            try:
                value = self.decode(path, data, stat)
            except MalformedZNode as exc:
                if self.malformed_keeps_last and child in self.values:
                    log.error("%s: its last readable value is kept; correct that znode "
                              "(zkCli.sh)", exc)
                    continue
                log.error("%s: taken as absent until it is readable; correct or delete "
                          "that znode (zkCli.sh)", exc)
                if self.values.pop(child, None) is not None:
                    changed = True
                    await self._emit(child, None, -1)
                continue
            self.values[child] = (value, stat.version)
            changed = True
            await self._emit(child, value, stat.version)
        if final and changed:
            await self._emit_set()
        return changed

    async def _emit(self, child: str, value: V | None, version: int) -> None:
        if self.on_child is not None and not self.cancelled:
            await invoke(self.on_child, child, value, version)

    async def _emit_set(self) -> None:
        self._fired = True
        if self.on_set is not None and not self.cancelled:
            await invoke(self.on_set, dict(self.values))

    def cancel(self) -> None:
        super().cancel()
        self._child_watchers.clear()


class PartitionStatesWatch(ZkWatch):
    """Every partition state of every topic: a children watch on /brokers/topics and,
    per topic, a ChildrenDataWatch on its partitions with their state znodes.
    on_state(topic, partition, value | None, version); on_refreshed() after a full
    re-read (the first one included), so that what on_state collected is delivered
    before watch registration returns."""

    def __init__(self, zk: AsyncKazoo, dispatcher: Dispatcher, topics_path: str,
                 partitions_path: Callable[[str], str], state_path: Callable[[str, int], str],
                 decode: Decoder[Any], on_state: Callable[[str, int, Any, int], Any],
                 on_refreshed: Callable[[], Any] | None = None) -> None:
        super().__init__(zk, dispatcher)
        self.on_refreshed = on_refreshed
        self.partitions_path = partitions_path
        self.state_path = state_path
        self.decode = decode
        self.on_state = on_state
        self.per_topic: dict[str, ChildrenDataWatch[Any]] = {}
        self.topics = ChildrenDataWatch(zk, dispatcher, topics_path, on_set=self._topics_changed)

    async def _topics_changed(self, topics: dict[str, Any]) -> None:
        for name in [t for t in self.per_topic if t not in topics]:
            watch = self.per_topic.pop(name)
            watch.cancel()
            for partition in sorted(watch.values, key=int):
                await invoke(self.on_state, name, int(partition), None, -1)
        for name in sorted(t for t in topics if t not in self.per_topic):
            watch = self.per_topic[name] = self._topic_watch(name)
            await watch.refresh_all()

    def _topic_watch(self, topic: str) -> ChildrenDataWatch[Any]:
        def state_path(partition: str) -> str:
            return self.state_path(topic, int(partition))

        async def on_child(partition: str, value: Any, version: int) -> None:
            if partition.isdigit():
                await invoke(self.on_state, topic, int(partition), value, version)

        return ChildrenDataWatch(self.zk, self.dispatcher, self.partitions_path(topic),
                                 data_path=state_path, decode=self.decode, on_child=on_child)

    async def refresh_all(self) -> None:
        known = list(self.per_topic.values())  # topics found now are read as they are found
        await self.topics.refresh_all()
        for watch in known:
            if not watch.cancelled:
                await watch.refresh_all()
        if self.on_refreshed is not None:
            await invoke(self.on_refreshed)

    def cancel(self) -> None:
        super().cancel()
        self.topics.cancel()
        for watch in self.per_topic.values():
            watch.cancel()
