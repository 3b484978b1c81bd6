"""Reading many znodes at once: ZooKeeper's multiRead (opcode 22, ZooKeeper 3.6+).

Why: kazoo sends one request per select() round of its connection thread, under the
GIL it shares with the broker's event loop; on a loaded 2-core machine that is about
1,000-1,500 get()s a second however they are pipelined, so a new controller reading
10,000 partition states spent 7-10 s on it (issue 25). One multiRead carries
hundreds of getData operations in one request and one answer: the same 10,000 reads
take well under a second. Unlike a write multi, the reads are independent: a missing
znode fails its own operation (NoNodeError in its place), not the others.

multiRead sets no watches, so it serves reads without one (the controller's and the
admin paths'); watched reads stay per-znode get()s (zkwatches.py). A server older
than 3.6 answers UNIMPLEMENTED: this client then falls back to pipelined get()s for
the rest of its life."""

from __future__ import annotations

import asyncio
import struct
from collections import namedtuple
from typing import Any

from kazoo.exceptions import EXCEPTIONS, NoNodeError, UnimplementedError
from kazoo.protocol.serialization import read_string
from kazoo.protocol.states import ZnodeStat

from pybroker.coordination.zkclient import AsyncKazoo

#: getData operations per multiRead: a state znode's answer is ~200 bytes with its
#: stat, so a request's answer stays far below jute.maxbuffer (1 MiB)
READS_PER_REQUEST = 500
#: getChildren operations per multiRead: a topic's partition list is a few hundred bytes
#: to tens of KiB (thousands of partitions)
LISTS_PER_REQUEST = 20

_GET_DATA = 4
_GET_CHILDREN = 8
_ERROR = -1
_INT = struct.Struct("!i")
_HEADER = struct.Struct("!iBi")
_STAT = struct.Struct("!qqqqiiiqiiq")

Read = tuple[bytes | None, ZnodeStat] | None


class MultiRead(namedtuple("MultiRead", "paths")):
    """The request, in kazoo's request shape (type, serialize, deserialize): a getData
    of each path."""

    type = 22
    op = _GET_DATA

    def serialize(self) -> bytes:
        header = _HEADER.pack(self.op, 0, -1)
        parts: list[bytes] = []
        for path in self.paths:
            encoded = path.encode()
            parts += (header, _INT.pack(len(encoded)), encoded, b"\x00")  # no watch
        parts.append(_HEADER.pack(-1, 1, -1))
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[Any]:
        # headers unpacked in place (not as MultiHeader objects): this runs on kazoo's
        # connection thread once per znode a controller or a watching broker reads
        results: list[Any] = []
        unpack_header, unpack_int, unpack_stat = (
            _HEADER.unpack_from, _INT.unpack_from, _STAT.unpack_from)
        make_stat = ZnodeStat._make
        while True:
            kind, done, _ = unpack_header(data, offset)
            offset += _HEADER.size
            if done:
                return results
            if kind == _GET_DATA:
                length = unpack_int(data, offset)[0]
                offset += _INT.size
                value = None
                if length >= 0:
                    value = data[offset:offset + length]
                    offset += length
                results.append((value, make_stat(unpack_stat(data, offset))))
                offset += _STAT.size
            elif kind == _GET_CHILDREN:
                count = unpack_int(data, offset)[0]
                offset += _INT.size
                children = []
                for _ in range(max(count, 0)):
                    child, offset = read_string(data, offset)
                    children.append(child)
                results.append(children)
            elif kind == _ERROR:
                results.append(EXCEPTIONS[unpack_int(data, offset)[0]]())
                offset += _INT.size
            else:
                raise ValueError(f"unexpected multiRead result type {kind}")


class MultiChildren(MultiRead):
    """A multiRead of getChildren operations (no watch)."""

    op = _GET_CHILDREN


async def get_many(zk: AsyncKazoo, paths: list[str]) -> list[Read]:
    """The data and stat of each path (None where the znode does not exist), read in
    multiReads of READS_PER_REQUEST, all sent before the first answer is awaited."""
    if not paths:
        return []
    if getattr(zk, "multi_read", True):
        try:
            return await _multi_read(zk, paths)
        except UnimplementedError:
            zk.multi_read = False  # type: ignore[attr-defined]  # a server before 3.6
    return await _pipelined_gets(zk, paths)


async def children_of_many(zk: AsyncKazoo, paths: list[str]) -> list[list[str] | None]:
    """The children of each path (None where the znode does not exist), in multiReads
    sent together; on a server before 3.6, pipelined get_children()s."""
    if not paths:
        return []
    if getattr(zk, "multi_read", True):
        try:
            return await _multi_read(zk, paths, MultiChildren, LISTS_PER_REQUEST)
        except UnimplementedError:
            zk.multi_read = False  # type: ignore[attr-defined]
    pending = [zk.kazoo.get_children_async(p) for p in paths]
    outcomes = await asyncio.gather(*(zk.wait(r) for r in pending), return_exceptions=True)
    out: list[list[str] | None] = []
    for outcome in outcomes:
        if isinstance(outcome, NoNodeError):
            out.append(None)
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            out.append(list(outcome))
    return out


async def _multi_read(zk: AsyncKazoo, paths: list[str], request: type[MultiRead] = MultiRead,
                      per_request: int = READS_PER_REQUEST) -> list[Any]:
    kazoo = zk.kazoo
    pending = []
    for start in range(0, len(paths), per_request):
        chunk = [kazoo.chroot + p if kazoo.chroot else p
                 for p in paths[start:start + per_request]]
        result = kazoo.handler.async_result()
        kazoo._call(request(chunk), result)  # kazoo's own request path, as get_async
        pending.append(result)
    answers = await asyncio.gather(*(zk.wait(r) for r in pending))
    out: list[Any] = []
    for answer in answers:
        for item in answer:
            if isinstance(item, NoNodeError):
                out.append(None)
            elif isinstance(item, Exception):
                raise item
            else:
                out.append(item)
    if len(out) != len(paths):
        raise ValueError(f"multiRead answered {len(out)} reads for {len(paths)}")
    return out


async def _pipelined_gets(zk: AsyncKazoo, paths: list[str]) -> list[Read]:
    pending = [zk.kazoo.get_async(p) for p in paths]
    outcomes = await asyncio.gather(*(zk.wait(r) for r in pending), return_exceptions=True)
    out: list[Read] = []
    for outcome in outcomes:
        if isinstance(outcome, NoNodeError):
            out.append(None)
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            out.append(outcome)
    return out
