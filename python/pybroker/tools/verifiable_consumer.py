"""`pybroker verifiable-consumer`: kafka-verifiable-consumer.sh (VerifiableConsumer).

Joins `--group-id`, subscribes to `--topic` and prints one JSON event per line:

    {"timestamp":..,"name":"startup_complete"}
    {"timestamp":..,"name":"partitions_assigned","partitions":[{"topic":..,"partition":0}]}
    {"timestamp":..,"name":"partitions_revoked","partitions":[..]}
    {"timestamp":..,"name":"records_consumed","count":N,"partitions":[{"topic":..,"partition":0,"count":n,"minOffset":..,"maxOffset":..}]}
    {"timestamp":..,"name":"record_data","key":..,"value":..,"topic":..,"partition":0,"offset":..}
    {"timestamp":..,"name":"offsets_committed","offsets":[{"topic":..,"partition":0,"offset":..}],"success":true}
    {"timestamp":..,"name":"shutdown_complete"}

record_data comes only with `--verbose`. Without `--enable-autocommit` each batch's
next offsets are committed synchronously and the outcome printed (`error` only when
it failed). It ends after `--max-messages`
(-1: until SIGTERM/Ctrl-C). Kafka's assignor class names map to librdkafka's
(RangeAssignor -> range, RoundRobinAssignor -> roundrobin, CooperativeStickyAssignor
-> cooperative-sticky)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pybroker.tools._common import (
    ToolError,
    client_config,
    kafka_message,
    read_properties,
    require_client,
)
from pybroker.tools._events import Stop, emit

COMMAND = "verifiable-consumer"
HELP = ("consume a topic in a group, printing rebalances, records and commits as JSON "
        "(kafka-verifiable-consumer.sh)")

#: Kafka's assignor classes (and their short names) -> librdkafka's strategy names
ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range", "roundrobin": "roundrobin", "cooperative-sticky": "cooperative-sticky",
}
#: --reset-policy -> librdkafka's auto.offset.reset ("none" is its "error")
RESET_POLICIES = {"earliest": "earliest", "latest": "latest", "none": "error"}
#: records taken per poll at most (Kafka's max.poll.records default)
MAX_POLL_RECORDS = 500
#: seconds one poll waits, so that a stop request is seen soon
POLL_STEP_S = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server",
                        metavar="HOST1:PORT1[,HOST2:PORT2[...]]",
                        help="the broker(s) to connect to; default bootstrap.servers of the "
                             "properties, else $PYBROKER_BOOTSTRAP_SERVER, else localhost:9092")
    parser.add_argument("--topic", required=True, metavar="TOPIC",
                        help="consume messages from this topic")
    parser.add_argument("--group-protocol", default="classic", type=str.lower,
                        choices=("classic", "consumer"), help="group protocol")
    parser.add_argument("--group-remote-assignor", metavar="GROUP_REMOTE_ASSIGNOR",
                        help="the broker-side assignor; only with --group-protocol consumer")
    parser.add_argument("--group-id", required=True, metavar="GROUP_ID",
                        help="the group shared among members")
    parser.add_argument("--group-instance-id", metavar="GROUP_INSTANCE_ID",
                        help="a unique identifier of this consumer instance (static member)")
    parser.add_argument("--max-messages", type=int, default=-1, metavar="MAX-MESSAGES",
                        help="consume this many messages; -1 until the process is stopped")
    parser.add_argument("--session-timeout", type=int, default=30000, metavar="TIMEOUT_MS",
                        help="the consumer's session timeout")
    parser.add_argument("--verbose", action="store_true", dest="record_data",
                        help="print a record_data event for each record consumed")
    parser.add_argument("--enable-autocommit", action="store_true",
                        help="commit offsets automatically instead of after each batch")
    parser.add_argument("--reset-policy", default="earliest", choices=tuple(RESET_POLICIES),
                        help="where to start without a committed offset")
    parser.add_argument("--assignment-strategy",
                        default="org.apache.kafka.clients.consumer.RangeAssignor",
                        help="assignor (Kafka class or librdkafka name); classic protocol only")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="CONFIG_FILE",
                        help="consumer properties file (the options override it)")


def options(args: argparse.Namespace) -> dict[str, str]:
    """The consumer configs the options set (they override --consumer.config)."""
    config = {"group.id": args.group_id,
              "enable.auto.commit": str(args.enable_autocommit).lower(),
              "auto.offset.reset": RESET_POLICIES[args.reset_policy]}
    if args.group_protocol == "consumer":
        config["group.protocol"] = "consumer"
        if args.group_remote_assignor:
            config["group.remote.assignor"] = args.group_remote_assignor
    else:
        strategies = []
        for name in args.assignment_strategy.split(","):
            if name.strip() not in ASSIGNORS:
                raise ToolError(f"unsupported --assignment-strategy '{name.strip()}': use "
                                "one of " + ", ".join(sorted(ASSIGNORS)))
            strategies.append(ASSIGNORS[name.strip()])
        config["partition.assignment.strategy"] = ",".join(strategies)
        config["session.timeout.ms"] = str(args.session_timeout)
    if args.group_instance_id:
        config["group.instance.id"] = args.group_instance_id
    return config


def partitions(tps: list[Any]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


def text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


class Verifier:
    """The consume loop and its events; `consumed` counts towards --max-messages."""

    def __init__(self, consumer: Any, args: argparse.Namespace) -> None:
        self.consumer = consumer
        self.args = args
        self.consumed = 0

    def finished(self) -> bool:
        return 0 <= self.args.max_messages <= self.consumed

    def on_batch(self, batch: list[Any]) -> dict[tuple[str, int], int]:
        """records_consumed (and record_data) for one poll's records; the next offset
        of each partition taken, for the commit."""
        by_partition: dict[tuple[str, int], list[Any]] = {}
        for msg in batch:
            by_partition.setdefault((msg.topic(), msg.partition()), []).append(msg)
        summaries, next_offsets = [], {}
        for (topic, partition), records in by_partition.items():
            if self.args.max_messages >= 0:
                records = records[:self.args.max_messages - self.consumed]
            if not records:
                continue
            low, high = records[0].offset(), records[-1].offset()
            next_offsets[(topic, partition)] = high + 1
            summaries.append({"topic": topic, "partition": partition, "count": len(records),
                              "minOffset": low, "maxOffset": high})
            if self.args.record_data:
                for msg in records:
                    emit("record_data", key=text(msg.key()), value=text(msg.value()),
                         topic=topic, partition=partition, offset=msg.offset())
            self.consumed += len(records)
            if self.finished():
                break
        emit("records_consumed", count=len(batch), partitions=summaries)
        return next_offsets

    def commit(self, next_offsets: dict[tuple[str, int], int]) -> None:
        ck = require_client()
        tps = [ck.TopicPartition(t, p, o) for (t, p), o in next_offsets.items()]
        committed = [{"topic": t, "partition": p, "offset": o}
                     for (t, p), o in next_offsets.items()]
        try:
            self.consumer.commit(offsets=tps, asynchronous=False)
        except ck.KafkaException as exc:
            emit("offsets_committed", offsets=committed, error=kafka_message(exc),
                 success=False)
            return
        emit("offsets_committed", offsets=committed, success=True)

    def run(self, stop: Stop) -> None:
        emit("startup_complete")
        self.consumer.subscribe(
            [self.args.topic],
            on_assign=lambda _c, tps: emit("partitions_assigned", partitions=partitions(tps)),
            on_revoke=lambda _c, tps: emit("partitions_revoked", partitions=partitions(tps)))
        while not self.finished() and not stop.requested:
            batch = []
            for msg in self.consumer.consume(MAX_POLL_RECORDS, POLL_STEP_S):
                error = msg.error()
                if error is None:
                    batch.append(msg)
                elif error.fatal() or not error.retriable():
                    raise ToolError(f"consume failed: {error.str()}")
            if not batch:
                continue  # Kafka's poll returns only with records
            next_offsets = self.on_batch(batch)
            if not self.args.enable_autocommit and next_offsets:
                self.commit(next_offsets)


def run(args: argparse.Namespace) -> int:
    ck = require_client()
    config = client_config(None, {"bootstrap.servers": args.bootstrap_server},
                           read_properties(args.consumer_config), options(args))
    consumer = ck.Consumer(config)
    stop = Stop()
    stop.install()
    status = 0
    try:
        Verifier(consumer, args).run(stop)
    except KeyboardInterrupt:
        pass
    except (ToolError, ck.KafkaException) as exc:
        # as Kafka: the error goes to the log (stderr), the events end as usual
        print(f"Error during processing, terminating consumer process: {exc}",
              file=sys.stderr)
        status = 1
    finally:
        consumer.close()
        emit("shutdown_complete")
    return status
