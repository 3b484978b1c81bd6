"""`pybroker console-consumer`: kafka-console-consumer.sh — print records to stdout.

Without `--group` the consumer assigns itself every partition of the topic and
commits nothing; with `--group` it subscribes as a member of that consumer
group (and commits). Records are printed as Kafka's DefaultMessageFormatter
does (`--property print.key=true`, `print.timestamp`, `print.partition`,
`print.offset`, `print.headers`, `print.value`, `key.separator`,
`line.separator`, `headers.separator`, `null.literal`). At the end it prints
`Processed a total of N messages` to stderr."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any, BinaryIO

from pybroker.errors import ErrorCode
from pybroker.tools._common import (
    ToolError,
    add_bootstrap,
    client_config,
    kafka_message,
    parse_pairs,
    reach,
    read_properties,
    require_client,
    stdout_gone,
)

#: Kafka's formatter class (its older name, kafka.tools.DefaultMessageFormatter, too)
DEFAULT_FORMATTER = "org.apache.kafka.tools.consumer.DefaultMessageFormatter"
COMMAND = "console-consumer"
HELP = "print records of a topic (kafka-console-consumer.sh)"

POLL_BATCH = 500
POLL_TIMEOUT_S = 0.1
TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", help="the topic to consume")
    source.add_argument("--include", "--whitelist", metavar="REGEX",
                        help="consume every topic whose whole name matches REGEX")
    parser.add_argument("--group", help="consumer group id (subscribe and commit)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start with the earliest record instead of the newest")
    parser.add_argument("--partition", type=int, help="only this partition (no --group)")
    parser.add_argument("--offset", default=None,
                        help="with --partition: earliest, latest or an offset")
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument("--timeout-ms", type=int,
                        help="exit when no record arrives for this long")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="formatter properties: print.key, key.separator, print.timestamp...")
    parser.add_argument("--consumer-property", action="append", default=[],
                        metavar="KEY=VALUE", help="a consumer config")
    parser.add_argument("--consumer.config", "--command-config", dest="consumer_config",
                        metavar="FILE",
                        help="consumer properties file (default.api.timeout.ms: how long to "
                             "wait for a broker, default 30000)")
    parser.add_argument("--isolation-level", default=None,
                        help="read_committed or read_uncommitted")
    parser.add_argument("--formatter", default=DEFAULT_FORMATTER, metavar="CLASS",
                        help="Kafka's DefaultMessageFormatter (the only one), configured by "
                             "--property or --formatter-config")
    parser.add_argument("--formatter-config", metavar="FILE",
                        help="properties file of formatter properties (print.key, ...)")


def _flag(props: dict[str, str], name: str, default: bool) -> bool:
    return props.get(name, str(default)).strip().lower() == "true"


def _unescape(text: str) -> str:
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


class MessageFormatter:
    """Kafka's DefaultMessageFormatter."""

    def __init__(self, props: dict[str, str]) -> None:
        self.print_timestamp = _flag(props, "print.timestamp", False)
        self.print_partition = _flag(props, "print.partition", False)
        self.print_offset = _flag(props, "print.offset", False)
        self.print_headers = _flag(props, "print.headers", False)
        self.print_key = _flag(props, "print.key", False)
        self.print_value = _flag(props, "print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(props.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(props.get("headers.separator", ",")).encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, msg: Any) -> bytes:
        columns: list[bytes] = []
        if self.print_timestamp:
            kind, ts = msg.timestamp()
            name = TIMESTAMP_TYPES.get(kind)
            columns.append(f"{name}:{ts}".encode() if name else b"NO_TIMESTAMP")
        if self.print_partition:
            columns.append(f"Partition:{msg.partition()}".encode())
        if self.print_offset:
            columns.append(f"Offset:{msg.offset()}".encode())
        if self.print_headers:
            headers = msg.headers() or []
            columns.append(self.headers_separator.join(
                k.encode() + b":" + (self.null_literal if v is None else v)
                for k, v in headers) if headers else b"NO_HEADERS")
        if self.print_key:
            key = msg.key()
            columns.append(self.null_literal if key is None else key)
        if self.print_value:
            value = msg.value()
            columns.append(self.null_literal if value is None else value)
        return self.key_separator.join(columns) + self.line_separator


def _assignment(ck: Any, consumer: Any, args: argparse.Namespace,
                deadline: float | None, metadata_timeout_s: float) -> list[Any]:
    """TopicPartitions with start offsets for assign mode (waits for the topic)."""
    if args.offset is not None and args.partition is None:
        raise ToolError("The partition is required when offset is specified.")
    if args.offset in (None, "latest"):
        start = ck.OFFSET_BEGINNING if args.from_beginning else ck.OFFSET_END
    elif args.offset == "earliest":
        start = ck.OFFSET_BEGINNING
    else:
        try:
            start = int(args.offset)
        except ValueError as exc:
            raise ToolError(f"The provided offset value '{args.offset}' is incorrect. Valid "
                            "values are 'earliest', 'latest', or a non-negative long.") from exc
    warned = False
    while True:
        topic = consumer.list_topics(args.topic, timeout=metadata_timeout_s).topics.get(
            args.topic)
        if topic is not None and topic.error is None and topic.partitions:
            break
        if topic is not None and topic.error is not None and not warned:
            warn_metadata(args, topic.error.code())
            warned = True
        if deadline is not None and time.monotonic() > deadline:
            return []
        time.sleep(0.5)
    ids = sorted(topic.partitions)
    if args.partition is not None:
        if args.partition not in ids:
            raise ToolError(f"partition {args.partition} of {args.topic} does not exist")
        ids = [args.partition]
    return [ck.TopicPartition(args.topic, i, start) for i in ids]


def warn_metadata(args: argparse.Namespace, code: int) -> None:
    """The warning Kafka's consumer logs while its topic is missing (and it waits on):
    `Error while fetching metadata ... : {topic=UNKNOWN_TOPIC_OR_PARTITION}`. Kafka
    repeats it on every metadata retry; once is enough to say why nothing arrives."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = str(code)
    group = f", groupId={args.group}" if args.group else ""
    print(f"WARN [Consumer clientId=console-consumer{group}] Error while fetching metadata: "
          f"{{{args.topic}={name}}}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    try:
        ck = require_client()
        if args.formatter.rsplit(".", 1)[-1] != "DefaultMessageFormatter":
            raise ToolError(f"formatter {args.formatter} is not available: only Kafka's "
                            f"{DEFAULT_FORMATTER}, with its properties (print.key, "
                            "print.timestamp, print.partition, print.offset, print.headers, "
                            "key.separator, ...)")
        if args.include and args.partition is not None:
            raise ToolError("Options include and partition cannot be specified together.")
        props = {**read_properties(args.formatter_config), **parse_pairs(args.property)}
        formatter = MessageFormatter(props)
        extra = {
            "group.id": args.group or f"console-consumer-{uuid.uuid4().int % 100000}",
            "enable.auto.commit": "true" if args.group else "false",
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
            "enable.partition.eof": "false",
        }
        if args.isolation_level:
            extra["isolation.level"] = args.isolation_level
        config = client_config(args.bootstrap_server, extra,
                               read_properties(args.consumer_config),
                               parse_pairs(args.consumer_property))
        if args.group and args.partition is not None:
            raise ToolError("Options group and partition cannot be specified together.")
        consumer = ck.Consumer(config)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    try:
        # Kafka's consumer would wait for a broker forever; this one gives up in time
        reach(config).connect(consumer)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        consumer.close()
        return 1
    out: BinaryIO = sys.stdout.buffer
    count = 0
    status = 0
    missing_warned = False
    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    try:
        last = time.monotonic()
        if args.include:
            # librdkafka subscribes to the topics a `^`-regex matches; Kafka's pattern
            # matches whole names
            consumer.subscribe([f"^({args.include})$"])
        elif args.group:
            consumer.subscribe([args.topic])
        else:
            deadline = last + timeout_s if timeout_s is not None else None
            consumer.assign(_assignment(ck, consumer, args, deadline, reach(config).timeout_s))
        while args.max_messages is None or count < args.max_messages:
            want = POLL_BATCH if args.max_messages is None else min(
                POLL_BATCH, args.max_messages - count)
            messages = consumer.consume(want, POLL_TIMEOUT_S)
            now = time.monotonic()
            if not messages:
                if timeout_s is not None and now - last >= timeout_s:
                    break
                continue
            for msg in messages:
                if msg.error() is not None:
                    if msg.error().fatal():
                        raise ck.KafkaException(msg.error())
                    if msg.error().code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                        if not missing_warned:  # librdkafka repeats it per metadata refresh
                            warn_metadata(args, msg.error().code())
                            missing_warned = True
                    else:
                        print(f"WARN {msg.error().str()}", file=sys.stderr)
                    continue
                out.write(formatter.format(msg))
                count += 1
            out.flush()
            last = now
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        status = 1
    except ck.KafkaException as exc:
        print("ERROR Error processing message, terminating consumer process: "
              f"{kafka_message(exc)}",
              file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        stdout_gone()  # the reader went away (`| head`): stop quietly
        status = 0
    finally:
        try:
            consumer.close()
        except Exception:  # closing after a fatal error may raise again
            pass
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return status
