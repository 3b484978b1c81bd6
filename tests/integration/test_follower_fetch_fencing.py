"""A Fetch with a replica id that is not a replica of the partition (Kafka's
followerReplicaOrThrow) is refused: it reads nothing above the high watermark, and its
fetch offset counts for nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pybroker.errors import ErrorCode

from . import rawclient
from .helpers import create_topic
from .protoclient import ProtoClient

if TYPE_CHECKING:
    from tests.conftest import Broker

FETCH = 1


def follower_fetch(topic: str, replica_id: int, current_leader_epoch: int) -> dict:
    return {
        "replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": current_leader_epoch, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": 0,
            "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""}


@pytest.mark.parametrize(("epoch", "code"), [(-1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                             (0, ErrorCode.UNKNOWN_LEADER_EPOCH)])
def test_fetch_from_a_replica_id_that_is_no_replica_is_refused(
        broker: Broker, topic_name: str, epoch: int, code: ErrorCode) -> None:
    create_topic(broker.bootstrap, topic_name)
    with rawclient.RawClient(broker.bootstrap) as rc:
        assert rc.produce(topic_name, 0, rawclient.build_batch(
            [rawclient.Rec(b"x")]), acks=1).error_code == 0
    with ProtoClient(broker.bootstrap) as pc:
        answer = pc.request(FETCH, 12, follower_fetch(topic_name, 99, epoch))
    [part] = answer["responses"][0]["partitions"]
    assert part["error_code"] == code, part
    assert not part["records"]
