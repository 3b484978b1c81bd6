"""Every client of the suite, in its default (newest) configuration, against the
ApiVersions table: a recording proxy notes each request's (api key, version) while the
client produces, consumes in a group, commits and looks up offsets; every version sent
must be one the broker advertises, and where the client can go newer than what it
sent, the broker's table is what held it back (it must not be, for the APIs listed in
NEWEST)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.conftest import free_port

from .helpers import OP_TIMEOUT_S, create_topic
from .protoclient import ProtoClient
from .recording_proxy import RecordingProxy

if TYPE_CHECKING:
    from conftest import BrokerFactory

API_VERSIONS = 18
MESSAGES = 5

#: the newest version each client sends of the APIs whose newer versions change
#: behaviour (read from the clients' sources: confluent-kafka 2.16's librdkafka,
#: kafka-python 3.0.12, aiokafka 0.14, kcat 1.7.1 with its builtin librdkafka 2.0.2);
#: the broker must advertise at least these
NEWEST: dict[str, dict[int, int]] = {
    "confluent-kafka": {0: 10, 1: 16, 2: 7, 3: 13, 8: 9, 9: 9},
    "kafka-python": {0: 9, 1: 12, 2: 7, 8: 8, 9: 8},
    "aiokafka": {1: 11},
    "kcat": {1: 11},
}


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    with ProtoClient(bootstrap) as pc:
        reply = pc.request(API_VERSIONS, 3, {"client_software_name": "t",
                                             "client_software_version": "1"})
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in reply["api_keys"]}


def run_confluent(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(MESSAGES):
        producer.produce(topic, value=b"c%d" % i)
    assert producer.flush(OP_TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-c",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < MESSAGES and time.monotonic() < deadline:
            got += len([m for m in consumer.consume(10, timeout=0.5) if m.error() is None])
        assert got >= MESSAGES
        consumer.commit(asynchronous=False)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=OP_TIMEOUT_S)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()},
                                 request_timeout=OP_TIMEOUT_S)
    for future in futures.values():
        future.result(OP_TIMEOUT_S)


def run_kafka_python(bootstrap: str, topic: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(MESSAGES):
        producer.send(topic, b"k%d" % i)
    producer.flush(OP_TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{topic}-k",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=15000)
    try:
        got = 0
        for _ in consumer:
            got += 1
            if got >= MESSAGES:
                break
        assert got >= MESSAGES
        consumer.commit()
    finally:
        consumer.close()


def run_aiokafka(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(MESSAGES):
                await producer.send_and_wait(topic, b"a%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{topic}-a",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got = 0
            async with asyncio.timeout(30):
                while got < MESSAGES:
                    batches = await consumer.getmany(timeout_ms=500)
                    got += sum(len(v) for v in batches.values())
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(main())


def run_kcat(bootstrap: str, topic: str) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat not installed")
    data = "".join(f"kc{i}\n" for i in range(MESSAGES))
    subprocess.run([kcat, "-b", bootstrap, "-P", "-t", topic], input=data, text=True,
                   check=True, timeout=60)
    out = subprocess.run([kcat, "-b", bootstrap, "-G", f"{topic}-kcat", "-o", "beginning",
                          "-c", str(MESSAGES), "-e", topic],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert len(out.split()) >= MESSAGES


CLIENTS: dict[str, Callable[[str, str], None]] = {
    "confluent-kafka": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "kcat": run_kcat,
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_sends_versions_the_broker_advertises(broker_factory: BrokerFactory,
                                                     client: str) -> None:
    port = free_port()
    proxy = RecordingProxy(port).start()
    try:
        b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                            "group.initial.rebalance.delay.ms": 0})
        proxy.target = ("127.0.0.1", b.port)
        table = advertised(b.bootstrap)
        topic = f"versions-{client}"
        create_topic(b.bootstrap, topic)
        CLIENTS[client](proxy.bootstrap, topic)
        sent: dict[int, set[int]] = {}
        for api_key, version, _ in proxy.snapshot():
            sent.setdefault(api_key, set()).add(version)
    finally:
        proxy.close()
    seen = ", ".join(f"{k}:v{sorted(v)}" for k, v in sorted(sent.items()))
    print(f"\nSENT {client}: {seen}")
    for api_key, versions in sent.items():
        if api_key == API_VERSIONS:
            continue  # a client may try a newer ApiVersions first (answered with v0)
        assert api_key in table, f"{client} sent API {api_key}, which is not advertised"
        low, high = table[api_key]
        assert all(low <= v <= high for v in versions), (client, api_key, versions, table[api_key])
    for api_key, newest in NEWEST[client].items():
        assert table[api_key][1] >= newest, \
            f"the broker advertises API {api_key} up to v{table[api_key][1]}; {client} " \
            f"sends v{newest}"
        if api_key in sent:
            assert max(sent[api_key]) == newest, (client, api_key, sent[api_key])
