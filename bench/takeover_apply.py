#!/usr/bin/env python3
"""A broker's side of a controlled shutdown (issue 25), without a cluster: how long one
broker takes to apply a batch of leadership takeovers, and the longest its event loop
was held meanwhile.

A ReplicaManager over --partitions followed partitions (topics of --per-topic, logs in a
temporary dir, one record batch each so a takeover records its epoch at a non-zero
offset) is handed, in one batch, new states that make it leader of every --every'th
partition at the next leader epoch: what a broker taking over from one in controlled
shutdown is given by the metadata listener. Timed: from the hand-over to every
takeover applied, and the loop's lag meanwhile (a task asking for a 2 ms sleep).

The broker is told which partitions of each topic changed (the listener's `only`)
where its replica layer takes that; older code applies every partition of each topic.
With the code before issue 25's batching (no ReplicaManager.apply_topics_async) the
topics are applied one at a time, as its metadata listener did. Compare before/after
with the older checkout on PYTHONPATH:

    python bench/takeover_apply.py --partitions 3000
    PYTHONPATH=<older checkout>/python python bench/takeover_apply.py --partitions 3000

``--loop-busy-ms 4`` keeps the event loop in Python meanwhile (4 ms at a time, then a
turn for the others), as a broker serving its followers' fetches through a takeover
is: the checkpoints' writer threads then compete with it for the GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker.config import BrokerConfig
from pybroker.coordination.base import PartitionState, TopicRecord
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import MetadataCache
from pybroker.purgatory import Purgatory
from pybroker.replica.fetcher import ReplicaFetcherManager
from pybroker.replica.manager import ReplicaManager


def one_batch() -> memoryview:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 16)
    builder.append(0, timestamp=0, key=None, value=b"v", headers=[])
    return memoryview(bytes(builder.build()))


async def run(args: argparse.Namespace, data: Path) -> dict[str, object]:
    config = BrokerConfig({"log.dirs": str(data)})
    logs = LogManager(config, "bench")
    logs.startup()
    replicas = ReplicaManager(0, logs, Purgatory(),
                              ReplicaFetcherManager(0, MetadataCache("bench"), config))
    topics = {f"t{i:04d}": uuid.uuid4() for i in range(args.partitions // args.per_topic)}

    def records(takeover: bool) -> list[TopicRecord]:
        out = []
        for name, topic_id in topics.items():
            states = []
            for p in range(args.per_topic):
                taken = takeover and p % args.every == 0
                states.append(PartitionState(leader=0 if taken else 1,
                                             leader_epoch=1 if taken else 0,
                                             replicas=[1, 0, 2], isr=[1, 0, 2]))
            out.append(TopicRecord(name, topic_id, states, {}))
        return out

    for record in records(False):
        await replicas.apply_topic_async(record)
    batch = one_batch()
    for partition in replicas.partitions.values():
        partition.log.append(batch, 0)
    takeovers = records(True)
    lags: list[float] = []
    done = False

    async def probe() -> None:
        while not done:
            asked = time.perf_counter()
            await asyncio.sleep(0.002)
            lags.append((time.perf_counter() - asked) * 1000 - 2)

    async def serve() -> None:
        """The loop's own work while the takeover runs (a broker serving its followers'
        fetches): Python for --loop-busy-ms at a time, then a turn for the others."""
        while not done:
            until = time.perf_counter() + args.loop_busy_ms / 1000
            while time.perf_counter() < until:
                sum(range(200))
            await asyncio.sleep(0)

    prober = asyncio.create_task(probe())
    server = asyncio.create_task(serve()) if args.loop_busy_ms > 0 else None
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    if "only" in inspect.signature(getattr(replicas, "apply_topics_async", run)).parameters:
        # as the metadata listener hands it over: the changed partitions named
        changed = {r.name: [p for p in range(args.per_topic) if p % args.every == 0]
                   for r in takeovers}
        await replicas.apply_topics_async([(r, None) for r in takeovers], only=changed)
        mode = "one pass, the changed partitions only"
    elif hasattr(replicas, "apply_topics_async"):
        await replicas.apply_topics_async([(r, None) for r in takeovers])
        mode = "one pass over every topic"
    else:
        for record in takeovers:
            await replicas.apply_topic_async(record)
        mode = "a topic at a time"
    took = time.perf_counter() - started
    done = True
    await prober
    if server is not None:
        await server
    led = sum(p.is_leader for p in replicas.partitions.values())
    recording = getattr(replicas, "epochs_recording_s", None)
    logs.shutdown()
    lags.sort()
    return {"mode": mode, "partitions": len(replicas.partitions), "takeovers": led,
            "apply_s": round(took, 3),
            "epochs_recording_s": None if recording is None else round(recording, 3),
            "loop_lag_max_ms": round(lags[-1], 1),
            "loop_lag_p99_ms": round(lags[int(len(lags) * 0.99)], 1),
            "loop_busy_ms": args.loop_busy_ms,
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--every", type=int, default=3,
                        help="take over every N'th partition (3: a third, as RF 3)")
    parser.add_argument("--loop-busy-ms", type=float, default=0.0,
                        help="keep the event loop busy in Python meanwhile, this long at "
                             "a time (a broker serving fetches through the takeover)")
    parser.add_argument("--dir", help="where the logs go (default: a temporary dir)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-takeover-", dir=args.dir) as tmp:
        out = asyncio.run(run(args, Path(tmp)))
    print(json.dumps(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
