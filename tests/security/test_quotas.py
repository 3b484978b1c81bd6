"""Client quotas with a real client: a producer over its producer_byte_rate is held
to within 20% of it and sees throttle_time_ms; the quota APIs describe and remove
what they set; the rate's arithmetic is Kafka's."""

from __future__ import annotations

import socket
import struct
import time

from confluent_kafka import Producer

from tests.conftest import Broker
from tests.security.test_sasl import _recv_exact

QUOTA_BYTES_S = 200_000
RECORD_BYTES = 1000


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text)) + text.encode()


def _request(port: int, api_key: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, 0, 5, 3) + b"raw"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        return _recv_exact(sock, size)[4:]


def _alter(port: int, client_id: str, key: str, value: float, remove: bool = False) -> int:
    body = (struct.pack(">i", 1) + struct.pack(">i", 1) + _string("client-id")
            + _string(client_id) + struct.pack(">i", 1) + _string(key)
            + struct.pack(">d", value) + struct.pack(">?", remove) + struct.pack(">?", False))
    answer = _request(port, 49, body)
    return int(struct.unpack(">h", answer[8:10])[0])  # throttle, count, first error


def _describe_count(port: int, client_id: str) -> int:
    body = struct.pack(">i", 1) + _string("client-id") + struct.pack(">b", 0) + _string(
        client_id) + struct.pack(">?", False)
    answer = _request(port, 48, body)
    assert struct.unpack(">h", answer[4:6])[0] == 0
    return int(struct.unpack(">i", answer[8:12])[0])


def test_producer_is_throttled_to_its_byte_rate(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    broker: Broker = broker_factory({"quota.window.num": "2",
                                     "quota.window.size.seconds": "1"})
    assert _alter(broker.port, "quota-test", "producer_byte_rate", QUOTA_BYTES_S) == 0
    assert _describe_count(broker.port, "quota-test") == 1
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "quota-test",
                         "linger.ms": 5, "batch.size": 16384, "compression.type": "none",
                         "queue.buffering.max.kbytes": 256,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    payload = b"x" * RECORD_BYTES
    acked: list[tuple[float, int]] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append((time.monotonic(), RECORD_BYTES))

    start = time.monotonic()
    while time.monotonic() - start < 9.0:
        try:
            producer.produce(topic_name, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    # after a 2 s warm-up (the first window may pass a burst, as in Kafka)
    window = [(t, n) for t, n in acked if start + 2.0 <= t <= start + 9.0]
    rate = sum(n for _, n in window) / 7.0
    assert 0.8 * QUOTA_BYTES_S <= rate <= 1.2 * QUOTA_BYTES_S, rate
    assert throttles and max(throttles) > 0
    # removed: the quota is gone
    assert _alter(broker.port, "quota-test", "producer_byte_rate", 0, remove=True) == 0
    assert _describe_count(broker.port, "quota-test") == 0


def test_rate_counts_the_first_windows_as_whole() -> None:
    from pybroker.security.client_quotas import Rate

    rate = Rate(samples=11, window_s=1.0)
    rate.record(1000, now=100.0)
    assert rate.measure(100.0) == 100.0  # 1000 bytes over 10 assumed windows
    rate.record(1000, now=110.5)
    assert rate.window(110.5) == 10.5


def test_closed_quotas_stop_reading_the_store() -> None:
    """After the broker's shutdown the store is gone: a refresh still running would log
    'reloading client quotas: ...' after 'shut down cleanly' (seen in the cluster tests)."""
    import asyncio

    from pybroker.config import BrokerConfig
    from pybroker.security import client_quotas
    from pybroker.security.client_quotas import ClientQuotas

    class Store:
        def __init__(self) -> None:
            self.version_reads = 0

        async def config_version(self) -> int:
            self.version_reads += 1
            return 1

        async def all_entity_configs(self) -> dict[str, dict[str, str]]:
            return {}

    async def run() -> Store:
        store = Store()
        quotas = ClientQuotas(BrokerConfig({}), store)  # type: ignore[arg-type]
        await quotas.ready()
        quotas.close()
        before = store.version_reads
        await asyncio.sleep(client_quotas.REFRESH_INTERVAL_S * 2.5)
        assert store.version_reads == before
        return store

    asyncio.run(run())
