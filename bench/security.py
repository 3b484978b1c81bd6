"""Produce and consume throughput over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512)
on one pybroker: what TLS costs (no sendfile on TLS, OpenSSL in Python's ssl) and
what SASL adds on top (nothing per request once authenticated).

    python bench/security.py [--records 100000] [--record-bytes 1024]

Starts one broker with the three listeners (certificates made on the spot, as the
tests make them), then for each protocol produces --records records with
confluent-kafka and reads them back; prints MB/s and the broker's CPU seconds per GB."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import Broker, free_port  # noqa: E402
from tests.security.certs import KEY_PASSWORD, make_pki  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pybroker-bench-security-"))
    pki = make_pki(base / "pki")
    ports = {"SSL": free_port(), "SASL_SSL": free_port()}
    broker = Broker(host="127.0.0.1", port=free_port(), data_dir=base / "data",
                    log_path=base / "broker.log")
    broker.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ports['SSL']},"
                     f"SASL_SSL://127.0.0.1:{ports['SASL_SSL']}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore), "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                b"bench-pw")]).values():
            f.result(30)
        confs = {
            "PLAINTEXT": {"bootstrap.servers": broker.bootstrap},
            "SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
                    "ssl.ca.location": str(pki.ca)},
            "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
                         "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                         "sasl.password": "bench-pw"},
        }
        proc = psutil.Process(broker.proc.pid)  # type: ignore[union-attr]
        results = {}
        for name, conf in confs.items():
            results[name] = run_one(conf, proc, args.records, args.record_bytes)
            print(name, json.dumps(results[name]))
        print(json.dumps(results, indent=1))
    finally:
        broker.stop()


def _cpu(proc: psutil.Process) -> float:
    """The broker's CPU seconds (the process and any children it runs under)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def run_one(conf: dict[str, object], proc: psutil.Process, records: int,
            size: int) -> dict[str, float]:
    topic = "bench-" + uuid.uuid4().hex[:8]
    payload = b"x" * size
    producer = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20,
                         "compression.type": "none", "acks": 1})
    producer.produce(topic, b"warm")
    producer.flush(30)
    cpu0, t0 = _cpu(proc), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produce_s, produce_cpu = time.perf_counter() - t0, _cpu(proc) - cpu0
    consumer = Consumer({**conf, "group.id": "bench-" + topic, "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.assign([TopicPartition(topic, 0, 1)])
    got = 0
    cpu0, t0 = _cpu(proc), time.perf_counter()
    while got < records:
        got += sum(1 for m in consumer.consume(num_messages=10000, timeout=1) if not m.error())
    consume_s, consume_cpu = time.perf_counter() - t0, _cpu(proc) - cpu0
    consumer.close()
    gb = records * size / 1e9
    return {"produce_MBps": round(records * size / produce_s / 1e6, 1),
            "produce_cpu_s_per_GB": round(produce_cpu / gb, 2),
            "consume_MBps": round(records * size / consume_s / 1e6, 1),
            "consume_cpu_s_per_GB": round(consume_cpu / gb, 2)}


if __name__ == "__main__":
    main()
