"""`pybroker load-test`: locust with the locustfile shipped in the package, against a
running broker (pybroker or any Kafka).

    pybroker load-test --headless -u 4 -r 4 -t 30s --host 127.0.0.1:9092
    pybroker load-test --host 127.0.0.1:9092            # locust's web UI on :8089
    pybroker load-test --headless -t 1m --users-class ProducerUser -- --csv out/locust

Produce users send batches of records and flush (one locust request per batch, type
`produce`); consume users read every partition (one request per non-empty fetch, type
`fetch`). The brokers are locust's own `--host` (`--bootstrap-server` is its alias, with
the tools' default and $PYBROKER_BOOTSTRAP_SERVER). Locust's common options are here;
any other locust option follows `--`. Locust comes with the extra:
pip install "pybroker[load]"."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from pybroker.tools._common import ToolError

COMMAND = "load-test"
HELP = "load-test a broker with locust: produce and consume users (pip install pybroker[load])"
LOCUSTFILE = Path(__file__).resolve().parent / "_load" / "locustfile.py"
USER_CLASSES = ("ProducerUser", "ConsumerUser")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", "--bootstrap-server", dest="bootstrap_server",
                        metavar="HOST:PORT[,...]",
                        help="the brokers (default $PYBROKER_BOOTSTRAP_SERVER, else "
                             "localhost:9092)")
    parser.add_argument("-u", "--users", type=int, default=2,
                        help="peak number of concurrent users (default 2)")
    parser.add_argument("-r", "--spawn-rate", type=float, default=2,
                        help="users started per second (default 2)")
    parser.add_argument("-t", "--run-time",
                        help="stop after this long (30s, 5m, 1h30m); headless runs "
                             "forever without it")
    parser.add_argument("--headless", action="store_true",
                        help="no web UI: start at once and print the stats")
    parser.add_argument("--web-port", type=int, default=8089,
                        help="the web UI's port (default 8089)")
    parser.add_argument("--users-class", action="append", choices=USER_CLASSES,
                        metavar="CLASS", help="ProducerUser or ConsumerUser (repeatable; "
                        "default both, equal weights)")
    parser.add_argument("--topic", default="locust", help="the topic (default locust)")
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions if the topic is created (default 4)")
    parser.add_argument("--record-size", type=int, default=100,
                        help="bytes per record value (default 100)")
    parser.add_argument("--batch", type=int, default=100,
                        help="records per produce request event (default 100)")
    parser.add_argument("--acks", default="1", choices=("0", "1", "all"),
                        help="producer acks (default 1)")
    parser.add_argument("locust_args", nargs=argparse.REMAINDER, metavar="-- LOCUST_OPTION",
                        help="any other locust option (--csv, --only-summary, --keys, "
                             "--consume-mode group, ...), after --")


def locust_command(args: argparse.Namespace) -> list[str]:
    extra = list(args.locust_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE),
           "--host", args.bootstrap_server,
           "--users", str(args.users), "--spawn-rate", str(args.spawn_rate),
           "--kafka-topic", args.topic, "--kafka-partitions", str(args.partitions),
           "--record-size", str(args.record_size), "--batch", str(args.batch),
           "--acks", args.acks]
    if args.run_time:
        cmd += ["--run-time", args.run_time]
    if args.headless:
        cmd.append("--headless")
    else:
        cmd += ["--web-port", str(args.web_port)]
    return cmd + extra + list(args.users_class or USER_CLASSES)


def run(args: argparse.Namespace) -> int:
    # only looked for here: importing locust would monkey-patch this interpreter (gevent)
    if importlib.util.find_spec("locust") is None:
        raise ToolError('locust is not installed: pip install "pybroker[load]"')
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        # locust's own exit status: 1 when any request failed
        return subprocess.run(locust_command(args), env=env).returncode
    except KeyboardInterrupt:
        return 130
