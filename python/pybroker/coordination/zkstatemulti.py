"""A batch of partition-state writes as one ZooKeeper multi, coded for its one shape.

kazoo's Transaction codes any multi: per operation a request object, a MultiHeader
object and a bytearray on the way out, a ZnodeStat (eleven fields) on the way back.
A controller moving 30,000 partitions sends 30,000 setData operations; on kazoo's
connection thread, under the GIL the controller's event loop shares, that coding was
a large part of its time (issue 25). `StateMulti` is the same multi (opcode 14: an
optional check of /controller_epoch's version, then a setData per state, each
conditional on its version), written with a few struct calls per operation and read
back keeping only what the controller uses: each setData's new version, or the error
that failed the multi.

Wire format, as ZooKeeper's jute declares it: per operation a MultiHeader {int type;
boolean done; int err} and its request (CheckVersionRequest {ustring path; int
version}, SetDataRequest {ustring path; buffer data; int version}), closed by a header
with type -1 and done set. The answer: per operation a header and its result (nothing
for a check; a Stat for a setData, whose version field follows four longs; an int
error code for type -1, when the multi failed), closed the same way."""

from __future__ import annotations

import struct
from collections import namedtuple
from typing import Any

from kazoo.exceptions import EXCEPTIONS

_CHECK = 13
_SET_DATA = 5
_ERROR = -1
_HEADER = struct.Struct("!iBi")
_INT = struct.Struct("!i")
#: a Stat: czxid, mzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner,
#: dataLength, numChildren, pzxid
_STAT_SIZE = struct.calcsize("!qqqqiiiqiiq")
_VERSION_AT = struct.calcsize("!qqqq")
_DONE = _HEADER.pack(-1, 1, -1)

#: (absolute path with the chroot, data, expected version)
Write = tuple[str, bytes, int]


def _string(value: str) -> bytes:
    encoded = value.encode()
    return _INT.pack(len(encoded)) + encoded


class StateMulti(namedtuple("StateMulti", "fence writes")):
    """fence: (path, version) of the check that goes first, or None. The answer: one
    item per operation, True for the check, the new version (int) for each setData,
    or, when the multi failed, kazoo's exception per operation (RolledBackError and
    RuntimeInconsistency for those that did not cause it), as kazoo's Transaction."""

    type = 14

    def serialize(self) -> bytes:
        parts: list[bytes] = []
        if self.fence is not None:
            path, version = self.fence
            parts += (_HEADER.pack(_CHECK, 0, -1), _string(path), _INT.pack(version))
        header = _HEADER.pack(_SET_DATA, 0, -1)
        for path, data, version in self.writes:
            parts += (header, _string(path), _INT.pack(len(data)), data, _INT.pack(version))
        parts.append(_DONE)
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        unpack_header, unpack_int = _HEADER.unpack_from, _INT.unpack_from
        while True:
            kind, done, _ = unpack_header(data, offset)
            offset += _HEADER.size
            if done:
                return results
            if kind == _SET_DATA:
                results.append(unpack_int(data, offset + _VERSION_AT)[0])
                offset += _STAT_SIZE
            elif kind == _CHECK:
                results.append(True)
            elif kind == _ERROR:
                results.append(EXCEPTIONS[unpack_int(data, offset)[0]]())
                offset += _INT.size
            else:
                raise ValueError(f"unexpected result type {kind} in a state multi")
