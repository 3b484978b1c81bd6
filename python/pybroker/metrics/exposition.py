"""Prometheus text exposition format (version 0.0.4) of a broker's metrics.

Written by hand (no prometheus_client at run time): `# HELP` and `# TYPE` lines,
then one `name{label="value",...} number` line per sample. Counters end in
`_total`; sizes are in `_bytes`, durations in `_seconds`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pybroker.metrics import LATENCY_BUCKETS_S, BrokerMetrics
from pybroker.server.gc_policy import PAUSES

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_value(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class Exposition:
    """Accumulates metric families, each announced once with HELP and TYPE."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[Labels, float]], suffix: str = "") -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            self.sample(name + suffix, labels, value)

    def sample(self, name: str, labels: Labels, value: float) -> None:
        if labels:
            inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
            self._lines.append(f"{name}{{{inner}}} {format_value(value)}")
        else:
            self._lines.append(f"{name} {format_value(value)}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def api_name(api_key: int) -> str:
    from pybroker import protocol

    api = protocol.APIS.get(api_key)
    return api.name if api is not None else str(api_key)


def render(metrics: BrokerMetrics, broker: BrokerContext | None = None) -> str:
    """The whole exposition: request-path counters plus gauges read off the broker's
    parts (`broker`, when given)."""
    out = Exposition()
    per_topic = (
        ("pybroker_topic_bytes_in", metrics.bytes_in,
         "Bytes of record batches appended by produce requests."),
        ("pybroker_topic_bytes_out", metrics.bytes_out,
         "Bytes of record batches sent in fetch responses."),
        ("pybroker_topic_messages_in", metrics.messages_in,
         "Records appended by produce requests."),
    )
    for name, counts, help_text in per_topic:
        out.family(name + "_total", "counter", help_text,
                   [((("topic", t),), v) for t, v in sorted(counts.items())])

    requests = sorted((api_name(k), s) for k, s in metrics.requests.items())
    out.family("pybroker_requests_total", "counter", "Requests handled, by API.",
               [((("api", name),), s.count) for name, s in requests])
    hist = "pybroker_request_duration_seconds"
    out.family(hist, "histogram",
               "Time from a request's arrival to its response being written, by API.", ())
    for name, s in requests:
        cumulative = 0
        for bound, count in zip(LATENCY_BUCKETS_S, s.buckets, strict=False):
            cumulative += count
            out.sample(hist + "_bucket", (("api", name), ("le", format_value(bound))),
                       cumulative)
        out.sample(hist + "_bucket", (("api", name), ("le", "+Inf")), s.count)
        out.sample(hist + "_sum", (("api", name),), s.seconds_sum)
        out.sample(hist + "_count", (("api", name),), s.count)

    out.family("pybroker_purgatory_size", "gauge",
               "Requests waiting in purgatory: long-polling fetches, acks=all produces.",
               [((("operation", kind),), broker.purgatory.waiting[kind] if broker else 0)
                for kind in ("fetch", "produce")])
    out.family("pybroker_fetch_partition_errors_total", "counter",
               "Partitions answered with an error in Fetch responses, by error.",
               [((("error", e),), v) for e, v in sorted(metrics.fetch_errors.items())])
    out.family("pybroker_connections", "gauge", "Open client connections.",
               [((), metrics.connections_open)])
    out.family("pybroker_connections_opened_total", "counter", "Client connections accepted.",
               [((), metrics.connections_total)])
    out.family("pybroker_isr_shrinks_total", "counter", "Times an ISR lost a replica.",
               [((), metrics.isr_shrinks)])
    out.family("pybroker_isr_expands_total", "counter", "Times an ISR gained a replica.",
               [((), metrics.isr_expands)])

    out.family("pybroker_authentications_total", "counter",
               "TLS and SASL authentications, by result.",
               [((("result", "success"),), metrics.authentications_succeeded),
                ((("result", "failure"),), metrics.authentications_failed)])
    out.family("pybroker_authorizations_failed_total", "counter",
               "Operations the authorizer denied.", [((), metrics.authorizations_failed)])
    out.family("pybroker_throttle_time_ms_total", "counter",
               "Milliseconds of client quota throttling imposed, by quota type.",
               [((("quota", q),), v) for q, v in sorted(metrics.throttle_ms.items())])

    generations = [str(g) for g in range(PAUSES.GENERATIONS)]
    by_generation: list[tuple[str, str, str, list[int] | list[float]]] = [
        ("pybroker_gc_collections_total", "counter",
         "Cyclic garbage collections, by generation (2: full).", PAUSES.count),
        ("pybroker_gc_pause_seconds_total", "counter",
         "Seconds every thread waited for the cyclic garbage collector, by generation.",
         PAUSES.seconds),
        ("pybroker_gc_pause_seconds_max", "gauge",
         "The longest cyclic garbage collection so far, by generation.", PAUSES.longest_s),
    ]
    for name, kind, text, values in by_generation:
        out.family(name, kind, text, [((("generation", g),), v)
                                      for g, v in zip(generations, values, strict=True)])

    out.family("pybroker_gc_freezes_total", "counter",
               "Times the survivors of a slow full collection were frozen out of later ones.",
               [((), PAUSES.freezes)])

    if broker is not None:
        _broker_gauges(out, broker)

    rows = metrics.lag_rows() + (group_lag_rows(broker) if broker is not None else [])
    out.family("pybroker_consumer_group_lag", "gauge",
               "High watermark minus committed offset, per group and partition.",
               [((("group", g), ("topic", t), ("partition", str(p))), lag)
                for g, t, p, lag in sorted(rows)])
    return out.text()


def group_lag_rows(broker: BrokerContext) -> list[tuple[str, str, int, int]]:
    """(group, topic, partition, lag) from the group coordinator's committed offsets,
    for partitions this broker hosts (none when the broker has no coordinator)."""
    coordinator = getattr(broker, "groups", None)
    groups = getattr(coordinator, "groups", None)
    if not isinstance(groups, dict):
        return []
    rows = []
    for group_id, group in groups.items():
        for (topic, index), entry in getattr(group, "offsets", {}).items():
            partition = broker.replicas.get(topic, index)
            if partition is not None and entry.offset >= 0:
                rows.append((group_id, topic, index,
                             max(0, partition.high_watermark - entry.offset)))
    return rows


def _broker_gauges(out: Exposition, broker: BrokerContext) -> None:
    # counted by each partition's leader, as Kafka's UnderReplicatedPartitions
    under = sum(1 for p in broker.replicas.partitions.values()
                if p.is_leader and len(p.isr) < len(p.replicas))
    out.family("pybroker_under_replicated_partitions", "gauge",
               "Partitions whose ISR is smaller than their replica set.", [((), under)])
    out.family("pybroker_partitions", "gauge", "Partition replicas hosted by this broker.",
               [((), len(broker.logs.partitions))])
    out.family("pybroker_log_flushes_total", "counter",
               "fsyncs of partition logs by the flush policy (flush.messages, flush.ms).",
               [((), getattr(broker.logs, "flushes", 0))])
    # Kafka's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
    # IncrementalFetchSessionEvictionsPerSec (a counter here)
    sessions = getattr(broker, "fetch_sessions", None)
    if sessions is not None:
        cached = list(sessions.sessions.values())
        out.family("pybroker_fetch_sessions", "gauge", "Incremental fetch sessions cached.",
                   [((("kind", "follower"),), sum(1 for s in cached if s.privileged)),
                    ((("kind", "consumer"),), sum(1 for s in cached if not s.privileged))])
        out.family("pybroker_fetch_session_partitions", "gauge",
                   "Partitions cached in incremental fetch sessions.",
                   [((), sessions.partitions_cached)])
        out.family("pybroker_fetch_session_evictions_total", "counter",
                   "Incremental fetch sessions evicted.", [((), sessions.evictions)])
    logs = sorted(broker.logs.partitions.items())
    size, segments, end, lso_lag = [], [], [], []
    for (topic, index), partition in logs:
        labels = (("topic", topic), ("partition", str(index)))
        size.append((labels, partition.log.size_bytes))
        segments.append((labels, partition.log.segment_count))
        end.append((labels, partition.log.log_end_offset))
        lso_lag.append((labels, partition.high_watermark - partition.last_stable_offset))
    out.family("pybroker_log_size_bytes", "gauge", "Bytes of a partition's log segments.", size)
    out.family("pybroker_log_segments", "gauge", "Segments in a partition's log.", segments)
    out.family("pybroker_log_end_offset", "gauge", "Offset of a partition's next record.", end)
    out.family("pybroker_last_stable_offset_lag", "gauge",
               "High watermark minus last stable offset: records held back from "
               "read_committed consumers by open transactions (Kafka's LastStableOffsetLag).",
               lso_lag)
