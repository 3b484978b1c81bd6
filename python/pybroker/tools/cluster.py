"""`pybroker cluster info`: the cluster as Metadata describes it (Kafka's
`kafka-cluster.sh cluster-id` and the broker list of kafka-broker-api-versions.sh):

    pybroker cluster info --bootstrap-server B [--wait-for-brokers N] [--timeout MS]

    Cluster ID: 6hV1lFuyTuaQ2uM6eV3sBA
    Controller: 1
    Brokers: 3
      1 127.0.0.1:9191 rack: null
      ...

`Controller` is the controller id Metadata gives: the broker asked, as Kafka 4.0 names
a live broker rather than its controller; every broker takes the controller's requests
to the elected one (handlers/controller_only.py), whose log says "elected controller".

`--wait-for-brokers N` waits (up to --timeout) until N brokers are registered, a
connection refused included (brokers still starting): what a script runs between
starting brokers in the background and creating a topic with replication factor N."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from pybroker.tools._common import (
    DEFAULT_TIMEOUT_MS,
    ToolError,
    add_bootstrap,
    client_config,
    kafka_message,
    read_properties,
    reach,
    require_client,
)
from pybroker.tools._retry import retriable

COMMAND = "cluster"
HELP = "describe the cluster: id, controller, brokers (info)"
#: one attempt's wait while waiting for brokers; the client reconnects at least this often
STEP_MS = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of client configs (security settings)")
    actions = parser.add_subparsers(dest="action", required=True)
    info = actions.add_parser("info", help="cluster id, controller and brokers")
    info.add_argument("--wait-for-brokers", type=int, default=0, metavar="N",
                      help="wait until N brokers are registered (brokers still starting)")
    info.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="MS",
                      help=f"how long to wait, in ms (default {DEFAULT_TIMEOUT_MS})")


def run(args: argparse.Namespace) -> int:
    try:
        cluster = describe(args)
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    print(f"Cluster ID: {cluster.cluster_id}")
    print(f"Controller: {cluster.controller.id if cluster.controller else -1}")
    nodes = sorted(cluster.nodes, key=lambda n: n.id)
    print(f"Brokers: {len(nodes)}")
    for node in nodes:
        print(f"  {node.id} {node.host}:{node.port} rack: {node.rack or 'null'}")
    return 0


def describe(args: argparse.Namespace) -> Any:
    """DescribeCluster's answer; with --wait-for-brokers N, once N brokers are registered,
    asking again (a refused connect included) until --timeout."""
    ck = require_client()
    config = client_config(args.bootstrap_server, read_properties(args.command_config),
                           {"reconnect.backoff.max.ms": str(STEP_MS)}, timeout_ms=args.timeout)
    admin = ck.admin.AdminClient(config)
    deadline = time.monotonic() + args.timeout / 1000
    seen = "no broker answered"
    while True:
        step = min(STEP_MS / 1000, max(0.1, deadline - time.monotonic()))
        try:
            cluster = admin.describe_cluster(request_timeout=step).result(step + 5)
        except ck.KafkaException as exc:
            admin.poll(0)  # the error events: a failed login ends the wait (ToolError)
            if not args.wait_for_brokers and (retriable(exc) is None
                                              or time.monotonic() >= deadline):
                raise ToolError(kafka_message(exc)) from None
            seen = reach(config).last_error or kafka_message(exc)
        else:
            if len(cluster.nodes) >= args.wait_for_brokers:
                return cluster
            seen = f"{len(cluster.nodes)} broker(s) registered"
        if time.monotonic() >= deadline:
            raise ToolError(f"waited {args.timeout} ms for {args.wait_for_brokers} brokers at "
                            f"{args.bootstrap_server}: {seen}")
        time.sleep(min(STEP_MS / 1000, 0.25))
