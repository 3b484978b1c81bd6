"""`pybroker dump-log-segments` on a log with transaction markers, an aborted
transaction and an open one: control records, `.txnindex` and `.snapshot` in
Kafka's DumpLogSegments output."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import TYPE_CHECKING

from tests.integration.helpers import create_topic
from tests.integration.rawclient import RawClient
from tests.transaction.txnraw import init_producer_id, txn_batch, write_markers

if TYPE_CHECKING:
    from conftest import BrokerFactory


def dump(*files: object, deep: bool = False) -> tuple[int, list[str], str]:
    cmd = [sys.executable, "-m", "pybroker", "dump-log-segments",
           "--files", ",".join(map(str, files))]
    if deep:
        cmd.append("--deep-iteration")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout.splitlines(), done.stderr


def test_dump_markers_txnindex_and_snapshot(broker_factory: BrokerFactory,
                                            topic_name: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, topic_name)
    tp = [(topic_name, 0)]
    with RawClient(b.bootstrap) as c:
        a, _ = init_producer_id(c)
        p, _ = init_producer_id(c)
        o, _ = init_producer_id(c)
        assert c.produce(topic_name, 0, txn_batch(a, 0, 0, ["a0", "a1"])).base_offset == 0
        assert write_markers(c, a, 0, False, tp, coordinator_epoch=3) == {tp[0]: 0}  # 2
        assert c.produce(topic_name, 0, txn_batch(p, 0, 0, ["p0"])).base_offset == 3
        assert write_markers(c, p, 0, True, tp, coordinator_epoch=3) == {tp[0]: 0}  # 4
        assert c.produce(topic_name, 0, txn_batch(o, 0, 0, ["o0"])).base_offset == 5
    b.stop()
    d = b.data_dir / f"{topic_name}-0"

    code, lines, err = dump(d / "00000000000000000000.log", deep=True)
    assert code == 0, err
    batch_lines = [ln for ln in lines if ln.startswith("baseOffset:")]
    assert len(batch_lines) == 5
    abort, commit = batch_lines[1], batch_lines[3]
    assert abort.startswith(
        f"baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 "
        f"producerId: {a} producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true "
        f"isControl: true deleteHorizonMs: OptionalLong.empty position: ")
    assert f"producerId: {p} " in commit and "isControl: true" in commit
    assert "isTransactional: true isControl: false" in batch_lines[0]
    records = [ln for ln in lines if ln.startswith("| offset:")]
    assert re.fullmatch(r"\| offset: 2 CreateTime: \d+ keySize: 4 valueSize: 6 sequence: -1 "
                        r"headerKeys: \[\] endTxnMarker: ABORT coordinatorEpoch: 3", records[2])
    assert records[4].endswith(" endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert re.fullmatch(r"\| offset: 0 CreateTime: \d+ keySize: -1 valueSize: 2 sequence: 0 "
                        r"headerKeys: \[\]", records[0])

    code, lines, err = dump(d / "00000000000000000000.txnindex")
    assert code == 0, err
    assert lines == [f"Dumping {d / '00000000000000000000.txnindex'}",
                     f"version: 0 producerId: {a} firstOffset: 0 lastOffset: 2 "
                     f"lastStableOffset: 3"]

    snap = d / "00000000000000000006.snapshot"
    code, lines, err = dump(snap)
    assert code == 0, err
    assert lines[0] == f"Dumping {snap}"
    by_pid = {int(ln.split()[1]): ln for ln in lines[1:]}
    assert set(by_pid) == {a, p, o}
    assert re.fullmatch(
        rf"producerId: {a} producerEpoch: 0 coordinatorEpoch: 3 currentTxnFirstOffset: "
        rf"OptionalLong.empty lastTimestamp: (\d+) firstSequence: 0 lastSequence: 1 "
        rf"lastOffset: 1 offsetDelta: 1 timestamp: \1", by_pid[a]), by_pid[a]
    assert re.fullmatch(
        rf"producerId: {o} producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        rf"OptionalLong\[5\] lastTimestamp: (\d+) firstSequence: 0 lastSequence: 0 "
        rf"lastOffset: 5 offsetDelta: 0 timestamp: \1", by_pid[o]), by_pid[o]

    # a corrupt snapshot is reported, not dumped
    bad = d / "00000000000000000099.snapshot"
    data = bytearray(snap.read_bytes())
    data[12] ^= 0xFF
    bad.write_bytes(bytes(data))
    code, lines, err = dump(bad)
    assert lines == [f"Dumping {bad}"]
    assert "Snapshot is corrupt (CRC is no longer valid)" in err
