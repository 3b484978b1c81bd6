"""What `pybroker local-cluster` keeps in its --base-dir so that later commands (status,
kill N, stop N, start N, pause N, resume N, stop, purge) find the cluster it started:
`cluster.json` with the ports, the broker command lines and each process's pid.

A pid alone could name another process by now (pids are reused): each is kept with the
process's start time (field 22 of /proc/<pid>/stat), and a pid whose start time differs
counts as gone. Writes replace the file atomically (a reader never sees half of it)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "cluster.json"


@dataclass
class Proc:
    """One process of the cluster: how to start it, and the running one, if any."""

    command: list[str]
    log: str
    pid: int = 0
    started: int = 0  # the process's start time, in clock ticks since boot

    def state(self) -> str:
        """running, paused (SIGSTOP), or down."""
        stat = _stat(self.pid)
        if stat is None or stat[1] != self.started or stat[0] in "ZX":
            return "down"
        return "paused" if stat[0] in "Tt" else "running"

    def attach(self, pid: int) -> None:
        self.pid = pid
        stat = _stat(pid)
        self.started = stat[1] if stat is not None else 0


@dataclass
class ClusterState:
    port: int
    zookeeper_port: int
    zookeeper: Proc
    brokers: dict[int, Proc] = field(default_factory=dict)
    #: the command that started the cluster and watches it (`stop` ends it)
    supervisor: Proc = field(default_factory=lambda: Proc([], ""))

    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.broker_port(i)}" for i in sorted(self.brokers))

    def broker_port(self, broker_id: int) -> int:
        return self.port + broker_id - 1

    def save(self, base: Path) -> None:
        data = asdict(self)
        data["brokers"] = {str(k): v for k, v in data["brokers"].items()}
        tmp = base / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(tmp, base / STATE_FILE)

    @classmethod
    def load(cls, base: Path) -> ClusterState | None:
        try:
            data = json.loads((base / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        return cls(port=data["port"], zookeeper_port=data["zookeeper_port"],
                   zookeeper=Proc(**data["zookeeper"]),
                   brokers={int(k): Proc(**v) for k, v in data["brokers"].items()},
                   supervisor=Proc(**data["supervisor"]))


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) of a live pid, or None."""
    if pid <= 0:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[19])
