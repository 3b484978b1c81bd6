"""Compaction scheduling over real partition logs: dirty ratio, choice of the
filthiest log, first dirty offset and the cleaner-offset-checkpoint."""

from __future__ import annotations

import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker._core import AppendResult
from pybroker.config import BrokerConfig, TopicConfig
from pybroker.log.checkpoint import read_checkpoint, write_checkpoint
from pybroker.log.cleaner import CLEANER_CHECKPOINT_FILE, Cleaner, dirty_ratio
from pybroker.log.partition import Partition

NOW = int(time.time() * 1000)


def leader_append(p: Partition, records: object) -> AppendResult:
    """Append as the only replica's leader (epoch 0): the high watermark follows."""
    result = p.append(records, 0)  # type: ignore[arg-type]
    p.update_high_watermark(p.log.log_end_offset)
    return result


def batch(key: bytes, value: bytes | None, ts: int = NOW) -> memoryview:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=ts, key=key, value=value, headers=[])
    return memoryview(bytes(b.build()))


def partition(root: Path, name: str, **overrides: object) -> Partition:
    overrides.setdefault("cleanup.policy", ["compact"])
    overrides.setdefault("segment.bytes", 500)
    config = TopicConfig(BrokerConfig({"log.dirs": str(root)}), overrides)
    return Partition(name, 0, root / f"{name}-0", config, recovery_point=0, log_start_offset=0,
                     clean_shutdown=False)


def fill(p: Partition, rounds: int, keys: int = 3) -> None:
    for r in range(rounds):
        for k in range(keys):
            leader_append(p, batch(b"k%d" % k, b"v%d" % r + b"." * 50))


def test_dirty_ratio_counts_non_active_segments(tmp_path: Path) -> None:
    p = partition(tmp_path, "t")
    assert dirty_ratio(p, 0, NOW) == 0.0
    fill(p, 10)
    assert p.log.segment_count > 3
    assert dirty_ratio(p, 0, NOW) == 1.0
    middle = p.log.segment_infos()[2][0]
    assert 0 < dirty_ratio(p, middle, NOW) < 1
    assert dirty_ratio(p, p.log.log_end_offset, NOW) == 0.0
    lagged = partition(tmp_path, "lag", **{"min.compaction.lag.ms": 3600_000})
    fill(lagged, 10)
    assert dirty_ratio(lagged, 0, NOW) == 0.0  # every segment is too young
    p.close()
    lagged.close()


def test_cleaner_picks_filthiest_compacted_log_and_checkpoints(tmp_path: Path) -> None:
    compacted, deleted = partition(tmp_path, "c"), partition(tmp_path, "d",
                                                             **{"cleanup.policy": ["delete"]})
    fill(compacted, 10)
    fill(deleted, 10)
    cleaner = Cleaner(BrokerConfig({"log.dirs": str(tmp_path)}), [tmp_path])
    found = cleaner.filthiest([deleted, compacted])
    assert found == (compacted, 0)
    end = cleaner.clean(compacted, 0)
    assert end == compacted.log.segment_infos()[-1][0]
    cleaner.write_checkpoints([compacted, deleted])
    assert read_checkpoint(tmp_path / CLEANER_CHECKPOINT_FILE) == {("c", 0): end}
    assert cleaner.filthiest([deleted, compacted]) is None  # nothing dirty left
    again = Cleaner(BrokerConfig({"log.dirs": str(tmp_path)}), [tmp_path])
    assert again.first_dirty(compacted) == end
    compacted.close()
    deleted.close()


def test_checkpoint_outside_the_log_restarts_at_log_start(tmp_path: Path) -> None:
    p = partition(tmp_path, "t")
    fill(p, 3)
    write_checkpoint(tmp_path / CLEANER_CHECKPOINT_FILE, {("t", 0): 10_000, ("gone", 3): 5})
    cleaner = Cleaner(BrokerConfig({"log.dirs": str(tmp_path)}), [tmp_path])
    assert cleaner.first_dirty(p) == 0
    cleaner.write_checkpoints([p])  # entries of logs that no longer exist are dropped
    assert read_checkpoint(tmp_path / CLEANER_CHECKPOINT_FILE) == {("t", 0): 10_000}
    p.close()
