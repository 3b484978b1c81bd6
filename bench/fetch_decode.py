#!/usr/bin/env python3
"""What decoding a Fetch request body costs (issue 26): the decoder generated from
protocol/messages/fetch.py against _core.FetchRequestDecoder, which decode_request
uses. Alternated rounds in one process, thread CPU time, medians and minima.

Cases: a follower's Fetch v12 of one partition (every acks=all round trip), a
consumer's v13 of one partition (topic ids), a follower's v12 of 100 partitions.

Example:
    python bench/fetch_decode.py --rounds 15 --calls 3000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from pybroker import _core  # noqa: E402
from pybroker.protocol.codec import uuid_of  # noqa: E402
from pybroker.protocol.frame import encode_request, request_decoder  # noqa: E402
from pybroker.protocol.types import ZERO_UUID  # noqa: E402

CLIENT_ID = "broker-2-fetcher"


def _partition(index: int) -> dict[str, Any]:
    return {"partition": index, "current_leader_epoch": 3, "fetch_offset": 12345,
            "last_fetched_epoch": 3, "log_start_offset": 0, "partition_max_bytes": 1 << 20}


def _frame(version: int, follower: bool, topics: list[dict[str, Any]]) -> tuple[bytes, int]:
    """The request frame (no size prefix) and where its body starts."""
    body = {"replica_id": 2 if follower else -1, "max_wait_ms": 500, "min_bytes": 1,
            "max_bytes": 10 << 20, "isolation_level": 0,
            "session_id": 123 if follower else 0, "session_epoch": 7 if follower else -1,
            "topics": topics, "forgotten_topics_data": [], "rack_id": ""}
    frame = b"".join(encode_request(1, version, 99, CLIENT_ID, body))[4:]
    return frame, 10 + len(CLIENT_ID) + 1  # header v2: its tagged fields (one byte)


CASES = {
    "follower v12, 1 partition": (12, True, [{"topic": "lat-abc",
                                              "partitions": [_partition(0)]}]),
    "consumer v13, 1 partition": (13, False, [{"topic_id": uuid.uuid4(),
                                               "partitions": [_partition(0)]}]),
    "follower v12, 100 partitions": (12, True, [
        {"topic": f"tp-{t}", "partitions": [_partition(i) for i in range(10)]}
        for t in range(10)]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=3000, help="decodes a round")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    for name, (version, follower, topics) in CASES.items():
        frame, start = _frame(version, follower, topics)
        buf = memoryview(frame)
        generated = request_decoder(1, version)
        native = _core.FetchRequestDecoder(version, uuid_of, ZERO_UUID)
        if generated(buf, start) != native(buf, start):
            raise SystemExit(f"{name}: the decoders disagree")
        times: dict[str, list[float]] = {"generated": [], "native": []}
        for _ in range(args.rounds):
            for label, decode in (("generated", generated), ("native", native)):
                started = time.thread_time()
                for _ in range(args.calls):
                    decode(buf, start)
                times[label].append((time.thread_time() - started) / args.calls * 1e6)
        results[name] = {label: {"median_us": round(statistics.median(t), 2),
                                 "min_us": round(min(t), 2)} for label, t in times.items()}
        print(f"{name}: generated {results[name]['generated']}, "
              f"native {results[name]['native']}", flush=True)
    results["load_average"] = [round(x, 1) for x in os.getloadavg()]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
