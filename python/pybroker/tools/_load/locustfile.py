"""Locust load test for any Kafka-protocol broker (pybroker or stock Kafka): what
`pybroker load-test` runs (it ships in the package; bench/locustfile.py imports it).

Two user classes drive confluent-kafka clients and report every produce batch
(produce + flush) and every non-empty fetch (consume) as a locust request, so
the web UI and `--csv` files show rates, latency percentiles and failures:

    pybroker load-test --headless -u 4 -r 4 -t 30s --host 127.0.0.1:9092 -- --csv out/locust
    locust -f bench/locustfile.py --headless -u 4 -r 4 --run-time 30s \\
        --host 127.0.0.1:9092 --csv out/locust                  # the same, from a clone

The brokers are locust's own `--host` (`host:port[,host:port...]`, an optional
`kafka://` in front is dropped), as locust-plugins' Kafka user takes them;
`--kafka-bootstrap` is an alias (giving both with different values is an error); with
neither, 127.0.0.1:9092. Options (also as environment variables LOCUST_KAFKA_...):
--kafka-topic, --kafka-partitions (topic created at test start if missing),
--record-size, --batch (records per produce request event), --acks, --keys
(distinct keys; 0 sends no keys), --linger-ms, --consume-mode assign|group,
--kafka-group. Pick the user classes by name (`ProducerUser ConsumerUser`) or
leave both (equal weights).

librdkafka calls that wait (flush, consume) run in gevent's thread pool, so one
locust process runs many users without one blocking the others."""

from __future__ import annotations

import itertools
import os
import time
import uuid
from typing import Any

import gevent
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from locust import User, constant, events, task

FLUSH_TIMEOUT_S = 30.0
CONSUME_TIMEOUT_S = 1.0
CONSUME_BATCH = 500
ADMIN_TIMEOUT_S = 15.0
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    group = parser.add_argument_group("Kafka")
    group.add_argument("--kafka-bootstrap", env_var="LOCUST_KAFKA_BOOTSTRAP", default=None,
                       help=f"bootstrap servers, an alias of --host (default {DEFAULT_BOOTSTRAP})")
    group.add_argument("--kafka-topic", env_var="LOCUST_KAFKA_TOPIC", default="locust",
                       help="topic to produce to and consume from")
    group.add_argument("--kafka-partitions", env_var="LOCUST_KAFKA_PARTITIONS", type=int,
                       default=4, help="partitions of the topic if it is created")
    group.add_argument("--record-size", env_var="LOCUST_KAFKA_RECORD_SIZE", type=int,
                       default=100, help="bytes per record value")
    group.add_argument("--batch", env_var="LOCUST_KAFKA_BATCH", type=int, default=100,
                       help="records per produce event (produced, then flushed)")
    group.add_argument("--acks", env_var="LOCUST_KAFKA_ACKS", default="1",
                       help="producer acks: 0, 1 or all")
    group.add_argument("--keys", env_var="LOCUST_KAFKA_KEYS", type=int, default=0,
                       help="distinct record keys (0: no keys)")
    group.add_argument("--linger-ms", env_var="LOCUST_KAFKA_LINGER_MS", type=int, default=5,
                       help="producer linger.ms")
    group.add_argument("--consume-mode", env_var="LOCUST_KAFKA_CONSUME_MODE",
                       choices=("assign", "group"), default="assign",
                       help="assign every partition from the beginning, or join a group")
    group.add_argument("--kafka-group", env_var="LOCUST_KAFKA_GROUP", default="locust",
                       help="consumer group id with --consume-mode group")


def bootstrap_servers(environment: Any) -> str:
    """The brokers: locust's --host, or its alias --kafka-bootstrap, or the default."""
    host = _strip_scheme(environment.host or "")
    alias = _strip_scheme(environment.parsed_options.kafka_bootstrap or "")
    if host and alias and host != alias:
        raise ValueError(f"--host {host} and --kafka-bootstrap {alias} disagree: give one")
    return host or alias or DEFAULT_BOOTSTRAP


def _strip_scheme(servers: str) -> str:
    return ",".join(s.strip().split("://", 1)[-1].rstrip("/")
                    for s in servers.split(",") if s.strip())


@events.init.add_listener
def _check_bootstrap(environment: Any, **_: Any) -> None:
    """Refuse conflicting brokers before any user starts (exit status 1, one line)."""
    if environment.parsed_options is None:
        return
    try:
        bootstrap_servers(environment)
    except ValueError as exc:
        raise SystemExit(f"locustfile: {exc}") from None


@events.test_start.add_listener
def _ensure_topic(environment: Any, **_: Any) -> None:
    opts = environment.parsed_options
    admin = AdminClient({"bootstrap.servers": bootstrap_servers(environment)})
    topic = opts.kafka_topic
    if topic in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics:
        return
    future = admin.create_topics([NewTopic(topic, num_partitions=opts.kafka_partitions,
                                           replication_factor=1)])[topic]
    try:
        future.result(ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        if "already exists" not in str(exc):
            raise
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) > 0:
            return
        time.sleep(0.1)


def _blocking(fn: Any, *args: Any) -> Any:
    """Run a waiting librdkafka call on a real thread (the gevent loop keeps running)."""
    return gevent.get_hub().threadpool.apply(fn, args)


class ProducerUser(User):
    """Produces `--batch` records per task and flushes; one request event per batch."""

    wait_time = constant(0)

    def on_start(self) -> None:
        opts = self.environment.parsed_options
        self.topic = opts.kafka_topic
        self.batch = max(1, opts.batch)
        self.value = os.urandom(max(0, opts.record_size))
        self.keys = ([f"key-{i}".encode() for i in range(opts.keys)] if opts.keys > 0
                     else [None])
        self.key_cycle = itertools.cycle(self.keys)
        self.producer = Producer({
            "bootstrap.servers": bootstrap_servers(self.environment),
            "acks": opts.acks,
            "linger.ms": opts.linger_ms,
            "client.id": f"locust-producer-{uuid.uuid4().hex[:6]}",
        })

    def on_stop(self) -> None:
        _blocking(self.producer.flush, FLUSH_TIMEOUT_S)

    @task
    def produce_batch(self) -> None:
        errors: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err.str())

        start = time.perf_counter()
        exception: Exception | None = None
        try:
            for _ in range(self.batch):
                while True:
                    try:
                        self.producer.produce(self.topic, self.value, next(self.key_cycle),
                                              on_delivery=delivered)
                        break
                    except BufferError:
                        _blocking(self.producer.poll, 0.05)
            left = _blocking(self.producer.flush, FLUSH_TIMEOUT_S)
            if left:
                exception = TimeoutError(f"{left} records not acknowledged")
            elif errors:
                exception = RuntimeError(f"{len(errors)} records failed: {errors[0]}")
        except Exception as exc:  # reported as a locust failure
            exception = exc
        self.environment.events.request.fire(
            request_type="produce",
            name=f"{self.topic} x{self.batch}",
            response_time=(time.perf_counter() - start) * 1000,
            response_length=self.batch * len(self.value),
            exception=exception,
            context={},
        )


class ConsumerUser(User):
    """Consumes in batches; one request event per non-empty fetch."""

    wait_time = constant(0)

    def on_start(self) -> None:
        opts = self.environment.parsed_options
        self.topic = opts.kafka_topic
        group = opts.kafka_group if opts.consume_mode == "group" else (
            f"locust-assign-{uuid.uuid4().hex[:6]}")
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap_servers(self.environment),
            "group.id": group,
            "enable.auto.commit": opts.consume_mode == "group",
            "auto.offset.reset": "earliest",
        })
        if opts.consume_mode == "group":
            self.consumer.subscribe([self.topic])
        else:
            meta = self.consumer.list_topics(self.topic, timeout=ADMIN_TIMEOUT_S)
            partitions = sorted(meta.topics[self.topic].partitions)
            self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING)
                                  for p in partitions])

    def on_stop(self) -> None:
        _blocking(self.consumer.close)

    @task
    def fetch(self) -> None:
        start = time.perf_counter()
        exception: Exception | None = None
        size = count = 0
        try:
            messages = _blocking(self.consumer.consume, CONSUME_BATCH, CONSUME_TIMEOUT_S)
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.fatal() or not err.retriable():
                        exception = KafkaException(err)
                    continue
                count += 1
                size += len(msg.value() or b"")
        except Exception as exc:
            exception = exc
        if count == 0 and exception is None:
            return  # an empty long poll is not a request worth timing
        self.environment.events.request.fire(
            request_type="fetch",
            name=self.topic,
            response_time=(time.perf_counter() - start) * 1000,
            response_length=size,
            exception=exception,
            context={"records": count},
        )
