"""The version ranges pybroker advertises start where Kafka 4.0's do (KIP-896 removed the
versions before its 2.1 baseline) and end at or below them: a client is refused exactly
what Kafka 4.0 refuses it. Where pybroker stops below Kafka 4.0 it lacks those versions
(the clients negotiate down); it never advertises one Kafka 4.0 does not have."""

from __future__ import annotations

import pybroker.handlers  # noqa: F401  (registers the handlers: the advertised table)
from pybroker.handlers.registry import HANDLERS

#: Kafka 4.0.x's ApiVersions answer (validVersions of clients/.../message/*Request.json
#: at 4.0, with ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION = 0 for Produce, and
#: JoinGroup from v0 as 4.0.1+ after KAFKA-19444), for the APIs pybroker handles
KAFKA_40: dict[int, tuple[int, int]] = {
    0: (0, 12),  # Produce: 0-2 advertised but refused (KAFKA-18659)
    1: (4, 17),  # Fetch
    2: (1, 10),  # ListOffsets
    3: (0, 13),  # Metadata
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup (4.0.0: 2-9)
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (2, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 5),  # EndTxn
    27: (1, 1),  # WriteTxnMarkers
    28: (0, 5),  # TxnOffsetCommit
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    35: (1, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    60: (0, 2),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
    68: (0, 1),  # ConsumerGroupHeartbeat
    69: (0, 1),  # ConsumerGroupDescribe
    75: (0, 0),  # DescribeTopicPartitions
}

#: APIs a Kafka 4.0 broker does not advertise, and why pybroker does
NOT_IN_KAFKA_40 = {
    7: "ControlledShutdown: pybroker's controller is ZooKeeper-based (Kafka 4.0's KRaft "
       "brokers use BrokerHeartbeat); advertised from v1 as Kafka 3.x did",
}


def test_advertised_ranges_start_where_kafka_40s_do() -> None:
    for key, spec in HANDLERS.items():
        if key in NOT_IN_KAFKA_40:
            continue
        low, high = spec.advertised
        k_low, k_high = KAFKA_40[key]
        assert low == k_low, f"API {key}: advertised from v{low}, Kafka 4.0 from v{k_low}"
        assert high <= k_high, f"API {key}: advertised up to v{high}, Kafka 4.0 has v{k_high}"


def test_handled_versions_are_the_advertised_ones_but_produce() -> None:
    # a request below the handled range closes the connection, as Kafka 4.0's
    for key, spec in HANDLERS.items():
        assert (spec.min_version, spec.max_version) == spec.advertised or key == 0
    assert HANDLERS[0].min_version == 3 and HANDLERS[0].advertised[0] == 0
