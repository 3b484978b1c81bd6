"""`pybroker dump-log-segments` against segments written by real clients; the
expected lines are built from kafka-python's independent batch parser."""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kafka.record.default_records import DefaultRecordBatch

from pybroker.tools import dump_log_segments as tool

if TYPE_CHECKING:
    from conftest import Broker

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "integration")]
from conftest import Broker as BrokerProc  # noqa: E402
from conftest import free_port  # noqa: E402
from helpers import assert_delivered, create_topic, produce_all, producer  # noqa: E402

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TS = 1_700_000_000_000


def dump(*files: Path, **flags: object) -> tuple[int, list[str], list[str]]:
    parser = argparse.ArgumentParser()
    tool.add_arguments(parser)
    argv = ["--files", ",".join(map(str, files))]
    for flag, value in flags.items():
        if value is True:
            argv.append("--" + flag.replace("_", "-"))
    out, err = io.StringIO(), io.StringIO()
    code = tool.run(parser.parse_args(argv), out, err)
    return code, out.getvalue().splitlines(), err.getvalue().splitlines()


def expected_log_lines(path: Path, *, deep: bool, data: bool) -> list[str]:
    """Kafka's DumpLogSegments lines for `path`, from kafka-python's parser."""
    raw = path.read_bytes()
    lines = [f"Dumping {path}", f"Log starting offset: {int(path.name[:20])}"]
    pos = 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos + 8:pos + 12], "big") + 12
        b = DefaultRecordBatch(raw[pos:pos + size])
        ts_type = "LogAppendTime" if b.timestamp_type else "CreateTime"
        base_seq = b.base_sequence
        last_seq = -1 if base_seq == -1 else base_seq + b.last_offset_delta
        lines.append(
            f"baseOffset: {b.base_offset} lastOffset: {b.base_offset + b.last_offset_delta} "
            f"count: {b.records_count} baseSequence: {base_seq} lastSequence: {last_seq} "
            f"producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
            f"partitionLeaderEpoch: {b.leader_epoch} "
            f"isTransactional: {str(b.is_transactional).lower()} "
            f"isControl: {str(b.is_control_batch).lower()} deleteHorizonMs: OptionalLong.empty "
            f"position: {pos} {ts_type}: {b.max_timestamp} size: {size} magic: 2 "
            f"compresscodec: {CODECS[b.compression_type]} crc: {b.crc} "
            f"isvalid: {str(b.validate_crc()).lower()}")
        if deep:
            for r in b:
                seq = -1 if base_seq == -1 else base_seq + r.offset - b.base_offset
                line = (f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                        f"keySize: {-1 if r.key is None else len(r.key)} "
                        f"valueSize: {-1 if r.value is None else len(r.value)} "
                        f"sequence: {seq} headerKeys: [{','.join(k for k, _ in r.headers)}]")
                if data:
                    if r.key is not None:
                        line += f" key: {r.key.decode()}"
                    if r.value is not None:
                        line += f" payload: {r.value.decode()}"
                lines.append(line)
        pos += size
    return lines


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped broker's partition dir: plain, keyed, headers, every codec,
    an idempotent producer, a LogAppendTime topic; small segments and indexes."""
    base = tmp_path_factory.mktemp("dump")
    b: Broker = BrokerProc(host="127.0.0.1", port=free_port(), data_dir=base / "data",
                           log_path=base / "broker.log",
                           overrides={"log.segment.bytes": "3000",
                                      "log.index.interval.bytes": "200"})
    b.start()
    try:
        create_topic(b.bootstrap, "dump")
        p = producer(b.bootstrap, linger_ms=0)
        assert_delivered(produce_all(p, "dump", [{"value": b"hello", "timestamp": TS}]))
        assert_delivered(produce_all(p, "dump", [
            {"key": b"k1", "value": f"今夜 {i}", "timestamp": TS + i,
             "headers": [("h1", b"a"), ("h2", None)]} for i in range(3)]))
        assert_delivered(produce_all(p, "dump", [{"key": b"tomb", "value": None}]))
        for codec in CODECS[1:]:
            pc = producer(b.bootstrap, linger_ms=50, compression_type=codec)
            assert_delivered(produce_all(pc, "dump", [
                {"value": f"{codec}-{i}-" + "x" * 40} for i in range(10)]))
        pi = producer(b.bootstrap, linger_ms=20, enable_idempotence=True)
        assert_delivered(produce_all(pi, "dump", [{"value": b"idem-%d" % i} for i in range(5)]))
        create_topic(b.bootstrap, "dump-lat", config={"message.timestamp.type": "LogAppendTime"})
        assert_delivered(produce_all(p, "dump-lat", [{"value": b"lat", "timestamp": TS}]))
        time.sleep(0.2)
    finally:
        b.stop()
    return b.data_dir


def logs(segments: Path, topic: str = "dump") -> list[Path]:
    return sorted((segments / f"{topic}-0").glob("*.log"))


def test_first_batch_line_is_kafkas_format(segments: Path) -> None:
    first = logs(segments)[0]
    code, out, err = dump(first, print_data_log=True)
    assert code == 0 and err == []
    assert out[:2] == [f"Dumping {first}", "Log starting offset: 0"]
    crc = DefaultRecordBatch(first.read_bytes()[:73]).crc
    assert out[2] == (
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 73 "
        f"magic: 2 compresscodec: none crc: {crc} isvalid: true")
    assert out[3] == ("| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 5 "
                      "sequence: -1 headerKeys: [] payload: hello")


@pytest.mark.parametrize("mode", ["shallow", "deep", "data"])
def test_every_log_matches_kafka_python(segments: Path, mode: str) -> None:
    files = logs(segments) + logs(segments, "dump-lat")
    assert len(logs(segments)) >= 2
    code, out, err = dump(*files, deep_iteration=mode == "deep", print_data_log=mode == "data")
    assert code == 0
    # as Kafka, each file's offsets are checked from -1 on
    assert err == ([] if mode == "shallow" else [
        line for f in files if int(f.name[:20]) for line in (
            f"Non-consecutive offsets in {f.absolute()}",
            f"  -1 is followed by {int(f.name[:20])}")])
    expected = [line for f in files for line in expected_log_lines(
        f, deep=mode != "shallow", data=mode == "data")]
    assert out == expected
    seen = "\n".join(out)
    for codec in CODECS:
        assert f"compresscodec: {codec} " in seen
    assert "LogAppendTime: " in seen
    if mode != "shallow":
        assert "headerKeys: [h1,h2]" in seen
        assert "keySize: 4 valueSize: -1" in seen  # the tombstone


def test_offset_and_time_indexes(segments: Path) -> None:
    for log in logs(segments):
        index, timeindex = log.with_suffix(".index"), log.with_suffix(".timeindex")
        code, out, err = dump(index, timeindex)
        assert code == 0 and err == [], err
        raw = index.read_bytes()
        base = int(log.name[:20])
        entries = [(base + int.from_bytes(raw[i:i + 4], "big"),
                    int.from_bytes(raw[i + 4:i + 8], "big")) for i in range(0, len(raw), 8)]
        idx_lines = out[1:out.index(f"Dumping {timeindex}")]
        if entries:
            assert idx_lines == [f"offset: {o} position: {p}" for o, p in entries]
        else:
            assert idx_lines == [f"{index} is empty."]
        traw = timeindex.read_bytes()
        tentries = [(int.from_bytes(traw[i:i + 8], "big"),
                     base + int.from_bytes(traw[i + 8:i + 12], "big"))
                    for i in range(0, len(traw), 12)]
        assert out[out.index(f"Dumping {timeindex}") + 1:] == [
            f"timestamp: {t} offset: {o}" for t, o in tentries]
    assert any(log.with_suffix(".index").stat().st_size for log in logs(segments))


def test_index_sanity_check_and_verify_only(segments: Path) -> None:
    log = logs(segments)[0]
    code, out, err = dump(log.with_suffix(".index"), log.with_suffix(".timeindex"),
                          index_sanity_check=True)
    assert code == 0 and err == []
    assert out[1] == f"{log.with_suffix('.index')} passed sanity check." or \
        out[1] == f"{log.with_suffix('.index')} is empty."
    assert out[-1] == f"{log.with_suffix('.timeindex')} passed sanity check."
    code, out, err = dump(log.with_suffix(".index"), verify_index_only=True)
    assert code == 0 and err == [] and out[1:] in ([], [f"{log.with_suffix('.index')} is empty."])


def test_index_mismatch_and_trailing_bytes_are_reported(segments: Path, tmp_path: Path) -> None:
    src = next(log for log in logs(segments) if log.with_suffix(".index").stat().st_size)
    for ext in (".log", ".index"):
        shutil.copy(src.with_suffix(ext), tmp_path / (src.stem + ext))
    log = tmp_path / src.name
    index = log.with_suffix(".index")
    raw = bytearray(index.read_bytes())
    raw[3] ^= 0x7F  # first entry's relative offset no longer matches its batch
    index.write_bytes(bytes(raw))
    with open(log, "ab") as f:
        f.write(log.read_bytes()[:30])  # a partial batch, as a crash mid-write leaves
    code, out, err = dump(log, index)
    assert code == 0, err
    trailing = out[out.index(f"Dumping {index}") - 1]
    assert trailing == f"Found 30 invalid bytes at the end of {log.name}"
    assert err[0] == f"Mismatches in :{index.absolute()}"
    assert err[1].startswith("  Index offset: ")
    (log.parent / f"{7:020d}.log").write_bytes(b"\x00" * 30)
    code, out, err = dump(log.parent / f"{7:020d}.log")
    assert code == 1 and err == ["Record size 0 is less than the minimum record overhead (14)"]


def test_cli_subcommand(segments: Path) -> None:
    first = logs(segments)[0]
    proc = subprocess.run([sys.executable, "-m", "pybroker", "dump-log-segments", "--files",
                           str(first), "--deep-iteration"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == expected_log_lines(first, deep=True, data=False)
