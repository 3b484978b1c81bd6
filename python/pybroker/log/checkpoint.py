"""Kafka's offset checkpoint files (recovery-point-offset-checkpoint,
log-start-offset-checkpoint, replication-offset-checkpoint,
cleaner-offset-checkpoint).

Format, as Kafka's CheckpointFile writes it::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic, partition, offset
    my-topic 1 99

Written to `<name>.tmp`, fsynced, renamed over the old file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

VERSION = 0


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
    """Entries of a checkpoint file; a missing file is empty, a malformed one an error."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    if len(lines) < 2 or int(lines[0]) != VERSION:
        raise ValueError(f"{path}: unsupported checkpoint version")
    count = int(lines[1])
    entries: dict[tuple[str, int], int] = {}
    for line in lines[2 : 2 + count]:
        topic, partition, offset = line.rsplit(" ", 2)
        entries[(topic, int(partition))] = int(offset)
    if len(entries) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries
