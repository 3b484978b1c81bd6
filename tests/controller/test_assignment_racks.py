"""Rack-aware replica assignment (Kafka's AdminUtils.assignReplicasToBrokersRackAware
with a fixed start): the rack-alternated broker list, every partition on as many racks
as it can be, leaders spread, and a mix of brokers with and without racks refused."""

from __future__ import annotations

from collections import Counter

import pytest

from pybroker.controller.assignment import assign_replicas, rack_alternated
from pybroker.errors import ErrorCode, KafkaError

#: Kafka's documented example: brokers 0-5 on racks 1, 3, 3, 2, 2, 1
KAFKA_EXAMPLE = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list_is_kafkas() -> None:
    assert rack_alternated(KAFKA_EXAMPLE) == [0, 3, 1, 5, 4, 2]


def test_every_partition_spans_all_racks() -> None:
    out = assign_replicas(12, 3, list(KAFKA_EXAMPLE), racks=KAFKA_EXAMPLE)
    for replicas in out:
        assert len(set(replicas)) == 3
        assert {KAFKA_EXAMPLE[b] for b in replicas} == {"rack1", "rack2", "rack3"}
    # leaders go round the rack-alternated list: every broker leads twice
    assert Counter(r[0] for r in out) == dict.fromkeys(KAFKA_EXAMPLE, 2)


def test_more_replicas_than_racks_spreads_the_rest() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assign_replicas(8, 3, [1, 2, 3, 4], racks=racks):
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_two_racks_unbalanced() -> None:
    """Brokers 1, 2 on rack a and 3 on rack b: the plain rule would put partition 0 on
    [1, 2], both rack a; rack-aware puts each partition on both racks."""
    racks = {1: "a", 2: "a", 3: "b"}
    out = assign_replicas(6, 2, [1, 2, 3], racks=racks)
    assert all({racks[b] for b in r} == {"a", "b"} for r in out)
    assert assign_replicas(1, 2, [1, 2, 3])[0] == [1, 2]  # no racks: the seeds' rule


def test_partitions_added_later_continue_the_pattern() -> None:
    whole = assign_replicas(6, 2, list(KAFKA_EXAMPLE), racks=KAFKA_EXAMPLE)
    tail = assign_replicas(3, 2, list(KAFKA_EXAMPLE), first_partition=3, racks=KAFKA_EXAMPLE)
    assert tail == whole[3:]


def test_some_brokers_without_rack_is_refused() -> None:
    with pytest.raises(KafkaError) as info:
        assign_replicas(1, 2, [1, 2, 3], racks={1: "a", 2: "b", 3: None})
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "Not all brokers have rack information" in str(info.value)
