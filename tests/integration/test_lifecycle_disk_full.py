"""Disk full on append: the produce gets KAFKA_STORAGE_ERROR (56), the log is
not corrupted (a failed write is truncated back), the broker keeps serving
reads, and a restart recovers exactly the acknowledged records. Runs on a
2 MiB tmpfs; skipped where mounting is not permitted."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .helpers import consume_confluent, create_topic, produce_all, producer, watermarks

if TYPE_CHECKING:
    from conftest import BrokerFactory

STORAGE_ERROR = 56


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_disk_full_answers_storage_error_and_keeps_the_log(
        broker_factory: BrokerFactory, small_disk: Path, topic_name: str) -> None:
    b = broker_factory({"log.dirs": str(small_disk / "data"), "log.index.size.max.bytes": "4096",
                        "log.segment.bytes": "524288"})
    create_topic(b.bootstrap, topic_name)
    p = producer(b.bootstrap, linger_ms=0, batch_num_messages=1, retries=0,
                 message_timeout_ms=5000)
    acked: dict[int, bytes] = {}
    errors: list[int] = []
    for chunk in range(60):  # ~3 MiB offered to a 2 MiB disk
        values = [b"%05d" % (chunk * 10 + i) + b"#" * 5000 for i in range(10)]
        for value, msg in zip(values, produce_all(p, topic_name,
                                                  [{"value": v} for v in values]), strict=True):
            if msg.error() is None:
                acked[msg.offset()] = value
            else:
                errors.append(msg.error().code())
        if len(errors) >= 5:
            break
    assert errors and set(errors) == {STORAGE_ERROR}, errors
    assert acked and sorted(acked) == list(range(len(acked)))
    # still serving: every acknowledged record reads back, nothing after them
    assert watermarks(b.bootstrap, topic_name) == (0, len(acked))
    got = consume_confluent(b.bootstrap, topic_name, len(acked))
    assert {g.offset: g.value for g in got} == acked
    # and the files hold no partial batch: a restart after kill -9 agrees
    b.kill()
    b.start()
    assert watermarks(b.bootstrap, topic_name) == (0, len(acked))
    got = consume_confluent(b.bootstrap, topic_name, len(acked))
    assert {g.offset: g.value for g in got} == acked
    b.stop()
