"""`pybroker consumer-perf-test`: kafka-consumer-perf-test.sh (ConsumerPerformance).

Consumes `--messages` records and prints Kafka's CSV header and row:

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

Bytes are key + value sizes; MB is 1024 * 1024 bytes; fetch.time.ms is the run
time less the time spent joining the group. With `--group` the consumer
subscribes as a group member (Kafka always does, with a random group); without
it, it assigns itself every partition (rebalance.time.ms is then 0), so it also
runs against brokers without consumer groups."""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from dataclasses import dataclass
from typing import Any

from pybroker.tools._common import (
    Progress,
    ToolError,
    add_bootstrap,
    bar,
    client_config,
    kafka_message,
    parse_pairs,
    reach,
    read_properties,
    require_client,
)

COMMAND = "consumer-perf-test"
HELP = "measure consumer throughput (kafka-consumer-perf-test.sh)"

HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
          "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
POLL_BATCH = 1000
POLL_TIMEOUT_S = 0.1
MB = 1024.0 * 1024.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser, "--broker-list")
    parser.add_argument("--topic", required=True, help="topic to consume")
    parser.add_argument("--messages", type=int, required=True, help="records to consume")
    parser.add_argument("--group", help="consumer group (subscribe); default: assign")
    parser.add_argument("--fetch-size", type=int, help="max.partition.fetch.bytes")
    parser.add_argument("--from-latest", action="store_true",
                        help="start at the end of the log instead of the beginning")
    parser.add_argument("--timeout", type=int, default=10000,
                        help="ms allowed between returned records (default 10000)")
    parser.add_argument("--hide-header", action="store_true", help="no CSV header line")
    parser.add_argument("--show-detailed-stats", action="store_true",
                        help="a stats line every --reporting-interval ms")
    parser.add_argument("--reporting-interval", type=int, default=5000,
                        help="ms between detailed stats lines (default 5000)")
    parser.add_argument("--date-format", default="%Y-%m-%d %H:%M:%S:%f",
                        help="strftime format of times; %%f prints milliseconds")
    parser.add_argument("--consumer.config", "--command-config", dest="consumer_config",
                        metavar="FILE",
                        help="consumer properties file")
    parser.add_argument("--consumer-property", action="append", default=[],
                        metavar="KEY=VALUE", help="a consumer config")


def format_time(ms: float, fmt: str) -> str:
    stamp = datetime.datetime.fromtimestamp(ms / 1000)
    return stamp.strftime(fmt.replace("%f", f"{int(ms) % 1000:03d}"))


@dataclass
class Result:
    start_ms: float
    end_ms: float
    bytes: int
    messages: int
    rebalance_ms: int

    def row(self, date_format: str) -> str:
        elapsed_s = max((self.end_ms - self.start_ms) / 1000.0, 1e-9)
        mb = self.bytes / MB
        fetch_ms = int(self.end_ms - self.start_ms) - self.rebalance_ms
        fetch_s = fetch_ms / 1000.0 if fetch_ms > 0 else float("nan")
        return (f"{format_time(self.start_ms, date_format)}, "
                f"{format_time(self.end_ms, date_format)}, "
                f"{mb:.4f}, {mb / elapsed_s:.4f}, {self.messages}, "
                f"{self.messages / elapsed_s:.4f}, {self.rebalance_ms}, {fetch_ms}, "
                f"{mb / fetch_s:.4f}, {self.messages / fetch_s:.4f}")


def _assign_all(ck: Any, consumer: Any, topic: str, from_latest: bool,
                timeout_s: float) -> None:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise ToolError(f"topic {topic} does not exist or has no partitions")
    start = ck.OFFSET_END if from_latest else ck.OFFSET_BEGINNING
    consumer.assign([ck.TopicPartition(topic, p, start) for p in sorted(metadata.partitions)])


def run(args: argparse.Namespace) -> int:
    try:
        ck = require_client()
        extra = {
            "group.id": args.group or "perf-consumer-assign",
            "enable.auto.commit": "true" if args.group else "false",
            "auto.offset.reset": "latest" if args.from_latest else "earliest",
            "enable.partition.eof": "false",
        }
        if args.fetch_size:
            extra["max.partition.fetch.bytes"] = str(args.fetch_size)
        config = client_config(args.bootstrap_server, extra,
                               read_properties(args.consumer_config),
                               parse_pairs(args.consumer_property))
        consumer = ck.Consumer(config)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    try:
        reach(config).connect(consumer)
        result = consume(ck, consumer, args, reach(config).timeout_s)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    except ck.KafkaException as exc:
        print(f"ERROR {kafka_message(exc)}", file=sys.stderr)
        return 1
    finally:
        consumer.close()
    if not args.hide_header and not args.show_detailed_stats:
        print(HEADER)
    if not args.show_detailed_stats:
        print(result.row(args.date_format))
    sys.stdout.flush()
    return 0


def consume(ck: Any, consumer: Any, args: argparse.Namespace, timeout_s: float) -> Result:
    progress = Progress()
    join_ms = 0.0
    join_start = time.time() * 1000
    assigned = False

    def on_assign(c: Any, partitions: list[Any]) -> None:
        nonlocal join_ms, assigned
        join_ms += time.time() * 1000 - join_start
        assigned = True

    start_ms = time.time() * 1000
    if args.group:
        consumer.subscribe([args.topic], on_assign=on_assign)
    else:
        _assign_all(ck, consumer, args.topic, args.from_latest, timeout_s)
    if args.show_detailed_stats and not args.hide_header:
        print(DETAILED_HEADER)
    messages = size = 0
    last_record = time.monotonic()
    report_at = start_ms + args.reporting_interval
    last_report = (start_ms, 0, 0)
    try:
        while messages < args.messages:
            batch = consumer.consume(min(POLL_BATCH, args.messages - messages), POLL_TIMEOUT_S)
            now = time.monotonic()
            for msg in batch:
                if msg.error() is not None:
                    if msg.error().fatal():
                        raise ToolError(msg.error().str())
                    continue
                messages += 1
                key, value = msg.key(), msg.value()
                size += (len(key) if key else 0) + (len(value) if value else 0)
            if batch:
                last_record = now
            elif now - last_record > args.timeout / 1000:
                print(f"WARNING: Exiting before consuming the expected number of messages: "
                      f"timeout ({args.timeout} ms) exceeded. You can use the --timeout "
                      "option to increase the timeout.", file=sys.stderr)
                break
            if args.show_detailed_stats and time.time() * 1000 >= report_at:
                wall = time.time() * 1000
                _detailed_line(args, wall, last_report, messages, size, int(join_ms))
                last_report = (wall, messages, size)
                report_at = wall + args.reporting_interval
            progress.update(f"{bar(messages, args.messages)} {messages} records")
    except KeyboardInterrupt:
        pass
    progress.clear()
    end_ms = time.time() * 1000
    return Result(start_ms, end_ms, size, messages, int(join_ms))


def _detailed_line(args: argparse.Namespace, now_ms: float, last: tuple[float, int, int],
                   messages: int, size: int, join_ms: int) -> None:
    """Kafka's printConsumerProgress: figures for the interval since the last line."""
    last_ms, last_messages, last_size = last
    elapsed_ms = max(now_ms - last_ms, 1e-3)
    mb = size / MB
    mb_rate = 1000.0 * (size - last_size) / MB / elapsed_ms
    msg_rate = 1000.0 * (messages - last_messages) / elapsed_ms
    print(f"{format_time(now_ms, args.date_format)}, 0, {mb:.4f}, {mb_rate:.4f}, {messages}, "
          f"{msg_rate:.4f}, {join_ms}, {int(elapsed_ms) - join_ms}, {mb_rate:.4f}, "
          f"{msg_rate:.4f}", flush=True)
