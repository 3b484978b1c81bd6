"""`pybroker dump-log-segments`: Kafka's DumpLogSegments (kafka-dump-log.sh).

Reads segment files directly (no broker needed) and prints what Kafka's tool
prints, line for line:

* `.log`: `Dumping <file>`, `Log starting offset: <base>`, then one line per
  batch::

    baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1
    producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false
    isControl: false deleteHorizonMs: OptionalLong.empty position: 0
    CreateTime: 1700000000000 size: 73 magic: 2 compresscodec: none crc: 123456
    isvalid: true                                        (all on one line)

  and with `--deep-iteration` (implied by `--print-data-log`) one line per
  record: `| offset: 0 CreateTime: ... keySize: -1 valueSize: 5 sequence: -1
  headerKeys: []`, followed by ` key: ... payload: ...` with `--print-data-log`.
  Bytes after the last whole batch: `Found N invalid bytes at the end of <name>`.
* `.index`: `offset: <offset> position: <position>` per entry (up to the first
  zero entry of a preallocated file); `<file> is empty.` when it has none.
* `.timeindex`: `timestamp: <ts> offset: <offset>` per entry.
* `--index-sanity-check`: only `<file> passed sanity check.` (Kafka's startup
  check); `--verify-index-only`: entries are checked, not printed.
* `.txnindex` (aborted transactions): `version: 0 producerId: P firstOffset: F
  lastOffset: L lastStableOffset: S` per entry.
* `.snapshot` (producer state): per producer `producerId: P producerEpoch: E
  coordinatorEpoch: C currentTxnFirstOffset: OptionalLong[F] (or
  OptionalLong.empty) lastTimestamp: T ` and, when it has a batch, `firstSequence:
  .. lastSequence: .. lastOffset: .. offsetDelta: .. timestamp: ..`; a snapshot of
  an unknown version or a bad CRC is reported on stderr.
* control records (`--deep-iteration`): ` endTxnMarker: COMMIT coordinatorEpoch: N`.

Problems found (index entries not matching the log, non-consecutive offsets,
time index mismatches) are reported on stderr after all files, as Kafka does.
Records are decoded (and decompressed) by `pybroker._core.decode_batch`."""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from pybroker import _core
from pybroker.tools._common import stdout_gone

COMMAND = "dump-log-segments"
HELP = "print the contents of log segment and index files (kafka-dump-log.sh)"

INT_MAX = 2**31 - 1
HEADER_SIZE = 61
LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14
OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
#: digits of a segment file's name (its base offset, zero-padded)
SEGMENT_NAME_DIGITS = 20
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", required=True, nargs="+", metavar="FILE",
                        help="REQUIRED: the data and index log files to dump (comma separated "
                             "or several)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print the messages' content (implies --deep-iteration)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="print every record, not only batches")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check the indexes' sanity (as on broker startup)")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="verify the index without printing its content")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="skip metadata when printing records (and control records)")
    parser.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                        help="size of the largest message (default 5242880)")
    parser.add_argument("--max-bytes", type=int, default=INT_MAX,
                        help="limit the bytes of .log files read")


@dataclass
class Problems:
    """What Kafka's tool collects while dumping and reports on stderr at the end."""

    index_mismatches: dict[str, dict[int, int]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def report(self, err: TextIO) -> None:
        for name, mismatches in self.index_mismatches.items():
            print(f"Mismatches in :{name}", file=err)
            for index_offset in sorted(mismatches, reverse=True):
                print(f"  Index offset: {index_offset}, log offset: "
                      f"{mismatches[index_offset]}", file=err)
        for name, pairs in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{name}", file=err)
            for index_ts, log_ts in pairs:
                print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", file=err)
        for name, pairs in self.out_of_order.items():
            print(f"Found out of order timestamp in :{name}", file=err)
            for index_ts, prev_ts in pairs:
                print(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}",
                      file=err)
        for pairs in self.not_found.values():
            print("The following indexed offsets are not found in the log.", file=err)
            for index_offset, log_offset in pairs:
                print(f"Indexed offset: {index_offset}, found log offset: {log_offset}", file=err)
        for name, pairs in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {name}", file=err)
            for prev, nxt in pairs:
                print(f"  {prev} is followed by {nxt}", file=err)


@dataclass(frozen=True)
class Batch:
    """A v2 batch header as DumpLogSegments shows it."""

    position: int
    raw: bytes

    def _unpack(self, fmt: str, at: int) -> int:
        return int(struct.unpack_from(fmt, self.raw, at)[0])

    @property
    def base_offset(self) -> int:
        return self._unpack(">q", 0)

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def partition_leader_epoch(self) -> int:
        return self._unpack(">i", 12)

    @property
    def magic(self) -> int:
        return self.raw[16]

    @property
    def crc(self) -> int:
        return self._unpack(">I", 17)

    @property
    def attributes(self) -> int:
        return self._unpack(">h", 21)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._unpack(">i", 23)

    @property
    def base_timestamp(self) -> int:
        return self._unpack(">q", 27)

    @property
    def max_timestamp(self) -> int:
        return self._unpack(">q", 35)

    @property
    def producer_id(self) -> int:
        return self._unpack(">q", 43)

    @property
    def producer_epoch(self) -> int:
        return self._unpack(">h", 51)

    @property
    def base_sequence(self) -> int:
        return self._unpack(">i", 53)

    @property
    def count(self) -> int:
        return self._unpack(">i", 57)

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == -1:
            return -1
        delta = self._unpack(">i", 23)
        return delta - (INT_MAX - base) - 1 if base > INT_MAX - delta else base + delta

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & TIMESTAMP_TYPE_BIT else "CreateTime"

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def codec(self) -> str:
        code = self.attributes & 0x07
        return CODECS[code] if code < len(CODECS) else f"unknown({code})"

    @property
    def is_valid(self) -> bool:
        return self.size >= HEADER_SIZE and _core.crc32c(self.raw[21:]) == self.crc

    def line(self) -> str:
        attrs = self.attributes
        horizon = (f"OptionalLong[{self.base_timestamp}]" if attrs & DELETE_HORIZON_BIT
                   else "OptionalLong.empty")
        return (f"baseOffset: {self.base_offset} lastOffset: {self.last_offset} "
                f"count: {self.count} baseSequence: {self.base_sequence} "
                f"lastSequence: {self.last_sequence} producerId: {self.producer_id} "
                f"producerEpoch: {self.producer_epoch} "
                f"partitionLeaderEpoch: {self.partition_leader_epoch} "
                f"isTransactional: {_bool(attrs & TRANSACTIONAL_BIT)} "
                f"isControl: {_bool(attrs & CONTROL_BIT)} deleteHorizonMs: {horizon} "
                f"position: {self.position} {self.timestamp_type}: {self.max_timestamp} "
                f"size: {self.size} magic: {self.magic} compresscodec: {self.codec} "
                f"crc: {self.crc} isvalid: {_bool(self.is_valid)}")


def _bool(value: object) -> str:
    return "true" if value else "false"


def batches(data: bytes) -> Iterator[Batch]:
    """Whole batches from the start of `data` (Kafka's FileLogInputStream):
    stops at a partial batch; raises ValueError on a corrupt length."""
    pos = 0
    while len(data) - pos >= HEADER_SIZE_UP_TO_MAGIC:
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if length < RECORD_OVERHEAD_V0:
            raise ValueError(f"Record size {length} is less than the minimum record overhead "
                             f"({RECORD_OVERHEAD_V0})")
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise ValueError(f"Record batch size {length + LOG_OVERHEAD} is less than the "
                             f"batch header size {HEADER_SIZE}")
        size = length + LOG_OVERHEAD
        if pos + size > len(data):
            return
        yield Batch(pos, data[pos:pos + size])
        pos += size


def text(value: bytes) -> str:
    """Kafka's StringDecoder: UTF-8, malformed input replaced."""
    return value.decode("utf-8", errors="replace")


def control_line(key: bytes | None, value: bytes | None) -> str:
    if key is None or len(key) < 4:
        return " controlType: UNKNOWN(-1)"
    (type_id,) = struct.unpack_from(">h", key, 2)
    name = CONTROL_TYPES.get(type_id)
    if name is None:
        return f" controlType: UNKNOWN({type_id})"
    epoch = struct.unpack_from(">i", value, 2)[0] if value and len(value) >= 6 else -1
    return f" endTxnMarker: {name} coordinatorEpoch: {epoch}"


def dump_log(path: Path, args: argparse.Namespace, problems: Problems, out: TextIO) -> None:
    if path.name.endswith(".log"):
        print(f"Log starting offset: {base_offset(path)}", file=out)
    with open(path, "rb") as f:
        data = f.read(args.max_bytes)
    print_data = args.print_data_log
    deep = args.deep_iteration or print_data
    last_offset = -1
    valid = 0
    for batch in batches(data):
        print(batch.line(), file=out)
        if deep:
            for offset, ts, seq, key, value, headers in _core.decode_batch(batch.raw):
                if offset != last_offset + 1:
                    problems.non_consecutive.setdefault(str(path.absolute()), []).append(
                        (last_offset, offset))
                last_offset = offset
                line = ""
                if not args.skip_record_metadata:
                    line = (f"| offset: {offset} {batch.timestamp_type}: {ts} "
                            f"keySize: {-1 if key is None else len(key)} "
                            f"valueSize: {-1 if value is None else len(value)} "
                            f"sequence: {seq} headerKeys: [{','.join(h for h, _ in headers)}]")
                    if batch.is_control:
                        line += control_line(key, value)
                if print_data and not batch.is_control:
                    prefix = "| " if args.skip_record_metadata else " "
                    if key is not None:
                        line += f"{prefix}key: {text(key)}"
                        prefix = " "
                    if value is not None:
                        line += f"{prefix}payload: {text(value)}"
                print(line, file=out)
        valid += batch.size
    trailing = os.path.getsize(path) - valid if args.max_bytes == INT_MAX else 0
    if trailing > 0:
        print(f"Found {trailing} invalid bytes at the end of {path.name}", file=out)


def base_offset(path: Path) -> int:
    """A segment file's base offset: its name is the offset in 20 digits (Kafka's
    `00000000000000000042.log`); any other name is refused in one line."""
    stem = path.name.split(".")[0]
    if len(stem) != SEGMENT_NAME_DIGITS or not stem.isdigit():
        raise ValueError(f"{path}: not a segment file name: a segment's name is its base "
                         f"offset in {SEGMENT_NAME_DIGITS} digits, as "
                         f"00000000000000000000{path.suffix}")
    return int(stem)


def _entries(path: Path, size: int) -> list[bytes]:
    data = path.read_bytes()
    return [data[i:i + size] for i in range(0, len(data) - len(data) % size, size)]


def _sibling(path: Path, ext: str) -> Path:
    return path.with_name(path.name.split(".")[0] + ext)


def dump_index(path: Path, args: argparse.Namespace, problems: Problems, out: TextIO) -> None:
    base = base_offset(path)
    entries = [(base + r, p) for r, p in (struct.unpack(">ii", e)
                                          for e in _entries(path, OFFSET_ENTRY_SIZE))]
    if not entries:
        print(f"{path} is empty.", file=out)
        return
    if args.index_sanity_check:
        length = path.stat().st_size
        if entries[-1][0] < base:
            raise ValueError(f"Corrupt index found, index file ({path.absolute()}) has non-zero "
                             f"size but the last offset is {entries[-1][0]} which is less than "
                             f"the base offset {base}.")
        if length % OFFSET_ENTRY_SIZE:
            raise ValueError(f"Index file {path.absolute()} is corrupt, found {length} bytes "
                             f"which is neither positive nor a multiple of {OFFSET_ENTRY_SIZE}.")
        print(f"{path} passed sanity check.", file=out)
        return
    with open(_sibling(path, ".log"), "rb") as log:
        for i, (offset, position) in enumerate(entries):
            if offset == base and i > 0:
                return  # the zero tail of a preallocated index
            log.seek(position)
            first = next(batches(log.read(args.max_message_size)), None)
            last = first.last_offset if first is not None else -1
            if last != offset:
                problems.index_mismatches.setdefault(str(path.absolute()), {})[offset] = last
            if not args.verify_index_only:
                print(f"offset: {offset} position: {position}", file=out)


def dump_time_index(path: Path, args: argparse.Namespace, problems: Problems,
                    out: TextIO) -> None:
    base = base_offset(path)
    entries = [(ts, base + r) for ts, r in (struct.unpack(">qi", e)
                                            for e in _entries(path, TIME_ENTRY_SIZE))]
    if args.index_sanity_check:
        length = path.stat().st_size
        if entries and entries[-1][0] < entries[0][0]:
            raise ValueError(f"Corrupt time index found, time index file ({path.absolute()}) "
                             f"has non-zero size but the last timestamp is {entries[-1][0]} "
                             f"which is less than the first timestamp {entries[0][0]}")
        if entries and entries[-1][1] < base:
            raise ValueError(f"Corrupt time index found, time index file ({path.absolute()}) "
                             f"has non-zero size but the last offset is {entries[-1][1]} which "
                             f"is less than the first offset {base}")
        if length % TIME_ENTRY_SIZE:
            raise ValueError(f"Time index file {path.absolute()} is corrupt, found {length} "
                             f"bytes which is neither positive nor a multiple of "
                             f"{TIME_ENTRY_SIZE}")
        print(f"{path} passed sanity check.", file=out)
        return
    index_path = _sibling(path, ".index")
    offsets = [(base + r, p) for r, p in (struct.unpack(">ii", e) for e in _entries(
        index_path, OFFSET_ENTRY_SIZE))] if index_path.exists() else []
    data = _sibling(path, ".log").read_bytes()
    name = str(path.absolute())
    prev_ts = -1
    for i, (ts, offset) in enumerate(entries):
        if offset == base and i > 0:
            return
        start = max((p for o, p in offsets if o <= offset and (o > base or p == 0)), default=0)
        batch = next((b for b in batches(data[start:]) if b.last_offset >= offset), None)
        if batch is None:
            problems.not_found.setdefault(name, []).append((offset, -1))
        elif batch.last_offset != offset:
            problems.not_found.setdefault(name, []).append((offset, batch.last_offset))
        else:
            max_ts = max((r[1] for r in _core.decode_batch(batch.raw)), default=-1)
            if max_ts != ts:
                problems.time_mismatches.setdefault(name, []).append((ts, max_ts))
            if prev_ts >= ts:
                problems.out_of_order.setdefault(name, []).append((ts, prev_ts))
        if not args.verify_index_only:
            print(f"timestamp: {ts} offset: {offset}", file=out)
        prev_ts = ts


TXN_ENTRY_SIZE = 34
SNAPSHOT_HEADER_SIZE = 10
SNAPSHOT_ENTRY_SIZE = 46
SNAPSHOT_VERSION = 1


def dump_txn_index(path: Path, out: TextIO) -> None:
    """Kafka's AbortedTxn entries: version int16, producerId, firstOffset,
    lastOffset, lastStableOffset (int64 each)."""
    for entry in _entries(path, TXN_ENTRY_SIZE):
        version, pid, first, last, lso = struct.unpack(">hqqqq", entry)
        print(f"version: {version} producerId: {pid} firstOffset: {first} "
              f"lastOffset: {last} lastStableOffset: {lso}", file=out)


def _first_sequence(last_seq: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)."""
    return INT_MAX - delta + last_seq + 1 if last_seq < delta else last_seq - delta


def dump_producer_snapshot(path: Path, out: TextIO, err: TextIO) -> None:
    """Kafka's ProducerSnapshot (version 1): version int16, crc uint32 (CRC-32C
    of everything after it), count int32, then 46-byte entries."""
    data = path.read_bytes()
    if len(data) < SNAPSHOT_HEADER_SIZE:
        print(f"Snapshot file {path} is too short", file=err)
        return
    version, crc, count = struct.unpack_from(">hIi", data)
    if version != SNAPSHOT_VERSION:
        print(f"Snapshot contained an unknown file version {version}", file=err)
        return
    computed = _core.crc32c(data[6:])
    if computed != crc:
        print(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
              f"Computed crc: {computed}", file=err)
        return
    if count < 0 or len(data) != SNAPSHOT_HEADER_SIZE + count * SNAPSHOT_ENTRY_SIZE:
        print(f"Snapshot file {path} has a bad entry count {count}", file=err)
        return
    for i in range(count):
        (pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch,
         txn_first) = struct.unpack_from(
            ">qhiqiqiq", data, SNAPSHOT_HEADER_SIZE + i * SNAPSHOT_ENTRY_SIZE)
        txn = f"OptionalLong[{txn_first}]" if txn_first >= 0 else "OptionalLong.empty"
        line = (f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: "
                f"{coordinator_epoch} currentTxnFirstOffset: {txn} lastTimestamp: {timestamp} ")
        if last_offset >= 0:
            line += (f"firstSequence: {_first_sequence(last_seq, delta)} lastSequence: "
                     f"{last_seq} lastOffset: {last_offset} offsetDelta: {delta} "
                     f"timestamp: {timestamp}")
        print(line, file=out)


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    files = [f for item in args.files for f in item.split(",") if f]
    problems = Problems()
    try:
        for name in files:
            path = Path(name)
            print(f"Dumping {path}", file=out)
            suffix = path.suffix
            if suffix == ".log":
                dump_log(path, args, problems, out)
            elif suffix == ".index":
                dump_index(path, args, problems, out)
            elif suffix == ".timeindex":
                dump_time_index(path, args, problems, out)
            elif suffix == ".txnindex":
                dump_txn_index(path, out)
            elif suffix == ".snapshot":
                dump_producer_snapshot(path, out, err)
            else:
                print(f"Ignoring unknown file {path}", file=err)
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as a Unix tool does
        if out is sys.stdout:
            stdout_gone()
        return 0
    except (OSError, ValueError, _core.CorruptRecordError) as exc:
        out.flush()
        print(exc, file=err)
        return 1
    try:
        out.flush()
    except BrokenPipeError:
        if out is sys.stdout:
            stdout_gone()
        return 0
    problems.report(err)
    return 0
