"""A small synchronous Kafka client for the Spark data source.

It speaks the wire protocol through ``pybroker.protocol`` (Metadata, ListOffsets,
Fetch, Produce, CreateTopics, and for the exactly-once sink FindCoordinator,
InitProducerId, AddPartitionsToTxn, EndTxn) over plain sockets, so the data source
works against any Kafka-compatible broker, not only pybroker. Fixed API versions that
every broker since Kafka 2.1 supports (and Kafka 4 still does): Metadata v8,
ListOffsets v4, Fetch v11, Produce v7, CreateTopics v4, FindCoordinator v2; the
transaction APIs at v3 (Kafka 2.5+: InitProducerId, AddPartitionsToTxn, EndTxn).

One ``KafkaClient`` per Spark task or driver call; not thread-safe. Record bytes
are never parsed here: Fetch hands back a ``memoryview`` of the response, which
``pybroker._core.decode_columns`` turns into columns.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from pybroker.errors import ErrorCode
from pybroker.protocol import decode_response, encode_request

METADATA, LIST_OFFSETS, FETCH, PRODUCE, CREATE_TOPICS = 3, 2, 1, 0, 19
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 10, 22, 24, 26
VERSIONS = {METADATA: 8, LIST_OFFSETS: 4, FETCH: 11, PRODUCE: 7, CREATE_TOPICS: 4,
            FIND_COORDINATOR: 2, INIT_PRODUCER_ID: 3, ADD_PARTITIONS_TO_TXN: 3, END_TXN: 3}

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
TOPIC_ALREADY_EXISTS = 36
RETRIABLE = {UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
             7, 13, 14, 15, 19, 74, 75}  # + request timeout, network, loading, NER, fenced
#: the transaction coordinator moved, is loading, or is still writing the markers
#: of the previous transaction: find it again and retry
TXN_RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                 ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS}
TXN_COORDINATOR = 1  # FindCoordinator key_type

LATEST = -1
EARLIEST = -2

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0
RESPONSE_BYTES_MAX = 256 << 20
RETRIES_MAX = 20
RETRY_BACKOFF_S = 0.2

TopicPartition = tuple[str, int]


class KafkaError(Exception):
    """A broker answered with an error code this client does not retry."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(f"{what}: Kafka error {code}")
        self.code = code


class _Connection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        self.sock.settimeout(REQUEST_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0

    def request(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        version = VERSIONS[api_key]
        self.correlation_id += 1
        parts = encode_request(api_key, version, self.correlation_id, self.client_id, body)
        self.sock.sendall(b"".join(bytes(p) for p in parts))
        if api_key == PRODUCE and body.get("acks") == 0:
            return {}
        (size,) = struct.unpack(">i", self._recv(4))
        if not 4 <= size <= RESPONSE_BYTES_MAX:
            raise ConnectionError(f"bad response size {size}")
        corr, decoded = decode_response(api_key, version, self._recv(size))
        if corr != self.correlation_id:
            raise ConnectionError(f"correlation id {corr} != {self.correlation_id}")
        return decoded

    def _recv(self, n: int) -> memoryview:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("connection closed by broker")
            got += k
        return view

    def close(self) -> None:
        self.sock.close()


@dataclass
class FetchResult:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | bytes
    #: (producer_id, first_offset) of aborted transactions (read_committed)
    aborted: list[tuple[int, int]] | None

    @property
    def readable_end(self) -> int:
        """Where reading stops: the last stable offset when the broker gave one."""
        return self.last_stable_offset if self.last_stable_offset >= 0 else self.high_watermark


@dataclass
class KafkaClient:
    """Connections to the bootstrap servers and to partition leaders."""

    bootstrap_servers: str
    client_id: str = "pybroker-spark"
    #: 0 read_uncommitted (Spark's default), 1 read_committed
    isolation_level: int = 0
    _brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    _leaders: dict[TopicPartition, int] = field(default_factory=dict)
    _partitions: dict[str, list[int]] = field(default_factory=dict)
    _conns: dict[int, _Connection] = field(default_factory=dict)
    _bootstrap: _Connection | None = None

    # -- connections ---------------------------------------------------------------
    def _any(self) -> _Connection:
        if self._bootstrap is not None:
            return self._bootstrap
        errors = []
        for server in self.bootstrap_servers.split(","):
            host, _, port = server.strip().rpartition(":")
            try:
                self._bootstrap = _Connection(host, int(port), self.client_id)
                return self._bootstrap
            except OSError as exc:
                errors.append(f"{server}: {exc}")
        raise ConnectionError("no bootstrap server reachable: " + "; ".join(errors))

    def _node(self, node_id: int) -> _Connection:
        conn = self._conns.get(node_id)
        if conn is None:
            host, port = self._brokers[node_id]
            conn = self._conns[node_id] = _Connection(host, port, self.client_id)
        return conn

    def _drop(self, node_id: int | None) -> None:
        conn = self._conns.pop(node_id, None) if node_id is not None else None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        if self._bootstrap is not None:
            self._bootstrap.close()
            self._bootstrap = None

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ------------------------------------------------------------------
    def metadata(self, topics: list[str] | None = None, *,
                 auto_create: bool = False) -> dict[str, list[int]]:
        """Refresh brokers and leaders; returns topic -> sorted partition ids
        (all topics when ``topics`` is None; missing topics are left out)."""
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create,
        }
        try:
            resp = self._any().request(METADATA, body)
        except OSError:
            self._bootstrap = None
            resp = self._any().request(METADATA, body)
        self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}
        out: dict[str, list[int]] = {}
        for t in resp["topics"]:
            if t["error_code"] != NONE or t.get("is_internal"):
                continue
            parts = []
            for p in t["partitions"]:
                self._leaders[t["name"], p["partition_index"]] = p["leader_id"]
                parts.append(p["partition_index"])
            out[t["name"]] = self._partitions[t["name"]] = sorted(parts)
        return out

    def partitions_for(self, topic: str, *, auto_create: bool = False) -> list[int]:
        parts = self._partitions.get(topic)
        for _ in range(RETRIES_MAX):
            if parts:
                return parts
            parts = self.metadata([topic], auto_create=auto_create).get(topic)
            if not auto_create:
                break
            time.sleep(RETRY_BACKOFF_S)
        if not parts:
            raise KafkaError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r}")
        return parts

    def _leader(self, tp: TopicPartition) -> int:
        for _ in range(RETRIES_MAX):
            leader = self._leaders.get(tp, -1)
            if leader >= 0 and leader in self._brokers:
                return leader
            self.metadata([tp[0]])
            time.sleep(RETRY_BACKOFF_S)
        raise KafkaError(LEADER_NOT_AVAILABLE, f"no leader for {tp[0]}-{tp[1]}")

    def _call(self, tp: TopicPartition, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        leader = self._leader(tp)
        try:
            return self._node(leader).request(api_key, body)
        except OSError:
            self._drop(leader)
            self.metadata([tp[0]])
            return self._node(self._leader(tp)).request(api_key, body)

    # -- offsets -------------------------------------------------------------------
    def list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        """The offset for ``timestamp`` (LATEST, EARLIEST or ms); -1 when no record
        has a timestamp >= the one asked for."""
        body = {
            "replica_id": -1,
            "isolation_level": self.isolation_level,
            "topics": [{"name": tp[0], "partitions": [
                {"partition_index": tp[1], "timestamp": timestamp}]}],
        }
        for _ in range(RETRIES_MAX):
            p = self._call(tp, LIST_OFFSETS, body)["topics"][0]["partitions"][0]
            if p["error_code"] == NONE:
                return int(p["offset"])
            if p["error_code"] not in RETRIABLE:
                raise KafkaError(p["error_code"], f"ListOffsets {tp[0]}-{tp[1]}")
            self.metadata([tp[0]])
            time.sleep(RETRY_BACKOFF_S)
        raise KafkaError(p["error_code"], f"ListOffsets {tp[0]}-{tp[1]}")

    def offset_range(self, tp: TopicPartition) -> tuple[int, int]:
        """(earliest, latest) offsets of a partition."""
        return self.list_offset(tp, EARLIEST), self.list_offset(tp, LATEST)

    # -- fetch ---------------------------------------------------------------------
    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int,
              max_wait_ms: int = 500) -> FetchResult:
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": self.isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": tp[0], "partitions": [{
                "partition": tp[1], "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": max_bytes,
            }]}],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        for _ in range(RETRIES_MAX):
            resp = self._call(tp, FETCH, body)
            p = resp["responses"][0]["partitions"][0]
            code = p["error_code"]
            if code in RETRIABLE:
                self.metadata([tp[0]])
                time.sleep(RETRY_BACKOFF_S)
                continue
            if code not in (NONE, OFFSET_OUT_OF_RANGE):
                raise KafkaError(code, f"Fetch {tp[0]}-{tp[1]} at {offset}")
            aborted = p.get("aborted_transactions")
            return FetchResult(
                code, p["high_watermark"], p.get("last_stable_offset", -1),
                p["log_start_offset"], p["records"] or b"",
                None if not aborted else [(a["producer_id"], a["first_offset"])
                                          for a in aborted])
        raise KafkaError(code, f"Fetch {tp[0]}-{tp[1]} at {offset}")

    # -- produce -------------------------------------------------------------------
    def produce(self, batches: dict[TopicPartition, list[bytes]], acks: int = -1,
                timeout_ms: int = 30000, transactional_id: str | None = None) -> None:
        """Send record batches (one request per leader); raises on any error.
        Transactional batches carry their producer id/epoch/sequence already
        (``pybroker.spark.txn``); ``transactional_id`` names their transaction."""
        pending = dict(batches)
        for _ in range(RETRIES_MAX):
            by_leader: dict[int, dict[str, list[dict[str, Any]]]] = {}
            for tp, bs in pending.items():
                topics = by_leader.setdefault(self._leader(tp), {})
                topics.setdefault(tp[0], []).append(
                    {"index": tp[1], "records": b"".join(bs)})
            failed: dict[TopicPartition, list[bytes]] = {}
            for leader, topics in by_leader.items():
                body = {"transactional_id": transactional_id, "acks": acks,
                        "timeout_ms": timeout_ms,
                        "topic_data": [{"name": t, "partition_data": ps}
                                       for t, ps in topics.items()]}
                try:
                    resp = self._node(leader).request(PRODUCE, body)
                except OSError:
                    # not knowing whether it was written, resending may duplicate: fail
                    self._drop(leader)
                    raise
                for t in resp.get("responses", []):
                    for p in t["partition_responses"]:
                        code = p["error_code"]
                        if code == NONE:
                            continue
                        tp = (t["name"], p["index"])
                        if code not in RETRIABLE:
                            raise KafkaError(code, f"Produce {tp[0]}-{tp[1]}")
                        failed[tp] = pending[tp]
            if not failed:
                return
            pending = failed
            self.metadata(sorted({tp[0] for tp in failed}))
            time.sleep(RETRY_BACKOFF_S)
        raise KafkaError(NOT_LEADER_OR_FOLLOWER, "Produce: retries exhausted")

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        """CreateTopics on the controller (any broker forwards or answers); an
        existing topic is fine."""
        body = {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": -1,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }], "timeout_ms": 30000, "validate_only": False}
        resp = self._any().request(CREATE_TOPICS, body)
        code = resp["topics"][0]["error_code"]
        if code not in (NONE, TOPIC_ALREADY_EXISTS):
            raise KafkaError(code, f"CreateTopics {name}")
        self.partitions_for(name, auto_create=True)

    # -- transactions ----------------------------------------------------------------
    def _coordinator(self, transactional_id: str) -> _Connection:
        """A connection to the transaction coordinator of ``transactional_id``."""
        for _ in range(RETRIES_MAX):
            resp = self._any().request(FIND_COORDINATOR, {
                "key": transactional_id, "key_type": TXN_COORDINATOR})
            code = resp["error_code"]
            if code == NONE:
                node = resp["node_id"]
                self._brokers[node] = (resp["host"], resp["port"])
                return self._node(node)
            if code not in TXN_RETRIABLE:
                raise KafkaError(code, f"FindCoordinator {transactional_id!r}")
            time.sleep(RETRY_BACKOFF_S)
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         f"FindCoordinator {transactional_id!r}")

    def _txn_call(self, transactional_id: str, api_key: int, body: dict[str, Any],
                  what: str) -> dict[str, Any]:
        """One request to the coordinator, re-finding it and retrying while it
        answers a retriable transaction error; other errors raise KafkaError."""
        code = NONE
        for _ in range(RETRIES_MAX):
            try:
                resp = self._coordinator(transactional_id).request(api_key, body)
            except OSError:  # the coordinator's broker went away: find it again
                self.close()
                time.sleep(RETRY_BACKOFF_S)
                continue
            code = _txn_error(api_key, resp)
            if code == NONE:
                return resp
            if code not in TXN_RETRIABLE:
                raise KafkaError(code, what)
            time.sleep(RETRY_BACKOFF_S)
        raise KafkaError(code, what + ": retries exhausted")

    def init_producer_id(self, transactional_id: str,
                         transaction_timeout_ms: int) -> tuple[int, int]:
        """InitProducerId for a transactional id: (producer id, epoch). The
        coordinator bumps the epoch, which fences every older producer with this
        id, and aborts the transaction such a producer left open."""
        resp = self._txn_call(transactional_id, INIT_PRODUCER_ID, {
            "transactional_id": transactional_id,
            "transaction_timeout_ms": transaction_timeout_ms,
            "producer_id": -1, "producer_epoch": -1,
        }, f"InitProducerId {transactional_id!r}")
        return int(resp["producer_id"]), int(resp["producer_epoch"])

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, epoch: int,
                              tps: list[TopicPartition]) -> None:
        """AddPartitionsToTxn: the partitions must be in the transaction before
        its first Produce to them."""
        topics: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            topics.setdefault(t, []).append(p)
        self._txn_call(transactional_id, ADD_PARTITIONS_TO_TXN, {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps}
                                    for t, ps in topics.items()],
        }, f"AddPartitionsToTxn {transactional_id!r}")

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int,
                commit: bool) -> None:
        """EndTxn: commit or abort. A retried commit of a committed transaction
        succeeds (Kafka answers NONE while the epoch is unchanged)."""
        self._txn_call(transactional_id, END_TXN, {
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": epoch, "committed": commit,
        }, f"EndTxn({'commit' if commit else 'abort'}) {transactional_id!r}")


def _txn_error(api_key: int, resp: dict[str, Any]) -> int:
    """The error of a transaction API response; AddPartitionsToTxn answers per
    partition (the first error that is not OPERATION_NOT_ATTEMPTED wins)."""
    if api_key != ADD_PARTITIONS_TO_TXN:
        return int(resp["error_code"])
    codes = [p["partition_error_code"] for t in resp["results_by_topic_v3_and_below"]
             for p in t["results_by_partition"]]
    return next((c for c in codes if c not in (NONE, ErrorCode.OPERATION_NOT_ATTEMPTED)), NONE)
