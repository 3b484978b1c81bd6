"""`pybroker stop`: Kafka's kafka-server-stop.sh for brokers started in the background.

    pybroker stop config/server.properties      # the broker using that file's log.dirs
    pybroker stop --data-dir pybroker-data      # the broker using that data dir

The broker is found by its data dir's `.lock`: the process holding the lock (the kernel's
/proc/locks names it) is the broker using the dir, so no PID file can go stale. It gets
SIGTERM -- a clean, controlled shutdown -- and the command waits for it to exit. Kafka's
script stops every broker of the machine; this one only the broker of the dirs named."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from pybroker.config import BrokerConfig, ConfigError
from pybroker.log.dir_lock import LOCK_FILE
from pybroker.tools._common import ToolError

COMMAND = "stop"
HELP = "stop the broker of a server.properties or a data dir (SIGTERM: a clean shutdown)"
#: a controlled shutdown may retry controlled.shutdown.max.retries times, 5 s apart
DEFAULT_TIMEOUT_MS = 120000
POLL_S = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("properties", nargs="?",
                        help="the broker's server.properties (its log.dirs name the broker)")
    parser.add_argument("--data-dir", action="append", default=[], metavar="DIR",
                        help="a data dir of the broker (instead of a properties file)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="MS",
                        help=f"how long to wait for it to exit (default {DEFAULT_TIMEOUT_MS})")


def run(args: argparse.Namespace) -> int:
    try:
        dirs = data_dirs(args)
        pids = {pid: d for d in dirs if (pid := lock_holder(Path(d) / LOCK_FILE))}
        if not pids:
            raise ToolError(f"no broker runs on {', '.join(dirs)} (nothing holds its "
                            f"{LOCK_FILE})")
        for pid, directory in pids.items():
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + args.timeout / 1000
            while _alive(pid):
                if time.monotonic() > deadline:
                    raise ToolError(f"the broker (pid {pid}) of {directory} did not exit "
                                    f"within {args.timeout} ms; its log says why")
                time.sleep(POLL_S)
            print(f"Stopped the broker of {directory} (pid {pid})")
    except ToolError as exc:
        print(f"pybroker stop: {exc}", file=sys.stderr)
        return 1
    return 0


def data_dirs(args: argparse.Namespace) -> list[str]:
    if args.data_dir:
        if args.properties:
            raise ToolError("give a properties file or --data-dir, not both")
        return list(args.data_dir)
    if not args.properties:
        raise ToolError("which broker? give its server.properties or --data-dir DIR")
    try:
        return list(BrokerConfig.load(args.properties).log_dirs)
    except (ConfigError, OSError) as exc:
        raise ToolError(f"{args.properties}: {exc}") from None


def lock_holder(lock: Path) -> int | None:
    """The pid holding an flock on `lock` (from /proc/locks), or None."""
    try:
        st = lock.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        # `1: FLOCK  ADVISORY  WRITE 12345 fe:00:10018854 0 EOF`; a waiter has `->`
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            return int(fields[4])
    return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in "ZX"
