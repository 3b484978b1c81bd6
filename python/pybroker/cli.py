"""`pybroker` command line: `pybroker serve [server.properties] [--override k=v]...`."""

from __future__ import annotations

import argparse
import logging
import sys

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
    return parser


def serve(args: argparse.Namespace) -> int:
    import anyio

    from pybroker.broker import Broker

    try:
        config = BrokerConfig.load(args.properties, args.override)
    except (ConfigError, OSError) as exc:
        print(f"pybroker: {exc}", file=sys.stderr)
        return 2
    if config["zookeeper.connect"]:
        print("pybroker: cluster mode (zookeeper.connect) is not available yet", file=sys.stderr)
        return 2
    broker = Broker(config)
    broker.startup()
    try:
        anyio.run(broker.serve, backend="asyncio", backend_options=_backend_options())
    except KeyboardInterrupt:
        pass
    finally:
        broker.shutdown()
    return 0


def _backend_options() -> dict[str, object]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
    if args.command == "serve":
        return serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
