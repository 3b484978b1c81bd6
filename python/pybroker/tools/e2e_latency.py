"""`pybroker e2e-latency`: kafka-e2e-latency.sh (EndToEndLatency).

    pybroker e2e-latency broker_list topic num_messages producer_acks \
        message_size_bytes [properties_file]

Sends `num_messages` records of `message_size_bytes` bytes one at a time, each
acknowledged (`producer_acks` 1 or all) and then read back by a consumer waiting at
the log's end, and prints Kafka's lines: every 1000th record `i<TAB>ms`, then

    Avg latency: A.AAAA ms
    Percentiles: 50th = P50, 99th = P99, 99.9th = P999

(percentiles in whole ms). The measurement is `pybroker compare`'s end-to-end phase
(tools/_load/workload.py), which first sends one uncounted record to open the
connections. A missing topic is created with 1 partition and replication factor 1,
as Kafka does; the records go to partition 0."""

from __future__ import annotations

import argparse
import sys

from pybroker.tools._common import ToolError, client_config, read_properties, require_client
from pybroker.tools._retry import retrying

COMMAND = "e2e-latency"
HELP = "measure produce-to-consume latency one record at a time (kafka-e2e-latency.sh)"

#: how long Kafka's tool waits for each record to come back
POLL_TIMEOUT_S = 60.0
#: every how many records a progress line is printed
PROGRESS_EVERY = 1000
#: the wait for the topic's creation (retriable errors asked again within it)
CREATE_TIMEOUT_S = 30.0
ACKS = ("1", "all")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bootstrap_server", metavar="broker_list",
                        help="bootstrap broker(s) of the producer and the consumer")
    parser.add_argument("topic", help="topic the records go to and come back from")
    parser.add_argument("num_messages", type=int, help="records to send")
    parser.add_argument("producer_acks", help="1 or all")
    parser.add_argument("message_size_bytes", type=int, help="bytes per record")
    parser.add_argument("properties_file", nargs="?",
                        help="client properties for the producer, consumer and admin")


def ensure_topic(config: dict[str, object], topic: str) -> None:
    ck = require_client()
    admin = ck.admin.AdminClient(config)
    if topic in admin.list_topics(timeout=CREATE_TIMEOUT_S).topics:
        return
    print(f'Topic "{topic}" does not exist. Will create topic with 1 partition(s) and '
          "replication factor = 1", flush=True)
    try:
        retrying(lambda: admin.create_topics([ck.admin.NewTopic(topic, 1, 1)])[topic]
                 .result(timeout=CREATE_TIMEOUT_S), CREATE_TIMEOUT_S, f"creating {topic}")
    except ck.KafkaException as exc:
        raise ToolError(f"Creation of topic {topic} failed: {exc}") from exc
    # the answer comes once the topic is written, before its leader is up (as Kafka's);
    # Kafka's tool then waits in its consumer's position(), librdkafka's watermark
    # query would not: wait for the leader here
    from pybroker.tools._load import workload

    try:
        workload.wait_all_led(admin, topic, 1, 30, poll_s=0.05)
    except workload.PhaseError as exc:
        raise ToolError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    from pybroker.tools._load import workload

    if args.producer_acks not in ACKS:
        raise ToolError("Latency testing requires synchronous acknowledgement. Please use "
                        "1 or all")
    if args.num_messages <= 0 or args.message_size_bytes < 0:
        raise ToolError("num_messages must be > 0 and message_size_bytes >= 0")
    props = read_properties(args.properties_file)
    config = client_config(args.bootstrap_server, props)
    ensure_topic(config, args.topic)

    def progress(i: int, seconds: float) -> None:
        if i % PROGRESS_EVERY == 0:
            print(f"{i}\t{seconds * 1000.0}", flush=True)

    try:
        _elapsed, latencies = workload.end_to_end(
            args.bootstrap_server, args.topic, args.message_size_bytes, args.num_messages,
            timeout=POLL_TIMEOUT_S * (args.num_messages + 1), acks=args.producer_acks,
            extra={**client_config(args.bootstrap_server, props), "fetch.wait.max.ms": 0},
            producer_extra=client_config(args.bootstrap_server, props), on_record=progress)
    except workload.PhaseError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"Avg latency: {sum(latencies) / len(latencies) * 1000.0:.4f} ms")
    whole_ms = sorted(int(s * 1000) for s in latencies)
    p50, p99, p999 = (whole_ms[int(len(whole_ms) * share)] for share in (0.5, 0.99, 0.999))
    print(f"Percentiles: 50th = {p50}, 99th = {p99}, 99.9th = {p999}")
    return 0
