"""`pybroker` command line: `pybroker serve [server.properties] [--override k=v]...`."""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from types import ModuleType

from pybroker.config import BrokerConfig, ConfigError

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pybroker", description="A Kafka-protocol broker with a Rust log engine.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a broker")
    serve.add_argument("properties", nargs="?", help="server.properties file (Kafka's names)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key, overriding the properties file")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    serve.set_defaults(run=serve_command)
    for tool in discover_tools():
        sub = commands.add_parser(tool.COMMAND, help=tool.HELP, description=tool.HELP)
        tool.add_arguments(sub)
        sub.set_defaults(run=tool.run)
    return parser


def discover_tools() -> list[ModuleType]:
    import pybroker.tools

    return [
        importlib.import_module(f"pybroker.tools.{info.name}")
        for info in sorted(pkgutil.iter_modules(pybroker.tools.__path__), key=lambda i: i.name)
        if not info.name.startswith("_")
    ]


def serve_command(args: argparse.Namespace) -> int:
    import anyio

    from pybroker.broker import Broker

    try:
        config = BrokerConfig.load(args.properties, args.override)
    except (ConfigError, OSError) as exc:
        print(f"pybroker: {exc}", file=sys.stderr)
        return 2
    broker = Broker(config)
    try:
        anyio.run(broker.serve, backend="asyncio", backend_options=_backend_options())
    except KeyboardInterrupt:
        pass
    return 0


def _backend_options() -> dict[str, object]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = getattr(args, "log_level", "WARNING")
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
