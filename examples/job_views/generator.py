"""The web front end of the seeds' LinkedIn example: every job view becomes a JSON
event ``{"member": ..., "job": ..., "timestamp": ...}`` produced to ``job-views``
(keyed by job, so one job's views stay in order in one partition).

    python examples/job_views/generator.py --bootstrap localhost:9092 --events 5000
"""

from __future__ import annotations

import argparse
import json
import random
import time

from confluent_kafka import Producer

TOPIC = "job-views"


def generate(bootstrap: str, events: int, minutes: int, jobs: int, seed: int) -> dict[str, int]:
    """Produce ``events`` views spread over ``minutes`` of event time ending now;
    returns the number of views per job (for checking the pipeline's output)."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "compression.type": "lz4"})
    start_ms = int(time.time() * 1000) - minutes * 60_000
    step_ms = minutes * 60_000 / events
    counts: dict[str, int] = {}
    for i in range(events):
        job = f"job-{int(rng.paretovariate(1.2)) % jobs}"  # a few popular jobs
        event = {"member": f"member-{rng.randrange(100_000)}", "job": job,
                 "timestamp": int(start_ms + i * step_ms + rng.uniform(-5000, 5000))}
        producer.produce(TOPIC, key=job.encode(), value=json.dumps(event).encode())
        producer.poll(0)
        counts[job] = counts.get(job, 0) + 1
    assert producer.flush(60) == 0, "some job views were not delivered"
    del producer  # disconnect now, not when the broker is gone
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description="produce job-view events")
    ap.add_argument("--bootstrap", default="localhost:9092")
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--minutes", type=int, default=10, help="event-time span")
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    counts = generate(args.bootstrap, args.events, args.minutes, args.jobs, args.seed)
    print(f"produced {args.events} job views of {len(counts)} jobs to {TOPIC}")


if __name__ == "__main__":
    main()
