#!/usr/bin/env python3
"""What a clean stop's log closes cost (issue 25: a broker with 10,000 logs took 15.9 s
to exit after its controlled shutdown), without a broker: ``--logs`` logs opened in a
temp dir, then closed on ``--workers`` threads as LogManager.shutdown closes them
(num.recovery.threads.per.data.dir, 2 by default, per dir). Three cases, each timed:

- ``new``: logs created and closed with no record (a follower of a partition never
  written to, the controller bench's case);
- ``reopened``: the same logs opened again after a clean close and closed again;
- ``flushed``: logs holding ``--records`` records, flushed, then closed (nothing left
  to make durable).

Before/after pairs: run it with ``PYTHONPATH=<older checkout>/python`` (with that
checkout's extension) for the other side.

    python bench/log_close.py --logs 3000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker._core import PartitionLog


def batch(records: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(records):
        b.append(i, timestamp=1_000 + i, key=None, value=b"x" * 100, headers=[])
    return bytes(b.build())


def close_all(logs: list[Any], workers: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda log: log.close(), logs))
    return time.perf_counter() - started


def run(count: int, workers: int, records: int, root: Path) -> dict[str, float]:
    dirs = [str(root / f"t-{i}") for i in range(count)]
    out: dict[str, float] = {}
    out["new"] = close_all([PartitionLog(d) for d in dirs], workers)
    out["reopened"] = close_all([PartitionLog(d, clean_shutdown=True) for d in dirs], workers)
    data = batch(records)
    logs = []
    for d in dirs:
        log = PartitionLog(d, clean_shutdown=True, index_interval_bytes=1024)
        log.append(data, 0, 1)
        log.flush()
        logs.append(log)
    out["flushed"] = close_all(logs, workers)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--records", type=int, default=50)
    parser.add_argument("--dir", help="where the logs go (a temp dir under it)")
    parser.add_argument("--json")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="log-close-", dir=args.dir) as root:
        result = run(args.logs, args.workers, args.records, Path(root))
    result = {k: round(v, 3) for k, v in result.items()}
    print(f"{args.logs} logs closed on {args.workers} threads: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in result.items())
          + f" (load {load[0]:.1f} -> {os.getloadavg()[0]:.1f})", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"logs": args.logs, "workers": args.workers,
                                               "load": [load, os.getloadavg()], **result}))


if __name__ == "__main__":
    main()
