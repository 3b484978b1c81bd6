"""Configs of entities other than topics (/config/brokers/<id>, /config/brokers/<default>)
on both backends: stored, watched (level-triggered), kept across a restart (embedded)
and written in Kafka's layout with a change notification (ZooKeeper)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pybroker.coordination.embedded import EmbeddedBackend
from tests.coordination.conftest import Cluster, eventually

pytestmark = pytest.mark.anyio


async def test_broker_configs_are_stored_and_watched(cluster: Cluster) -> None:
    a = await cluster.client()
    b = await cluster.client()
    seen: list[dict[str, dict[str, str]]] = []
    await b.watch_entity_configs("brokers", seen.append)
    assert seen == [{}]  # the current value first
    assert await a.entity_configs("brokers", "<default>") == {}
    await a.set_entity_configs("brokers", "<default>", {"log.retention.ms": "1000"})
    await a.set_entity_configs("brokers", "2", {"log.segment.bytes": "4096"})
    await eventually(lambda: seen[-1] == {"<default>": {"log.retention.ms": "1000"},
                                          "2": {"log.segment.bytes": "4096"}},
                     "both entities to reach the watch")
    await a.set_entity_configs("brokers", "<default>", {})
    await eventually(lambda: seen[-1].get("<default>") == {}, "the default's removal")
    assert await b.entity_configs("brokers", "2") == {"log.segment.bytes": "4096"}


async def test_unknown_entity_type_is_refused(cluster: Cluster) -> None:
    a = await cluster.client()
    with pytest.raises(ValueError):
        await a.entity_configs("planets", "x")


async def test_embedded_keeps_entity_configs_across_restart(tmp_path: Path) -> None:
    first = EmbeddedBackend(tmp_path, broker_id=0)
    await first.start()
    await first.set_entity_configs("brokers", "<default>", {"log.retention.ms": "5"})
    await first.close()
    again = EmbeddedBackend(tmp_path, broker_id=0)
    await again.start()
    try:
        assert await again.entity_configs("brokers", "<default>") == {"log.retention.ms": "5"}
    finally:
        await again.close()


async def test_zookeeper_layout_is_kafkas(zk_cluster: Cluster) -> None:
    from kazoo.client import KazooClient

    a = await zk_cluster.client()
    await a.set_entity_configs("brokers", "<default>", {"log.retention.ms": "1000"})
    zk = KazooClient(hosts=zk_cluster.connect)
    zk.start(timeout=10)
    try:
        data, _ = zk.get("/config/brokers/<default>")
        assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "1000"}}
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0])
                   for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "brokers/<default>"} in changes
    finally:
        zk.stop()
        zk.close()
