"""A kafka-python group member in its own process, as applications run them.

    python kafka_python_member.py BOOTSTRAP TOPIC GROUP SECONDS

Consumes for SECONDS, then prints one JSON line: the partitions assigned at that
moment and every (partition, offset) it received; then waits for a line on stdin
before it commits and leaves the group (so one member leaving cannot hand its
partitions to another that has not reported yet)."""

from __future__ import annotations

import json
import sys
import time

from kafka import KafkaConsumer


def main() -> None:
    bootstrap, topic, group, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500)
    received: set[tuple[int, int]] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=100).values():
            received.update((r.partition, r.offset) for r in records)
    assignment = sorted(tp.partition for tp in consumer.assignment())
    print(json.dumps({"assignment": assignment, "records": sorted(received)}), flush=True)
    sys.stdin.readline()
    consumer.commit()
    consumer.close()


if __name__ == "__main__":
    main()
