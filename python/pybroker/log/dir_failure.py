"""Log dirs taken offline after an I/O error (Kafka's LogDirFailureChannel).

A failed fsync leaves the dir's state unknown: the kernel may already have dropped the
dirty pages it could not write, so a later fsync that succeeds proves nothing about the
records before it. Kafka therefore stops using the whole dir at the first I/O error: its
partitions answer KAFKA_STORAGE_ERROR to produce and fetch, and once every log dir has
failed the broker halts (in a cluster its partitions are then led elsewhere). pybroker
does the same for the writes whose failure leaves the dir in doubt: a log's fsync and the
dir's checkpoint files. A failed append is not one of them: the Rust log rolls the
segment back to its previous size, so the client gets KAFKA_STORAGE_ERROR and the dir
stays usable (a full disk that gets space again keeps serving).

With several log dirs in a cluster, the partitions of a failed dir get other leaders
while the broker serves the rest: replica/offline_dirs.py stops them here and tells the
controller (Kafka's handleLogDirFailure and log dir event notification)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)


def halt() -> None:
    """Exit at once, as Kafka's Exit.halt(1): a clean shutdown would write to the
    failed disk again (checkpoints, the clean-shutdown marker vouching for logs that
    were not flushed)."""
    logging.shutdown()
    os._exit(1)


class LogDirFailures:
    def __init__(self, dirs: Iterable[Path], on_all_failed: Callable[[], None] = halt) -> None:
        self.dirs = [Path(d) for d in dirs]
        self.offline: set[Path] = set()
        self._on_all_failed = on_all_failed
        #: called with the dir once it is offline, on whichever thread found the failure
        self.listeners: list[Callable[[Path], None]] = []
        # failures arrive from worker threads (flushes, checkpoint writes) and the loop
        self._lock = threading.Lock()

    def is_offline(self, directory: Path) -> bool:
        return directory in self.offline

    def fail(self, directory: Path, what: str, exc: BaseException) -> None:
        """Take `directory` offline after `what` failed with `exc`."""
        with self._lock:
            if directory in self.offline:
                return
            self.offline.add(directory)
            all_failed = self.offline.issuperset(self.dirs)
        log.error("log dir %s failed (%s: %s) and is now offline: its partitions answer "
                  "KAFKA_STORAGE_ERROR. Check the disk and the kernel log (dmesg), then "
                  "restart the broker; recovery checks every log the dir holds",
                  directory, what, exc)
        for listener in self.listeners:
            listener(directory)
        if all_failed:
            log.error("shutting down: every log dir (%s) has failed. Fix them (the lines "
                      "above say how each failed), then start the broker again",
                      ", ".join(str(d) for d in self.dirs))
            self._on_all_failed()
