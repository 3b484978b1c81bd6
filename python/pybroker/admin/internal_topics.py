"""Kafka's internal topics, `__consumer_offsets` and `__transaction_state`: their
names, and the one place their shape and configs come from, whichever path creates
them first (a group's FindCoordinator, a transaction's, or a Metadata request that
auto-creates topics: Burrow and sarama's `client.Partitions("__consumer_offsets")`
ask for the offsets topic before any group exists).

As Kafka's AutoTopicCreationManager.creatableTopic and the coordinators'
offsetsTopicConfigs / transactionTopicConfigs:

* `__consumer_offsets`: offsets.topic.num.partitions partitions,
  offsets.topic.replication.factor replicas, cleanup.policy=compact,
  segment.bytes=offsets.topic.segment.bytes, compression.type=producer;
* `__transaction_state`: transaction.state.log.num.partitions partitions,
  transaction.state.log.replication.factor replicas, cleanup.policy=compact,
  segment.bytes=transaction.state.log.segment.bytes,
  min.insync.replicas=transaction.state.log.min.isr, compression.type=uncompressed,
  unclean.leader.election.enable=false.

A cluster never gets fewer replicas than configured (too few live brokers: the
creation fails, INVALID_REPLICATION_FACTOR, and FindCoordinator answers
COORDINATOR_NOT_AVAILABLE until enough are up), so losing one broker cannot take every
group down. A single node without ZooKeeper caps the factor at its one broker, so it
works out of the box; the transaction log's min.insync.replicas is capped at its
replication factor.

CreateTopics naming an internal topic is an ordinary CreateTopics, as in Kafka: the
request's partitions, replication factor and configs are used (only -1 falls back to
num.partitions / default.replication.factor)."""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.config import BrokerConfig

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
#: the client id of Kafka's admin tools (AdminUtils.ADMIN_CLIENT_ID): the only client
#: whose Produce may append to an internal topic
ADMIN_CLIENT_ID = "__admin_client"


@dataclass(frozen=True)
class InternalTopicSpec:
    partitions: int
    replication_factor: int
    configs: dict[str, str]


def internal_topic_spec(config: BrokerConfig, name: str, live_brokers: int
                        ) -> InternalTopicSpec | None:
    """How `name` is created when the broker creates it itself; None: not internal."""
    if name == OFFSETS_TOPIC:
        replication = _replication(config, config["offsets.topic.replication.factor"],
                                   live_brokers)
        return InternalTopicSpec(
            int(config["offsets.topic.num.partitions"]), replication,
            {"cleanup.policy": "compact",
             "segment.bytes": str(config["offsets.topic.segment.bytes"]),
             "compression.type": "producer"})
    if name == TRANSACTION_STATE_TOPIC:
        replication = _replication(config, config["transaction.state.log.replication.factor"],
                                   live_brokers)
        # never more than the replicas (a log no write could reach)
        min_isr = min(int(config["transaction.state.log.min.isr"]), replication)
        return InternalTopicSpec(
            int(config["transaction.state.log.num.partitions"]), replication,
            {"cleanup.policy": "compact",
             "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
             "min.insync.replicas": str(min_isr),
             "compression.type": "uncompressed",
             "unclean.leader.election.enable": "false"})
    return None


def _replication(config: BrokerConfig, configured: int, live_brokers: int) -> int:
    if config["zookeeper.connect"]:
        return int(configured)
    return min(int(configured), max(1, live_brokers))
