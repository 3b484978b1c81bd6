"""KIP-430's authorized operations through confluent-kafka's admin client (librdkafka's
0081_admin checks them): asked for, Metadata, DescribeCluster and DescribeGroups
answer the operations the principal's ACLs allow on the topic, the cluster and the
group (every supported one without an authorizer, or for a super user); not asked
for, nothing."""

from __future__ import annotations

import uuid

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

from tests.conftest import Broker, BrokerFactory
from tests.security.test_acl_matrix import _allow, _conf, acl_broker  # noqa: F401

TIMEOUT_S = 20.0
Op = AclOperation
TOPIC_OPS = {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
             Op.ALTER_CONFIGS}
CLUSTER_OPS = {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
               Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}
GROUP_OPS = {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}


def operations(admin: AdminClient, topic: str, group: str,
               include: bool = True) -> tuple[set[Op] | None, ...]:
    described = admin.describe_topics(TopicCollection([topic]),
                                      include_authorized_operations=include)
    topic_ops = described[topic].result(TIMEOUT_S).authorized_operations
    cluster_ops = admin.describe_cluster(
        include_authorized_operations=include).result(TIMEOUT_S).authorized_operations
    group_ops = admin.describe_consumer_groups(
        [group], include_authorized_operations=include)[group].result(
            TIMEOUT_S).authorized_operations
    return tuple(None if ops is None else set(ops)
                 for ops in (topic_ops, cluster_ops, group_ops))


def test_every_supported_operation_without_an_authorizer(broker_factory: BrokerFactory
                                                         ) -> None:
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic = "t-" + uuid.uuid4().hex[:8]
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    assert operations(admin, topic, "g") == (TOPIC_OPS, CLUSTER_OPS, GROUP_OPS)
    assert operations(admin, topic, "g", include=False) == (None, None, None)


def test_operations_follow_the_principals_acls(acl_broker: tuple[Broker, int]  # noqa: F811
                                               ) -> None:
    _, port = acl_broker
    admin = AdminClient(_conf(port, "admin"))
    alice = AdminClient(_conf(port, "alice"))
    topic, group = "t-" + uuid.uuid4().hex[:8], "g-" + uuid.uuid4().hex[:8]
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    _allow(admin, ResourceType.TOPIC, topic, Op.READ)
    _allow(admin, ResourceType.TOPIC, topic, Op.DESCRIBE_CONFIGS)
    _allow(admin, ResourceType.BROKER, "kafka-cluster", Op.DESCRIBE)
    _allow(admin, ResourceType.GROUP, group, Op.DELETE)
    _allow(admin, ResourceType.GROUP, group, Op.DESCRIBE)
    # READ implies DESCRIBE only when asked for DESCRIBE: each bit is its own check
    assert operations(alice, topic, group) == (
        {Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS}, {Op.DESCRIBE}, {Op.DELETE, Op.DESCRIBE})
    assert operations(admin, topic, group) == (TOPIC_OPS, CLUSTER_OPS, GROUP_OPS)
