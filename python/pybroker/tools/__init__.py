"""Operator tools, each a `pybroker <command>` subcommand (Kafka's scripts).

Every module here defines::

    COMMAND = "topics"                      # the subcommand name
    HELP = "create, list, describe ..."     # one line for `pybroker --help`
    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...

and is found by `pybroker.cli` without being listed anywhere else."""
