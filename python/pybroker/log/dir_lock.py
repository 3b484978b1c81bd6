"""The `.lock` file of a data dir (Kafka's FileLock on `<log dir>/.lock`).

A process that uses a data dir holds an exclusive, non-blocking `flock` on the dir's
`.lock` for as long as it uses the dir, taken before it reads or writes anything else
there. A second broker started on a live broker's dir (only the port changed, say) is
refused in one line and leaves the dir as it found it: before the lock it would have
made itself controller of the embedded store, and on exit written the clean-shutdown
marker and the checkpoints into the live broker's dir, so a later crash of the live
broker would have been taken for a clean shutdown and its torn tail kept.

`flock` locks belong to an open file description: a second open of the same `.lock` in
the same process is refused too (Kafka: "another process or thread"), and the lock goes
with the process, however it ends (kill -9 included), so a restart after a crash is
never refused by a stale lock. The file itself is never removed (removing it would let
a third process lock a new inode while the second still holds the old one)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from pybroker.config import ConfigError

LOCK_FILE = ".lock"


class DirLocked(OSError):
    """Another process (or another user in this one) holds the dir's lock."""


class DirLock:
    """The held lock of one dir; release() (or process exit) lets it go."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: str | Path) -> DirLock:
        """Lock `directory` (created when missing, as a broker creates its log dirs);
        DirLocked when another holder has it."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        # O_CREAT alone does not change an existing file: the refused process writes
        # nothing into the dir
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DirLocked(
                f"Failed to acquire lock on file {LOCK_FILE} in {path.absolute()}. A Kafka "
                "instance in another process or thread is using this directory.") from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def lock_dirs(directories: Iterable[str | Path]) -> list[DirLock]:
    """Lock every dir, or none: on a refusal the locks already taken are released. A dir
    named twice is a ConfigError (Kafka: "Duplicate log directory found"), not a lock
    this process would take from itself."""
    locks: list[DirLock] = []
    seen: set[Path] = set()
    try:
        for directory in directories:
            resolved = Path(directory).resolve()
            if resolved in seen:
                raise ConfigError(f"log.dirs names {directory} twice")
            seen.add(resolved)
            locks.append(DirLock.acquire(directory))
    except BaseException:
        release_all(locks)
        raise
    return locks


def release_all(locks: Iterable[DirLock]) -> None:
    for lock in locks:
        lock.release()
