"""The fault tests' accounting (tests/cluster/workload.py): what counts as lost,
duplicated or out of order, checked on made-up delivery reports and records."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from tests.cluster.workload import Ack, ContinuousProducer, check_partition

#: librdkafka's offset for a record acknowledged without an offset (RD_KAFKA_OFFSET_INVALID)
OFFSET_INVALID = -1001


def producer(acks: list[tuple[int, int]]) -> ContinuousProducer:
    """A stand-in with what check_partition reads: the tag and these (seq, offset)
    delivery reports on partition 0."""
    return cast(ContinuousProducer, SimpleNamespace(
        tag="idem", acked={0: [Ack(seq, offset, 0.0) for seq, offset in acks]}))


def records(seqs_at: dict[int, int]) -> list[tuple[int, bytes]]:
    return [(offset, f"idem:0:{seq}".encode()) for offset, seq in sorted(seqs_at.items())]


def test_a_record_at_another_offset_than_acknowledged_is_lost() -> None:
    check = check_partition(producer([(0, 10), (1, 11)]), 0, records({10: 0, 12: 1}))
    assert check.lost == [1]


def test_an_implicitly_acknowledged_record_is_checked_by_presence() -> None:
    """librdkafka acknowledges records whose own answer was an error once a later batch
    of the producer succeeds, with no offset: found anywhere, they are not lost."""
    check = check_partition(producer([(0, OFFSET_INVALID), (1, 11)]), 0,
                            records({10: 0, 11: 1}))
    assert (check.lost, check.duplicates) == ([], 0)
    check = check_partition(producer([(0, OFFSET_INVALID), (1, 11)]), 0, records({11: 1}))
    assert check.lost == [0]


def test_duplicates_name_their_offsets() -> None:
    check = check_partition(producer([(0, 10), (1, 11)]), 0,
                            records({10: 0, 11: 1, 12: 0}))
    assert (check.lost, check.duplicates, check.duplicated) == ([], 1, [(0, [10, 12])])
