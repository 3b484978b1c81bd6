"""Produce requests that reach a broker while it takes the lead of their partition
(the store names it leader, so the other brokers' metadata does; it still records its
leader epoch): they wait for the takeover and are then taken in their order, rather
than being refused NOT_LEADER_OR_FOLLOWER.

Refused, a producer's pipelined retries saw their first batches refused and a later one
accepted or refused OUT_OF_ORDER_SEQUENCE_NUMBER; librdkafka bumps its epoch on the
latter and renumbers the refused batches, and one the new leader already held by
replication was written twice (librdkafka issue 4953; the likely cause of the one
idempotent duplicate seen in tests/cluster/test_reassignment.py)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.handlers.produce import handle_produce
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import MetadataCache
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.manager import ReplicaManager, _LeadAt

PID = 4242
WAIT_S = 10.0


def batch(seq: int, count: int, base_offset: int = 0) -> bytes:
    """An idempotent producer's batch of `count` records from sequence `seq` (with
    `base_offset` set, as the leader wrote it, for the follower's copy)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=PID, producer_epoch=0,
                                        base_sequence=seq, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=int(time.time() * 1000), key=None,
                       value=f"v{seq + i}".encode(), headers=[])
    raw = bytearray(builder.build())
    raw[0:8] = base_offset.to_bytes(8, "big")
    return bytes(raw)


def produce_request(records: bytes) -> Any:
    """A Produce v9 request of one batch to t-0 (acks=1: answered once appended), with
    what handle_produce reads of a request."""
    return SimpleNamespace(
        header=SimpleNamespace(client_id="producer", api_version=9), version=9,
        connection=None, received_ms=time.monotonic(), may_defer=False,
        body={"acks": 1, "timeout_ms": int(WAIT_S * 1000), "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": memoryview(records)}]}]})


@pytest.fixture
def follower(tmp_path: Path) -> Any:
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    logs = LogManager(config, "cluster")
    logs.startup()
    replicas = ReplicaManager(0, logs, Purgatory(),
                              ReplicaFetcherManager(0, MetadataCache("cluster"), config))
    yield replicas
    logs.shutdown()


def states(topic_id: uuid.UUID, leader: int, epoch: int) -> TopicRecord:
    return TopicRecord("t", topic_id, [
        PartitionState(leader=leader, leader_epoch=epoch, replicas=[0, 1], isr=[0, 1])], {})


def test_produce_during_a_takeover_waits_for_it_and_a_replicated_retry_keeps_its_offsets(
        follower: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    replicas = follower
    topic_id = uuid.uuid4()
    ctx = SimpleNamespace(replicas=replicas, purgatory=replicas.purgatory,
                          metrics=SimpleNamespace(record_produce=lambda *args: None))
    recording = threading.Event()  # the takeover's epoch is being recorded
    release = threading.Event()
    run = _LeadAt.run

    def slow_run(self: _LeadAt) -> None:
        recording.set()
        assert release.wait(WAIT_S)
        run(self)

    monkeypatch.setattr(_LeadAt, "run", slow_run)
    answers: list[dict[str, Any]] = []

    async def connection(requests: list[Any]) -> None:
        """One client connection: each request handled once the one before is answered."""
        for request in requests:
            answer = await handle_produce(ctx, request)  # type: ignore[arg-type]
            answers.append(answer["responses"][0]["partition_responses"][0])

    async def main() -> None:
        await replicas.apply_topic_async(states(topic_id, 1, 5))
        partition = replicas.get("t", 0)
        assert partition is not None and not partition.is_leader
        # broker 1 wrote sequences 0-2 at offsets 0-2; this follower copied them
        partition.log.append_as_follower(memoryview(batch(0, 3)))
        async with anyio.create_task_group() as tg:
            tg.start_soon(replicas.apply_topic_async, states(topic_id, 0, 6))
            while not recording.is_set():  # bounded by slow_run's wait
                await anyio.sleep(0.01)
            # the producer retries 0-2 (its answer from broker 1 was lost), then sends 3-4
            tg.start_soon(connection, [produce_request(batch(0, 3)),
                                       produce_request(batch(3, 2))])
            await anyio.wait_all_tasks_blocked()
            assert answers == [], "refused while the lead was being taken"
            release.set()
        assert partition.is_leader

    anyio.run(main)
    assert [(a["error_code"], a["base_offset"]) for a in answers] == [(0, 0), (0, 3)]
    log = replicas.get("t", 0)
    assert log is not None and log.log_end_offset == 5
