"""DescribeLogDirs (35): each of this broker's log dirs with the partitions it holds,
their size on disk and offset lag (kafka-log-dirs.sh --describe).

The offset lag is Kafka's for a current (not future) replica: how far the log end is
behind the high watermark, so 0 for any replica whose log has what is committed.
Sizes are the segment files' bytes. A null topic list asks for every partition;
a named partition this broker does not hold is left out, as in Kafka. Total and usable
bytes (v4) are the dir's file system's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(35, (1, 4))
async def handle_describe_log_dirs(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    wanted = request.body["topics"]
    selected: set[tuple[str, int]] | None = None
    if wanted is not None:
        selected = {(t["topic"], p) for t in wanted for p in t["partitions"]}
    results = []
    for directory in ctx.logs.dirs:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), partition in sorted(ctx.logs.partitions.items()):
            if partition.directory.parent != directory:
                continue
            if selected is not None and (topic, index) not in selected:
                continue
            log = partition.log
            topics.setdefault(topic, []).append({
                "partition_index": index,
                "partition_size": log.size_bytes,
                "offset_lag": max(partition.high_watermark - log.log_end_offset, 0),
                "is_future_key": False,
            })
        total, usable = disk_space(directory)
        results.append({
            "error_code": 0, "log_dir": str(directory.absolute()),
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            "total_bytes": total, "usable_bytes": usable,
        })
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}


def disk_space(directory: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding `directory`; -1s if unknown."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
