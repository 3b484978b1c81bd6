"""`pybroker verifiable-producer`: kafka-verifiable-producer.sh (VerifiableProducer).

Produces the integers 0, 1, 2, ... as string values (`P.0`, `P.1`, ... with
`--value-prefix P`) to `--topic`, keys null unless `--repeating-keys N` (then
0 .. N-1 over and over), without retries, and prints one JSON event per line:

    {"timestamp":..,"name":"startup_complete"}
    {"timestamp":..,"name":"producer_send_success","key":..,"value":"0","topic":..,"partition":0,"offset":0}
    {"timestamp":..,"name":"producer_send_error","key":..,"value":..,"topic":..,"exception":..,"message":..}
    {"timestamp":..,"name":"shutdown_complete"}
    {"timestamp":..,"name":"tool_data","sent":..,"acked":..,"target_throughput":..,"avg_throughput":..}

so that a test can tell which records the cluster acknowledged. It ends after
`--max-messages` (-1: until SIGTERM/Ctrl-C), with the closing events either way.
`exception` names librdkafka's error code (Kafka prints the Java exception class)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from pybroker.tools._common import (
    ToolError,
    client_config,
    read_properties,
    require_client,
    with_delivery_timeout,
)
from pybroker.tools._events import Stop, emit
from pybroker.tools.producer_perf_test import Throttler

COMMAND = "verifiable-producer"
HELP = ("produce increasing integers, printing each send's outcome as JSON "
        "(kafka-verifiable-producer.sh)")

#: seconds between flush attempts at the end (each serves delivery reports)
FLUSH_STEP_S = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, metavar="TOPIC",
                        help="produce messages to this topic")
    parser.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server",
                        metavar="HOST1:PORT1[,HOST2:PORT2[...]]",
                        help="the broker(s) to connect to; default bootstrap.servers of the "
                             "properties, else $PYBROKER_BOOTSTRAP_SERVER, else localhost:9092")
    parser.add_argument("--max-messages", type=int, default=-1, metavar="MAX-MESSAGES",
                        help="produce this many messages; -1 until the process is stopped")
    parser.add_argument("--throughput", type=int, default=-1, metavar="THROUGHPUT",
                        help="if > 0, throttle to about THROUGHPUT messages/s")
    parser.add_argument("--acks", type=int, default=-1, choices=(0, 1, -1), metavar="ACKS",
                        help="acks required on each message (0, 1 or -1)")
    parser.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE",
                        help="(deprecated) producer properties file; use --command-config")
    parser.add_argument("--command-config", dest="command_config", metavar="CONFIG-FILE",
                        help="producer properties file (overrides the options it shares)")
    parser.add_argument("--message-create-time", type=int, default=-1, metavar="CREATE-TIME",
                        help="send messages with creation time starting at this value (ms "
                             "since the epoch)")
    parser.add_argument("--value-prefix", type=int, metavar="VALUE-PREFIX",
                        help="prefix each value with this number and a dot")
    parser.add_argument("--repeating-keys", type=int, metavar="REPEATING-KEYS",
                        help="keys 0 .. REPEATING-KEYS-1, then from 0 again")


def value_of(i: int, prefix: int | None) -> str:
    return f"{prefix}.{i}" if prefix is not None else str(i)


class Keys:
    """Kafka's key sequence: None, or 0 .. repeating-1 cycling."""

    def __init__(self, repeating: int | None) -> None:
        self.repeating = repeating
        self.counter = 0

    def next(self) -> str | None:
        if self.repeating is None:
            return None
        key = str(self.counter)
        self.counter += 1
        if self.counter == self.repeating:
            self.counter = 0
        return key


def run(args: argparse.Namespace) -> int:
    if args.producer_config and args.command_config:
        raise ToolError("Options --producer.config and --command-config are mutually "
                        "exclusive.")
    if args.repeating_keys is not None and args.repeating_keys <= 0:
        raise ToolError("--repeating-keys must be > 0")
    ck = require_client()
    if args.producer_config:
        print("Option --producer.config has been deprecated and will be removed in a future "
              "version. Use --command-config instead.", flush=True)
    # the options first; the properties file overrides them, as in Kafka
    options = {"acks": str(args.acks), "retries": "0"}
    config = with_delivery_timeout(client_config(
        None, {"bootstrap.servers": args.bootstrap_server}, options,
        read_properties(args.producer_config or args.command_config)))
    producer = ck.Producer(config)
    stop = Stop()
    stop.install()
    counts = {"sent": 0, "acked": 0}
    start = time.monotonic()
    start_ms = int(time.time() * 1000)

    def report(key: str | None, value: str) -> Any:
        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                counts["acked"] += 1
                emit("producer_send_success", key=key, value=value, topic=msg.topic(),
                     partition=msg.partition(), offset=msg.offset())
            else:
                emit("producer_send_error", key=key, value=value, topic=args.topic,
                     exception=err.name(), message=err.str())
        return delivered

    emit("startup_complete")
    limit = args.max_messages if args.max_messages >= 0 else None
    throttler = Throttler(args.throughput, start)
    keys = Keys(args.repeating_keys)
    create_time = args.message_create_time if args.message_create_time != -1 else None
    i = 0
    try:
        while (limit is None or i < limit) and not stop.requested:
            key, value = keys.next(), value_of(i, args.value_prefix)
            extra: dict[str, Any] = {}
            if create_time is not None:
                extra["timestamp"] = create_time
                # Kafka moves the create time on by the tool's whole run time so far
                create_time += int(time.time() * 1000) - start_ms
            counts["sent"] += 1
            try:
                producer.produce(args.topic, value.encode(), key.encode() if key else None,
                                 on_delivery=report(key, value), **extra)
            except BufferError:
                producer.poll(0.05)  # the queue is full: the report comes from a retry
                counts["sent"] -= 1
                continue
            except ck.KafkaException as exc:
                error = exc.args[0]
                emit("producer_send_error", key=key, value=value, topic=args.topic,
                     exception=error.name(), message=error.str())
            i += 1
            producer.poll(0)
            pause = throttler.wait(i, time.monotonic())
            if pause > 0:
                producer.poll(pause)
    except KeyboardInterrupt:
        pass
    # Kafka's close(): every record sent is acknowledged or failed before the end
    while producer.flush(FLUSH_STEP_S):
        pass
    emit("shutdown_complete")
    elapsed_ms = max((time.monotonic() - start) * 1000, 1.0)
    emit("tool_data", sent=counts["sent"], acked=counts["acked"],
         target_throughput=args.throughput, avg_throughput=1000 * counts["acked"] / elapsed_ms)
    return 0
