"""Options of Spark's Kafka source, parsed once, and offset resolution.

Offsets travel as Spark's Kafka source writes them: JSON per partition,
``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest; partition keys are
strings because offsets round-trip through JSON).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pybroker.spark.client import EARLIEST, LATEST, KafkaClient, TopicPartition

log = logging.getLogger("pybroker.spark")

PartitionOffsets = dict[TopicPartition, int]
OffsetsJson = dict[str, dict[str, int]]

FETCH_BYTES_DEFAULT = 8 << 20
ROWS_PER_BATCH_DEFAULT = 65536


class DataLossError(RuntimeError):
    """Records asked for are gone (Spark's Kafka source fails the same way)."""


def data_loss(fail: bool, message: str) -> None:
    """Raise when failOnDataLoss, else log (Spark's reportDataLoss)."""
    if fail:
        raise DataLossError(
            message + ". Some data may have been lost because they are not available in "
            "Kafka any more; either the data was aged out by Kafka or the topic may have "
            "been deleted before all the data in the topic was processed. If you don't "
            'want your query to fail on such cases, set the source option "failOnDataLoss" '
            'to "false".')
    log.warning("%s; skipping (failOnDataLoss=false)", message)


def to_json(offsets: PartitionOffsets) -> OffsetsJson:
    out: OffsetsJson = {}
    for (topic, p), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(off)
    return out


def from_json(value: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {(t, int(p)): int(o) for t, ps in value.items() for p, o in ps.items()}


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true"


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: str | None
    ending: str | None
    starting_timestamp: int | None
    ending_timestamp: int | None
    starting_by_timestamp: str | None
    ending_by_timestamp: str | None
    timestamp_strategy: str
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    fetch_bytes: int
    rows_per_batch: int
    isolation_level: int = 0

    @staticmethod
    def parse(options: Mapping[str, str]) -> SourceOptions:
        """From the data source's (case-insensitive) options."""

        def get(name: str) -> str | None:
            return options.get(name)

        bootstrap = get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ValueError("option 'kafka.bootstrap.servers' must be specified")
        chosen = [k for k in ("subscribe", "subscribePattern", "assign") if get(k)]
        if len(chosen) != 1:
            raise ValueError("exactly one of the options 'subscribe', 'subscribePattern' "
                             f"or 'assign' must be specified, got {chosen}")
        subscribe = assign = None
        if get("subscribe"):
            subscribe = tuple(t.strip() for t in (get("subscribe") or "").split(",")
                              if t.strip())
        if get("assign"):
            parsed = json.loads(get("assign") or "{}")
            assign = tuple(sorted((t, int(p)) for t, ps in parsed.items() for p in ps))

        def opt_int(name: str) -> int | None:
            v = get(name)
            return None if v is None else int(v)

        isolation = (get("kafka.isolation.level") or "read_uncommitted").lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"kafka.isolation.level {isolation!r}")
        strategy = (get("startingOffsetsByTimestampStrategy") or "error").lower()
        if strategy not in ("error", "latest"):
            raise ValueError(f"startingOffsetsByTimestampStrategy {strategy!r}")
        return SourceOptions(
            bootstrap_servers=bootstrap,
            subscribe=subscribe,
            subscribe_pattern=get("subscribePattern"),
            assign=assign,
            starting=get("startingOffsets"),
            ending=get("endingOffsets"),
            starting_timestamp=opt_int("startingTimestamp"),
            ending_timestamp=opt_int("endingTimestamp"),
            starting_by_timestamp=get("startingOffsetsByTimestamp"),
            ending_by_timestamp=get("endingOffsetsByTimestamp"),
            timestamp_strategy=strategy,
            max_offsets_per_trigger=opt_int("maxOffsetsPerTrigger"),
            min_partitions=opt_int("minPartitions"),
            max_records_per_partition=opt_int("maxRecordsPerPartition"),
            fail_on_data_loss=_bool(get("failOnDataLoss"), True),
            include_headers=_bool(get("includeHeaders"), False),
            fetch_bytes=opt_int("fetch.max.bytes") or FETCH_BYTES_DEFAULT,
            rows_per_batch=opt_int("rowsPerBatch") or ROWS_PER_BATCH_DEFAULT,
            isolation_level=int(isolation == "read_committed"),
        )

    def client(self, client_id: str = "pybroker-spark") -> KafkaClient:
        return KafkaClient(self.bootstrap_servers, client_id=client_id,
                           isolation_level=self.isolation_level)

    # -- topic partitions ----------------------------------------------------------
    def topic_partitions(self, client: KafkaClient) -> list[TopicPartition]:
        if self.assign is not None:
            return list(self.assign)
        if self.subscribe is not None:
            meta = client.metadata(list(self.subscribe))
        else:
            pattern = re.compile(self.subscribe_pattern or "")
            meta = {t: ps for t, ps in client.metadata(None).items()
                    if pattern.fullmatch(t)}
        return sorted((t, p) for t, ps in meta.items() for p in ps)

    # -- offsets -------------------------------------------------------------------
    def resolve(self, client: KafkaClient, tps: list[TopicPartition], *,
                starting: bool, default: int) -> PartitionOffsets:
        """Concrete offsets for startingOffsets/endingOffsets (or the timestamp
        options); per-partition -2/-1 are resolved through ListOffsets."""
        spec = self.starting if starting else self.ending
        ts = self.starting_timestamp if starting else self.ending_timestamp
        by_ts = self.starting_by_timestamp if starting else self.ending_by_timestamp
        out: PartitionOffsets = {}
        if ts is not None or by_ts is not None:
            per_tp = from_json(json.loads(by_ts)) if ts is None and by_ts else {}
            for tp in tps:
                t = ts if ts is not None else per_tp.get(tp)
                if t is None:
                    raise ValueError(f"no timestamp for {tp[0]}-{tp[1]} in {by_ts!r}")
                off = client.list_offset(tp, t)
                if off < 0:  # no record at or after ts
                    if starting and self.timestamp_strategy == "error":
                        raise ValueError(
                            f"no offset for timestamp {t} in {tp[0]}-{tp[1]} "
                            "(startingOffsetsByTimestampStrategy=error)")
                    off = client.list_offset(tp, LATEST)
                out[tp] = off
            return out
        if spec is None or spec.strip().lower() in ("earliest", "latest"):
            word = (spec or "").strip().lower()
            which = {"earliest": EARLIEST, "latest": LATEST}.get(word, default)
            return {tp: client.list_offset(tp, which) for tp in tps}
        given = from_json(json.loads(spec))
        missing = [tp for tp in tps if tp not in given]
        if missing and self.assign is not None:
            raise ValueError(f"offsets in {spec!r} miss partitions {missing}")
        for tp in tps:
            off = given.get(tp, default)
            out[tp] = client.list_offset(tp, off) if off in (EARLIEST, LATEST) else off
        return out


def split_ranges(ranges: list[tuple[TopicPartition, int, int]], min_partitions: int | None,
                 max_records: int | None) -> list[tuple[TopicPartition, int, int]]:
    """One range per topic partition, split so none exceeds ``max_records`` and,
    with ``min_partitions``, into about that many pieces in proportion to size."""
    out: list[tuple[TopicPartition, int, int]] = []
    total = sum(e - s for _, s, e in ranges)
    for tp, s, e in ranges:
        size = e - s
        pieces = 1
        if max_records and size > max_records:
            pieces = -(-size // max_records)
        if min_partitions and total and min_partitions > len(ranges):
            pieces = max(pieces, round(size * min_partitions / total))
        pieces = max(1, min(pieces, size))
        for i in range(pieces):
            a, b = s + size * i // pieces, s + size * (i + 1) // pieces
            out.append((tp, a, b))
    return out
