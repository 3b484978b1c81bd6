"""An append-only journal of checksummed frames: the embedded metadata store's writes.

One frame is one line: the CRC-32 of the payload in 8 hex digits, a space, the payload,
a newline. Payloads never contain a newline (the store writes msgspec JSON, which
escapes them). An append is written with one write() and fsynced before it returns, and
the next append starts only after that, so a crash can tear only the last frame.

Reading (`recover`) keeps every whole frame. What follows the last whole frame is a torn
tail when no whole frame comes after it: it is cut off the file (and the cut fsynced), so
the next append does not land behind garbage. A bad frame followed by a good one is not
a crash's doing but corruption of acknowledged data: MalformedZNode, the store refuses to
start rather than silently drop what was acknowledged.

Not thread-safe: the store calls one method at a time (its write lock)."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from pybroker.coordination.errors import MalformedZNode

__all__ = ["Journal", "frame"]

_CRC_HEX = 8


def frame(payload: bytes) -> bytes:
    """The line a payload is stored as."""
    if b"\n" in payload:
        raise ValueError("a journal payload must not contain a newline")
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def _payload(line: bytes) -> bytes | None:
    """The payload of a whole line (without its newline), None when it does not check."""
    if len(line) < _CRC_HEX + 1 or line[_CRC_HEX:_CRC_HEX + 1] != b" ":
        return None
    try:
        crc = int(line[:_CRC_HEX], 16)
    except ValueError:
        return None
    payload = line[_CRC_HEX + 1:]
    return payload if zlib.crc32(payload) == crc else None


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        #: bytes in the file (after recovery)
        self.size = 0

    def recover(self) -> list[bytes]:
        """Every whole frame's payload, in order; a torn tail is cut off the file."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self.size = 0
            return []
        payloads: list[bytes] = []
        end = 0  # where the last whole frame ends
        torn_at: int | None = None
        pos = 0
        while pos < len(data):
            newline = data.find(b"\n", pos)
            if newline < 0:  # no newline: an unfinished last write
                torn_at = pos if torn_at is None else torn_at
                break
            payload = _payload(data[pos:newline])
            if payload is None:
                torn_at = pos if torn_at is None else torn_at
            elif torn_at is not None:
                raise MalformedZNode(str(self.path), data[torn_at:torn_at + 200],
                                     f"a bad frame at byte {torn_at} is followed by a good "
                                     "one: the journal is corrupt, not torn by a crash")
            else:
                payloads.append(payload)
                end = newline + 1
            pos = newline + 1
        if torn_at is not None:
            with open(self.path, "r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        self.size = end
        return payloads

    def append(self, data: bytes) -> None:
        """Write frames (from `frame`) at the end and fsync them."""
        fd = self._open()
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        self.size += len(data)

    def truncate(self, size: int) -> None:
        """Cut the file back to `size` bytes (an append that failed half-way)."""
        fd = self._open()
        os.ftruncate(fd, size)
        os.fsync(fd)
        self.size = size

    def reset(self) -> None:
        """Empty the journal (its frames are in a snapshot now)."""
        self.truncate(0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            created = not self.path.exists()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if created:  # the new file's name must last too
                _fsync_dir(self.path.parent)
        return self._fd


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
