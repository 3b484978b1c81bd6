"""A consume-transform-produce worker, run as its own process by
test_exactly_once.py (which kills it with kill -9 at random points):

    read topic A (assigned, offsets from group G), write f(value) = b"B:" + value
    to the same partition of topic B, and commit the consumed offsets in the
    same transaction; exit 0 once every partition of A is consumed up to
    the high watermark taken at the start.

argv: bootstrap topic_a topic_b group transactional_id partitions batch_size pause_ms
(pause_ms: a pause inside each transaction, so kills land mid-transaction too)"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

POLL_S = 0.2


def main() -> int:
    bootstrap, topic_a, topic_b, group, txn_id = sys.argv[1:6]
    partitions, batch, pause_ms = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, "transaction.timeout.ms": 10000,
                         "socket.timeout.ms": 10000, "message.timeout.ms": 10000})
    # before the consumer reads its committed offsets: a transaction the previous
    # (killed) worker left behind is completed or aborted by now
    producer.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
    tps = [TopicPartition(topic_a, p) for p in range(partitions)]
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic_a, p), timeout=30)[1]
            for p in range(partitions)}
    committed = consumer.committed(tps, timeout=30)
    consumer.assign([TopicPartition(topic_a, tp.partition, tp.offset if tp.offset >= 0 else 0)
                     for tp in committed])
    done = {tp.partition: max(tp.offset, 0) for tp in committed}
    print(f"start at {done} ends {ends}", flush=True)
    while any(done[p] < ends[p] for p in ends):
        msgs = consumer.consume(batch, POLL_S)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(topic_b, value=b"B:" + m.value(), partition=m.partition())
        positions = consumer.position([TopicPartition(topic_a, p) for p in range(partitions)])
        offsets = [tp for tp in positions if tp.offset >= 0]
        time.sleep(pause_ms / 1000)
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        try:
            producer.commit_transaction(30)
        except KafkaException as exc:
            print(f"commit failed: {exc}", flush=True)
            return 2
        for tp in offsets:
            done[tp.partition] = tp.offset
        print(f"committed {done}", flush=True)
    consumer.close()
    print("caught up", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
