"""`pybroker` command line: `pybroker serve [server.properties] [--override k=v]...`
and Kafka's tools as subcommands.

A mistake in how the broker is started (a bad config value, a malformed or
unsupported listener, a port in use, a bad --log-level) ends the start with one
line on stderr and a non-zero status, no traceback, and no data directory left
behind that this start created."""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import pkgutil
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from pybroker.config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from pybroker.broker import Broker

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
#: --log-level names (log4j's WARN and FATAL too, as Kafka's scripts take them)
LOG_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
              "CRITICAL": logging.CRITICAL}
#: exit status of a start refused for its configuration (argparse's usage status)
EXIT_CONFIG = 2
#: exit status of a start that failed for another reason (a port in use, a data dir)
EXIT_STARTUP = 1


class VersionAction(argparse.Action):
    """--version (argparse's, but the version is looked up only when asked for: see
    pybroker.__getattr__)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS,
                 help: str = "show program's version number and exit") -> None:  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        import pybroker

        print(f"pybroker {pybroker.__version__}")
        parser.exit()


def build_parser(tools: bool = True, command: str | None = None) -> argparse.ArgumentParser:
    """The command line: `serve` and, with `tools`, the tools' subcommands (importing
    the tools brings in the Kafka client library: a broker's start, which has no use
    for them, skips them); given the `command` to be run, only its tool (see
    discover_tools)."""
    parser = argparse.ArgumentParser(
        prog="pybroker", description="A Kafka-protocol broker with a Rust log engine.")
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a broker")
    serve.add_argument("properties", nargs="?", help="server.properties file (Kafka's names)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key, overriding the properties file")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARN, ERROR")
    serve.set_defaults(run=serve_command)
    for tool in discover_tools(command) if tools else ():
        sub = commands.add_parser(tool.COMMAND, help=tool.HELP, description=tool.HELP)
        tool.add_arguments(sub)
        sub.add_argument("--log-level", default=None,
                         help="show log lines of this level and above, the Kafka client's "
                              "too (default: warnings, client lines hidden)")
        if "--verbose" in sub._option_string_actions:
            # the tool's own --verbose (Kafka's meaning, e.g. verifiable-consumer's
            # record_data events) wins; the client's log lines stay behind --log-level
            sub.set_defaults(verbose=False)
        else:
            sub.add_argument("--verbose", action="store_true",
                             help="also show the Kafka client's (librdkafka's) own log lines")
        # as Kafka's scripts take it
        sub.add_argument("--version", action=VersionAction)
        sub.set_defaults(run=tool.run)
    return parser


def discover_tools(command: str | None = None) -> list[ModuleType]:
    """The tool modules (pybroker/tools/<name>.py, COMMAND <name> with dashes). With
    `command`, only its module when there is one: a tool's run imports what it uses and
    no more (every tool together was half of a tool's 0.5 CPU s start, and
    reassign-partitions --verify is run in a loop beside a move, on its cores). Without
    one, or a misspelt one, all of them, so the usage lists every command."""
    import pybroker.tools

    names = sorted(info.name for info in pkgutil.iter_modules(pybroker.tools.__path__)
                   if not info.name.startswith("_"))
    if command is not None and command.replace("-", "_") in names:
        tool = importlib.import_module(f"pybroker.tools.{command.replace('-', '_')}")
        if tool.COMMAND == command:
            return [tool]
    return [importlib.import_module(f"pybroker.tools.{name}") for name in names]


def _command(argv: list[str]) -> str | None:
    """The subcommand `argv` names (its first argument: no option comes before it),
    or None."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def serve_command(args: argparse.Namespace) -> int:
    import anyio

    from pybroker.broker import Broker

    try:
        config = BrokerConfig.load(args.properties, args.override)
    except (ConfigError, OSError) as exc:
        return _refuse(exc, EXIT_CONFIG)
    config.log_unknown()
    created = _missing_dirs(config.log_dirs)
    try:
        broker = Broker(config)
    except (ConfigError, OSError) as exc:
        _remove(created)
        return _refuse(exc, EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_STARTUP)
    started: list[bool] = []
    failure = None
    try:
        anyio.run(_serve, broker, started, backend="asyncio",
                  backend_options=_backend_options())
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        failure = None if started else _startup_failure(exc)
        if failure is None:
            raise
    if failure is not None:
        _remove(created)
        if isinstance(failure, OSError) and failure.errno == errno.EADDRINUSE:
            # the listeners are bound already: the port in use is the metrics endpoint's
            failure = OSError(f"metrics.port {config['metrics.port']}: {failure.strerror}")
        return _refuse(failure, EXIT_STARTUP)
    return 0


async def _serve(broker: Broker, started: list[bool]) -> None:
    """broker.serve, noting when it has started (so a failure before that is a failed
    start: the metrics port in use, say)."""
    import anyio

    async with anyio.create_task_group() as tg:
        await tg.start(broker.serve)
        started.append(True)


def _refuse(exc: BaseException, status: int) -> int:
    print(f"pybroker: {exc}", file=sys.stderr)
    return status


def _startup_failure(exc: BaseException) -> OSError | ConfigError | None:
    """The OSError or ConfigError behind `exc`, looking inside exception groups."""
    if isinstance(exc, (OSError, ConfigError)):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _startup_failure(inner)
        if found is not None:
            return found
    return None


def _missing_dirs(paths: Iterable[str]) -> list[Path]:
    """For each data dir that does not exist yet, its topmost missing ancestor: what a
    start creates, and all it may remove again if the start fails."""
    missing = []
    for raw in paths:
        path = Path(raw).absolute()
        if path.exists():
            continue
        while not path.parent.exists():
            path = path.parent
        missing.append(path)
    return missing


def _remove(created: list[Path]) -> None:
    for path in created:
        shutil.rmtree(path, ignore_errors=True)


def _backend_options() -> dict[str, object]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(tools=argv[:1] != ["serve"], command=_command(argv)).parse_args(argv)
    explicit = args.log_level is not None
    name = (args.log_level or "WARNING").upper()
    level = LOG_LEVELS.get(name)
    if level is None:
        print(f"pybroker: invalid --log-level '{args.log_level}': use one of DEBUG, INFO, "
              "WARN, ERROR", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    if args.command != "serve":
        from pybroker.tools._common import CLIENT_LOGGER

        # the Kafka client's own lines (a failed connect, every retry) stay hidden
        # unless asked for: the tool reports a failure itself, in one line
        if args.verbose:
            CLIENT_LOGGER.setLevel(min(level, logging.INFO) if explicit else logging.DEBUG)
        else:
            CLIENT_LOGGER.setLevel(level if explicit else logging.CRITICAL)
    return _run_tool(args) if args.command != "serve" else int(args.run(args))


def _run_tool(args: argparse.Namespace) -> int:
    """A tool's run, ending any failure it did not report itself in one line (the
    traceback only with --verbose)."""
    from pybroker.tools import _bootstrap
    from pybroker.tools._common import ToolError, stdout_gone

    try:
        if hasattr(args, "bootstrap_server"):
            _bootstrap.settle(args)
        return int(args.run(args))
    except ToolError as exc:
        print(f"pybroker {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        stdout_gone()  # the reader went away (`| head`): stop quietly
        return 0
    except Exception as exc:
        if args.verbose:
            raise
        print(f"pybroker {args.command}: ERROR {type(exc).__name__}: {exc} "
              "(--verbose shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
