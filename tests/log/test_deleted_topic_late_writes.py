"""A deleted topic's log takes no late write: a produce still holding the partition
when DeleteTopics removed it must not land its records in the log of a topic created
again under the same name.

Segment files live in an open-file cache that closes the least recently used and
reopens them by path (rust/log/src/file_cache.rs). The deleted log's dir is renamed
aside, but a topic created again gets a dir at the old path, with a segment file of
the same name; a late append through the old log would reopen that file and write
into it. The run is in a child process whose RLIMIT_NOFILE makes the cache small
enough to evict the old log's file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    import json, resource, sys, uuid
    from pathlib import Path

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (160, hard))  # a cache of 24 files

    from kafka.record.default_records import DefaultRecordBatchBuilder
    from pybroker import _core
    from pybroker.config import BrokerConfig
    from pybroker.coordination.base import PartitionState, TopicRecord
    from pybroker.log.manager import LogManager

    def batch(n, value):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 20)
        for i in range(n):
            b.append(i, timestamp=1_000 + i, key=None, value=value, headers=[])
        return memoryview(bytes(b.build()))

    def record(name, partitions):
        states = [PartitionState(leader=0, leader_epoch=0, replicas=[0], isr=[0])
                  for _ in range(partitions)]
        return TopicRecord(name, uuid.uuid4(), states, {})

    root = Path(sys.argv[1])
    m = LogManager(BrokerConfig({"log.dirs": str(root)}), "cluster")
    m.startup()
    old = m.open_partition(record("t", 1), 0)
    old.append(batch(10, b"old topic"), 0)
    others = record("other", 30)
    for index in range(30):  # their files push the old log's out of the cache
        m.open_partition(others, index).append(batch(1, b"x"), 0)

    m.delete_topic("t")
    new = m.open_partition(record("t", 1), 0)
    new.append(batch(3, b"new topic"), 0)
    segment = root / "t-0" / "00000000000000000000.log"
    before = segment.read_bytes()

    late = {}
    for name, call in [("append", lambda: old.append(batch(5, b"late write"), 0)),
                       ("flush", lambda: old.log.flush()),
                       ("truncate_to", lambda: old.log.truncate_to(0))]:
        try:
            call()
            outcome = "done"
        except _core.StorageError as exc:
            outcome = "refused: " + str(exc)
        late[name] = {"outcome": outcome, "new_file_unchanged": segment.read_bytes() == before}
    print(json.dumps({"late": late, "new_end_offset": new.log.log_end_offset}))
    m.shutdown()
""")


def test_a_late_write_through_a_deleted_topics_log_is_refused(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for name, late in result["late"].items():
        assert late["new_file_unchanged"], (name, result)
        assert late["outcome"].startswith("refused: "), (name, result)
    assert result["new_end_offset"] == 3, result
