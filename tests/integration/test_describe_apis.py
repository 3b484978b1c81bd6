"""DescribeCluster (60) and DescribeLogDirs (35) on a single node, through raw requests
(pybroker's own protocol client)."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from pybroker.tools._wire import WireClient
from tests.conftest import Broker, BrokerFactory
from tests.integration.helpers import create_topic

UNSUPPORTED_ENDPOINT_TYPE = 119


def test_describe_cluster_names_this_broker(broker_factory: BrokerFactory) -> None:
    b = broker_factory({"broker.rack": "r1"})
    with WireClient(b.bootstrap, 10000) as client:
        answer = client.request(60, {"include_cluster_authorized_operations": False,
                                     "endpoint_type": 1})
        assert answer["error_code"] == 0
        assert answer["brokers"] == [{"broker_id": 0, "host": b.host, "port": b.port,
                                      "rack": "r1"}]
        assert answer["controller_id"] == 0
        assert len(answer["cluster_id"]) == 22
        # controllers are not described by a broker (KIP-919)
        refused = client.request(60, {"include_cluster_authorized_operations": False,
                                      "endpoint_type": 2})
        assert refused["error_code"] == UNSUPPORTED_ENDPOINT_TYPE
        assert refused["brokers"] == []
    # librdkafka's describe_cluster uses API 60 when it is advertised
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    described = admin.describe_cluster(request_timeout=10).result(30)
    assert [(n.id, n.port, n.rack) for n in described.nodes] == [(0, b.port, "r1")]
    assert described.controller.id == 0


def test_describe_log_dirs_sizes_and_selection(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(10):
        producer.produce(topic_name, value=b"x" * 200, partition=1)
    assert producer.flush(30) == 0
    with WireClient(broker.bootstrap, 10000) as client:
        everything = client.request(35, {"topics": None})
        chosen = client.request(35, {"topics": [{"topic": topic_name, "partitions": [1, 7]}]})
    [result] = everything["results"]
    assert result["error_code"] == 0 and result["log_dir"].startswith("/")
    assert result["total_bytes"] >= result["usable_bytes"] > 0
    mine = {p["partition_index"]: p for t in result["topics"] if t["name"] == topic_name
            for p in t["partitions"]}
    assert set(mine) == {0, 1}
    assert mine[0]["partition_size"] == 0
    assert mine[1]["partition_size"] > 2000
    assert mine[1]["offset_lag"] == 0 and mine[1]["is_future_key"] is False
    # only the named partitions this broker holds (partition 7 does not exist)
    [only] = chosen["results"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in only["topics"]] == [(topic_name, [1])]
