"""A confluent group member in its own process (killed with -9 by the tests).

usage: python group_member_proc.py BOOTSTRAP GROUP TOPIC SESSION_MS
Prints `assigned <partitions>` whenever its assignment changes."""

from __future__ import annotations

import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic, session = sys.argv[1:5]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "session.timeout.ms": int(session), "heartbeat.interval.ms": 500,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})

    def on_assign(c: Consumer, parts: list) -> None:  # type: ignore[type-arg]
        print("assigned", ",".join(str(p.partition) for p in parts), flush=True)

    consumer.subscribe([topic], on_assign=on_assign)
    while True:
        consumer.poll(0.1)


if __name__ == "__main__":
    main()
