"""`pybroker log-dirs`: kafka-log-dirs.sh --describe.

    pybroker log-dirs --bootstrap-server B --describe [--broker-list 1,2] [--topic-list t,u]

Asks each broker (all of them unless --broker-list) for its log dirs (DescribeLogDirs)
and prints a table, a row per partition of each dir:

    BROKER LOG-DIR      PARTITION SIZE OFFSET-LAG IS-FUTURE ERROR
    1      /data/kafka  t-0       123  0          false     -

With --json, Kafka's own output: its two lines, then its JSON document, keys in its
order: {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,
"partitions":[{"partition":"t-0","size":123,"offsetLag":0,"isFuture":false}]}]}]}"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pybroker.tools._common import DEFAULT_TIMEOUT_MS, ToolError, add_bootstrap, read_properties
from pybroker.tools._retry import check, retrying
from pybroker.tools._wire import WireClient, error_text

COMMAND = "log-dirs"
HELP = "describe the brokers' log dirs: partitions, sizes, offset lag (kafka-log-dirs.sh)"

DESCRIBE_LOG_DIRS = 35


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of client configs")
    parser.add_argument("--describe", action="store_true", required=True,
                        help="Describe the specified log directories on the specified brokers.")
    parser.add_argument("--broker-list", metavar="1,2",
                        help="brokers to query (default: all)")
    parser.add_argument("--topic-list", metavar="T1,T2",
                        help="topics whose partitions to show (default: all)")
    parser.add_argument("--json", action="store_true",
                        help="Kafka's output: two lines, then its JSON document")


def run(args: argparse.Namespace) -> int:
    try:
        props = read_properties(args.command_config)
        timeout_ms = int(props.get("default.api.timeout.ms", DEFAULT_TIMEOUT_MS))
        topics = {t.strip() for t in (args.topic_list or "").split(",") if t.strip()}
        with WireClient(args.bootstrap_server, timeout_ms) as client:
            known = sorted(client.brokers())
            if args.broker_list:
                try:
                    brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
                except ValueError:
                    raise ToolError(f"invalid --broker-list {args.broker_list}") from None
                missing = sorted(set(brokers) - set(known))
                if missing:
                    raise ToolError("ERROR: The given brokers do not exist from --broker-list: "
                                    + ",".join(map(str, missing))
                                    + ". Current existent brokers: "
                                    + ",".join(map(str, known)))
            else:
                brokers = known
            if args.json:
                print("Querying brokers for log directories information")
            dirs = {b: retrying(lambda b=b: check(client.request(
                DESCRIBE_LOG_DIRS, {"topics": None}, node=b), f"describing broker {b}'s log "
                "dirs"), timeout_ms / 1000, f"describing broker {b}'s log dirs")
                    for b in brokers}
        if args.json:
            print("Received log directory information from brokers "
                  + ",".join(str(b) for b in brokers))
            print(json.dumps(document(dirs, topics), separators=(",", ":")))
        else:
            print_table(table(document(dirs, topics)))
        return 0
    except BrokenPipeError:  # `| head` closed stdout: the CLI ends quietly
        raise
    except (ToolError, OSError) as exc:
        print(str(exc), file=sys.stderr)
        return 1


def document(answers: dict[int, dict[str, Any]], topics: set[str]) -> dict[str, Any]:
    """Kafka's JSON from each broker's DescribeLogDirs answer (partitions of `topics`
    only, when given)."""
    brokers = []
    for broker, answer in answers.items():
        log_dirs = []
        for result in answer["results"]:
            partitions = [
                {"partition": f"{t['name']}-{p['partition_index']}", "size": p["partition_size"],
                 "offsetLag": p["offset_lag"], "isFuture": p["is_future_key"]}
                for t in result["topics"] if not topics or t["name"] in topics
                for p in t["partitions"]]
            error = error_text(result["error_code"]) if result["error_code"] else None
            log_dirs.append({"logDir": result["log_dir"], "error": error,
                             "partitions": partitions})
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return {"version": 1, "brokers": brokers}


COLUMNS = ("BROKER", "LOG-DIR", "PARTITION", "SIZE", "OFFSET-LAG", "IS-FUTURE", "ERROR")


def table(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """The rows of Kafka's document: one per partition, one for a dir without any."""
    rows = []
    for broker in doc["brokers"]:
        for log_dir in broker["logDirs"]:
            error = log_dir["error"] or "-"
            if not log_dir["partitions"]:
                rows.append((str(broker["broker"]), log_dir["logDir"], "-", "-", "-", "-",
                             error))
            for p in sorted(log_dir["partitions"], key=lambda p: p["partition"]):
                rows.append((str(broker["broker"]), log_dir["logDir"], p["partition"],
                             str(p["size"]), str(p["offsetLag"]),
                             str(p["isFuture"]).lower(), error))
    return rows


def print_table(rows: list[tuple[str, ...]]) -> None:
    cells = [COLUMNS, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    for row in cells:
        print(" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
