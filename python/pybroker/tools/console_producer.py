"""`pybroker console-producer`: kafka-console-producer.sh — one record per stdin line.

`--property parse.key=true` splits each line at `key.separator` (default TAB)
into key and value; `--property ignore.error=true` sends a line without the
separator as a value with no key instead of stopping (Kafka's LineMessageReader)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from pybroker.tools._common import (
    ToolError,
    add_bootstrap,
    client_config,
    delivery_error,
    parse_pairs,
    read_properties,
    require_client,
    with_delivery_timeout,
)

COMMAND = "console-producer"
HELP = "send stdin lines as records (kafka-console-producer.sh)"

#: records queued in the client before a line read waits for deliveries
QUEUE_MESSAGES_MAX = 100000
FLUSH_TIMEOUT_S = 60.0
#: after Ctrl-C: how long the records in flight may take to be acknowledged
INTERRUPTED_FLUSH_S = 5.0
FLUSH_STEP_S = 0.25
#: the shell's status of a command ended by SIGINT (128 + 2)
EXIT_INTERRUPTED = 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser, "--broker-list")
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="line reader properties: parse.key, key.separator, ignore.error")
    parser.add_argument("--producer-property", action="append", default=[],
                        metavar="KEY=VALUE", help="a producer config")
    parser.add_argument("--producer.config", "--command-config", dest="producer_config",
                        metavar="FILE",
                        help="producer properties file (delivery.timeout.ms: how long a "
                             "record may wait for its broker, default 30000)")
    parser.add_argument("--request-required-acks", default=None,
                        help="acks (default -1, all)")
    parser.add_argument("--compression-codec", nargs="?", const="gzip", default=None,
                        help="none, gzip, snappy, lz4 or zstd (gzip if given bare)")
    parser.add_argument("--sync", action="store_true", help="wait for each record's delivery")
    parser.add_argument("--timeout", type=int, metavar="MS",
                        help="linger: how long a record may wait for a batch (linger.ms)")
    parser.add_argument("--batch-size", type=int, metavar="BYTES",
                        help="the largest batch, in bytes (batch.size)")


class LineReader:
    """Kafka's LineMessageReader: a line -> (key, value), and headers with
    parse.headers=true: `h1:v1,h2:v2<TAB>key<TAB>value` (headers.delimiter,
    headers.separator, headers.key.separator; null.marker stands for a null value)."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.key_separator = props.get("key.separator", "\t")
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"
        self.parse_headers = props.get("parse.headers", "false").lower() == "true"
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.null_marker = props.get("null.marker")
        self.line_number = 0
        #: the headers of the line parse() read last
        self.headers: list[tuple[str, bytes | None]] = []

    def _headers(self, line: str) -> str:
        """Take the headers off the front of the line; the rest of it."""
        text, sep, rest = line.partition(self.headers_delimiter)
        if not sep:
            raise ToolError(f"No headers delimiter found on line number {self.line_number}: "
                            f"'{line}'")
        self.headers = []
        for item in text.split(self.headers_separator) if text else []:
            name, _, value = item.partition(self.headers_key_separator)
            self.headers.append((name, None if value == self.null_marker
                                 else value.encode()))
        return rest

    def parse(self, line: str) -> tuple[bytes | None, bytes]:
        self.line_number += 1
        if self.parse_headers:
            line = self._headers(line)
        if not self.parse_key:
            return None, line.encode()
        key, sep, value = line.partition(self.key_separator)
        if not sep:
            if self.ignore_error:
                return None, line.encode()
            raise ToolError(f"No key separator found on line number {self.line_number}: "
                            f"'{line}'")
        return key.encode(), value.encode()


def run(args: argparse.Namespace) -> int:
    try:
        ck = require_client()
        props = parse_pairs(args.property)
        extra: dict[str, str] = {"acks": "-1", "queue.buffering.max.messages":
                                 str(QUEUE_MESSAGES_MAX)}
        if args.request_required_acks is not None:
            extra["acks"] = str(args.request_required_acks)
        if args.compression_codec:
            extra["compression.type"] = args.compression_codec
        if args.timeout is not None:
            extra["linger.ms"] = str(args.timeout)
        if args.batch_size is not None:
            extra["batch.size"] = str(args.batch_size)
        config = with_delivery_timeout(client_config(
            args.bootstrap_server, extra, read_properties(args.producer_config),
            parse_pairs(args.producer_property)))
        producer = ck.Producer(config)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    reader = LineReader(props)
    counts = {"sent": 0, "acknowledged": 0, "failed": 0}
    topic = args.topic

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            counts["acknowledged"] += 1
            return
        counts["failed"] += 1
        key = msg.key()
        value = msg.value()
        print(f"ERROR Error when sending message to topic {topic} with key: "
              f"{'null' if key is None else f'{len(key)} bytes'}, value: "
              f"{'null' if value is None else f'{len(value)} bytes'} with error: "
              f"{delivery_error(config, err)}", file=sys.stderr)

    status = 0
    interrupted = False
    try:
        for raw in sys.stdin:
            line = raw[:-1] if raw.endswith("\n") else raw
            if line.endswith("\r"):
                line = line[:-1]
            key, value = reader.parse(line)
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=delivered,
                                     headers=reader.headers or None)
                    break
                except BufferError:
                    producer.poll(0.1)
            counts["sent"] += 1
            if args.sync:
                flush(producer, FLUSH_TIMEOUT_S)
            else:
                producer.poll(0)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        interrupted = True
    try:
        # after Ctrl-C, a short wait for what is in flight, as Kafka's producer close does
        remaining = flush(producer, INTERRUPTED_FLUSH_S if interrupted else FLUSH_TIMEOUT_S)
    except ToolError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
        interrupted = True
        remaining = len(producer)
    if interrupted:
        print(f"Interrupted: {counts['sent']} records sent, {counts['acknowledged']} "
              f"acknowledged, {counts['failed']} failed, {remaining} unconfirmed",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if remaining:
        print(f"ERROR {remaining} records were not delivered within {FLUSH_TIMEOUT_S:.0f} s",
              file=sys.stderr)
    return 1 if status or counts["failed"] or remaining else 0


def flush(producer: Any, timeout_s: float) -> int:
    """producer.flush in short steps, so that an error callback's exception (a failed
    login) and Ctrl-C end the wait at once; the records still unconfirmed."""
    deadline = time.monotonic() + timeout_s
    remaining = len(producer)
    while remaining and time.monotonic() < deadline:
        remaining = producer.flush(min(FLUSH_STEP_S, max(0.0, deadline - time.monotonic())))
    return remaining
