"""Kafka's offset checkpoint files (recovery-point-offset-checkpoint,
log-start-offset-checkpoint, replication-offset-checkpoint,
cleaner-offset-checkpoint).

Format, as Kafka's CheckpointFile writes it::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic, partition, offset
    my-topic 1 99

Written to `<name>.tmp`, fsynced, renamed over the old file.

A file that is there but cannot be read raises MalformedCheckpoint. What the broker
does then is Kafka's, per file (`LogManager.loadLogs`, the cleaner manager, the replica
manager's high watermark checkpoints): the recovery points, log start offsets and
cleaner offsets are reset with a warning (a full recovery, the first segment's base
offset, a clean from the start: each only costs work), while unreadable high watermarks
take the dir offline (here: the broker refuses to start), because what was committed
cannot be told."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

VERSION = 0


class MalformedCheckpoint(OSError):
    """A checkpoint file that is there but unreadable or not in Kafka's format."""


def write_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Entries of a checkpoint file; a missing file is empty, one that cannot be read
    or parsed raises MalformedCheckpoint."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedCheckpoint(f"{path}: cannot be read ({exc})") from exc
    try:
        return _parse(lines)
    except ValueError as exc:
        raise MalformedCheckpoint(f"{path}: not a checkpoint file ({exc})") from exc


def read_checkpoint_or_reset(path: Path, reset: str) -> dict[tuple[str, int], int]:
    """read_checkpoint, or {} with a warning saying what the reset (`reset`) means, for
    the checkpoints whose loss costs only work (see the module docstring)."""
    try:
        return read_checkpoint(path)
    except MalformedCheckpoint as exc:
        log.warning("%s; %s. Nothing to do: the file is rewritten at the next "
                    "checkpoint", exc, reset)
        return {}


def _parse(lines: list[str]) -> dict[tuple[str, int], int]:
    if len(lines) < 2 or int(lines[0]) != VERSION:
        raise ValueError(f"unsupported version {lines[0] if lines else 'none'!r}")
    count = int(lines[1])
    entries: dict[tuple[str, int], int] = {}
    for line in lines[2 : 2 + count]:
        topic, partition, offset = line.rsplit(" ", 2)
        entries[(topic, int(partition))] = int(offset)
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    return entries
