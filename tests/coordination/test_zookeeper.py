"""What only the ZooKeeper backend has: sessions, the chroot, Kafka's bytes in the znodes
as an operator (or a Kafka broker) reads them, and malformed znodes."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from kazoo.client import KazooClient

from pybroker.coordination import zktopics
from pybroker.coordination import znodes as zn
from pybroker.coordination.base import TopicAssignment
from pybroker.coordination.errors import ControllerMoved, CoordinationError, MalformedZNode
from pybroker.coordination.zookeeper import ZooKeeperBackend
from tests.cluster.proxy import Proxy
from tests.cluster.zookeeper import ZooKeeperServer
from tests.coordination.conftest import SESSION_TIMEOUT_MS, Cluster, eventually

pytestmark = pytest.mark.anyio


@pytest.fixture
def raw(zk_cluster: Cluster, zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    """A plain kazoo client in the test's chroot: zkCli.sh, as an operator would use it."""
    top = KazooClient(hosts=zookeeper.address)
    top.start(10)
    top.ensure_path(zk_cluster.chroot)
    top.stop()
    top.close()
    client = KazooClient(hosts=zk_cluster.connect)
    client.start(10)
    yield client
    client.stop()
    client.close()


def registration(port: int) -> zn.BrokerRegistration:
    return zn.BrokerRegistration.create([("PLAINTEXT", "127.0.0.1", port)])


async def test_znodes_hold_kafkas_json(zk_cluster: Cluster, raw: KazooClient) -> None:
    store = await zk_cluster.client()
    reg = zn.BrokerRegistration.create(
        [("PLAINTEXT", "10.0.0.1", 9092), ("INTERNAL", "::1", 9093)],
        security_protocols={"INTERNAL": "SASL_SSL"}, rack="rack-a")
    await store.register_broker(7, reg)
    lease = await store.try_elect_controller(7)
    assert lease is not None
    topic_id = uuid.uuid4()
    await store.create_topic(TopicAssignment(name="t", topic_id=topic_id,
                                             partitions={0: [7], 1: [7]}),
                             {"retention.ms": "5"}, lease)
    await store.create_partition_states("t", {0: zn.LeaderAndIsr(
        controller_epoch=lease.epoch, leader=7, leader_epoch=0, isr=[7])}, lease)
    await store.set_topic_configs("t", {"retention.ms": "6"})
    await store.request_topic_deletion("t")
    await store.notify_isr_change([("t", 0)])
    await store.allocate_producer_ids(7)

    def get(path: str) -> bytes:
        return raw.get(path)[0]

    assert sorted(raw.get_children("/brokers/ids")) == ["7"]
    broker = json.loads(get("/brokers/ids/7"))
    assert set(broker) == {"listener_security_protocol_map", "endpoints", "rack", "jmx_port",
                           "host", "timestamp", "port", "version", "features"}
    assert broker["version"] == 5
    assert broker["endpoints"] == ["PLAINTEXT://10.0.0.1:9092", "INTERNAL://[::1]:9093"]
    assert broker["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                        "INTERNAL": "SASL_SSL"}
    assert (broker["host"], broker["port"], broker["rack"]) == ("10.0.0.1", 9092, "rack-a")
    assert broker["jmx_port"] == -1 and broker["features"] == {}
    assert broker["timestamp"].isdigit()
    assert raw.exists("/brokers/ids/7").ephemeralOwner == store.session_id

    controller = json.loads(get("/controller"))
    assert set(controller) == {"version", "brokerid", "timestamp", "kraftControllerEpoch"}
    assert (controller["version"], controller["brokerid"]) == (2, 7)
    assert controller["kraftControllerEpoch"] == -1
    assert get("/controller_epoch") == str(lease.epoch).encode()
    assert raw.exists("/controller_epoch").version == lease.epoch_zk_version

    topic = json.loads(get("/brokers/topics/t"))
    assert topic == {"version": 3, "topic_id": zn.kafka_uuid(topic_id),
                     "partitions": {"0": [7], "1": [7]},
                     "adding_replicas": {}, "removing_replicas": {}}
    assert len(topic["topic_id"]) == 22
    assert json.loads(get("/brokers/topics/t/partitions/0/state")) == {
        "controller_epoch": lease.epoch, "leader": 7, "version": 1, "leader_epoch": 0,
        "isr": [7]}
    assert json.loads(get("/config/topics/t")) == {"version": 1, "config": {"retention.ms": "6"}}
    assert json.loads(get("/config/changes/config_change_0000000000")) == {
        "version": 2, "entity_path": "topics/t"}
    assert raw.get("/admin/delete_topics/t")[0] in (b"", None)
    (isr_change,) = raw.get_children("/isr_change_notification")
    assert isr_change.startswith("isr_change_")
    assert json.loads(get(f"/isr_change_notification/{isr_change}")) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0}]}
    assert json.loads(get("/cluster/id")) == {"version": "1", "id": store.cluster_id}
    assert json.loads(get("/latest_producer_id_block")) == {
        "version": 1, "broker": 7, "block_start": "0", "block_end": "999"}
    for path in zn.PERSISTENT_PATHS:
        assert raw.exists(path), path


ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")


@pytest.mark.skipif(not ZKCLI.exists(), reason="zkCli.sh is not installed")
async def test_zkcli_shows_the_registration(zk_cluster: Cluster,
                                            zookeeper: ZooKeeperServer) -> None:
    """An operator's habit: `zkCli.sh ls /brokers/ids`, then `get /brokers/ids/<id>`."""
    store = await zk_cluster.client()
    await store.register_broker(4, registration(9092))

    def zkcli(*command: str) -> str:
        done = subprocess.run([str(ZKCLI), "-server", zookeeper.address, *command],
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip().splitlines()[-1]  # the answer is the last line

    assert await anyio.to_thread.run_sync(zkcli, "ls", f"{zk_cluster.chroot}/brokers/ids") == "[4]"
    shown = json.loads(await anyio.to_thread.run_sync(
        zkcli, "get", f"{zk_cluster.chroot}/brokers/ids/4"))
    assert shown["version"] == 5 and shown["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]


async def test_chroot_is_created_and_used(zk_cluster: Cluster, zookeeper: ZooKeeperServer,
                                          ) -> None:
    nested = f"{zk_cluster.chroot}/pybroker/cluster-a"
    store = await zk_cluster.client(zookeeper.connect_string(nested))
    await store.register_broker(3, registration(9092))
    top = KazooClient(hosts=zookeeper.address)
    top.start(10)
    try:
        assert top.exists(f"{nested}/brokers/ids/3")
        assert top.exists(f"{nested}/cluster/id")
        assert not top.exists("/brokers/ids/3")  # nothing outside the chroot
    finally:
        top.stop()
        top.close()
    # a second broker with the same connect string shares the cluster
    other = await zk_cluster.client(zookeeper.connect_string(nested))
    assert other.cluster_id == store.cluster_id
    assert set(await other.live_brokers()) == {3}


async def test_session_expiry_then_reregistration(zk_cluster: Cluster, raw: KazooClient,
                                                  ) -> None:
    store = await zk_cluster.client()
    watcher = await zk_cluster.client()
    assert isinstance(store, ZooKeeperBackend)
    events: list[str] = []
    store.on_session_lost(lambda: events.append("lost"))
    store.on_session_reestablished(lambda: events.append("reestablished"))
    reg = registration(9092)
    await store.register_broker(1, reg)
    lease = await store.try_elect_controller(1)
    assert lease is not None
    seen: list[dict[int, zn.BrokerRegistration]] = []
    await store.watch_brokers(seen.append)
    old_session = store.session_id

    # the known trick: a second client joins the session with its id and password and
    # closes it, which expires it for the first client
    session_id, password = store.zk.kazoo.client_id
    thief = KazooClient(hosts=zk_cluster.connect, client_id=(session_id, password))
    await anyio.to_thread.run_sync(thief.start, 10)
    await anyio.to_thread.run_sync(thief.stop)
    thief.close()

    await eventually(lambda: events[:2] == ["lost", "reestablished"],
                     "the session lost and re-established callbacks")
    assert store.session_id not in (None, old_session)
    # re-registered by the backend, with the new session owning the ephemeral
    assert set(await watcher.live_brokers()) == {1}
    assert raw.exists("/brokers/ids/1").ephemeralOwner == store.session_id
    assert seen[-1] == {1: reg}  # the watch was re-armed: it still works
    await watcher.register_broker(2, registration(9093))
    await eventually(lambda: set(seen[-1]) == {1, 2}, "a change after the expiry")
    # /controller went with the old session and is not re-created: the lease is void
    assert await watcher.controller_id() is None
    assert await watcher.try_elect_controller(2) is not None


async def test_cut_link_longer_than_the_session_expires_it(zk_cluster: Cluster,
                                                           zookeeper: ZooKeeperServer,
                                                           raw: KazooClient) -> None:
    with Proxy((zookeeper.host, zookeeper.port)) as proxy:
        store = await zk_cluster.client(f"{proxy.address}{zk_cluster.chroot}")
        events: list[str] = []
        store.on_session_lost(lambda: events.append("lost"))
        store.on_session_reestablished(lambda: events.append("reestablished"))
        await store.register_broker(1, registration(9092))
        assert raw.exists("/brokers/ids/1")

        proxy.cut("freeze")  # packets vanish: only the server's session timer notices
        await eventually(lambda: raw.exists("/brokers/ids/1") is None,
                         "ZooKeeper to expire the cut-off session")
        # the client cannot hear it from a server; it presumes its session expired once
        # the connection has been lost for a whole session timeout (as Curator 3 does)
        await eventually(lambda: events == ["lost"], "the client to presume the expiry")
        proxy.cut("drop")  # its reconnect attempts are refused meanwhile
        await anyio.sleep(0.3)
        proxy.restore()
        await eventually(lambda: events == ["lost", "reestablished"], "lost, then re-established")
        await eventually(lambda: raw.exists("/brokers/ids/1") is not None, "re-registration")


async def test_a_short_cut_keeps_the_session(zk_cluster: Cluster, zookeeper: ZooKeeperServer,
                                             raw: KazooClient) -> None:
    with Proxy((zookeeper.host, zookeeper.port)) as proxy:
        store = await zk_cluster.client(f"{proxy.address}{zk_cluster.chroot}")
        events: list[str] = []
        store.on_session_lost(lambda: events.append("lost"))
        seen: list[set[str]] = []
        await store.watch_topic_deletions(seen.append)
        await store.register_broker(1, registration(9092))
        session = store.session_id

        proxy.cut("drop")  # the client notices at once and reconnects within its session
        await anyio.sleep(0.3)
        proxy.restore()
        await eventually(lambda: store.zk.kazoo.connected, "the reconnect")
        assert store.session_id == session and events == []
        # the watch was re-armed on the reconnect: a change made by another client shows
        raw.create("/admin/delete_topics/x")
        await eventually(lambda: seen[-1] == {"x"}, "the watch to fire after the reconnect")


async def test_a_connection_zookeeper_never_answers_is_given_up_not_the_start(
        zk_cluster: Cluster, zookeeper: ZooKeeperServer) -> None:
    """A ZooKeeper still starting can accept a connection and then neither answer nor
    close it (ZOOKEEPER-5051: a broker started with its ZooKeeper waited out its whole
    connection timeout on that one connection and exited). That connection is given up
    after a third of the timeout and the next one serves."""
    with Proxy((zookeeper.host, zookeeper.port)) as proxy:
        proxy.stall_next(1)
        store = ZooKeeperBackend(f"{proxy.address}{zk_cluster.chroot}",
                                 session_timeout_ms=SESSION_TIMEOUT_MS,
                                 connection_timeout_ms=SESSION_TIMEOUT_MS)
        try:
            await store.start()
            assert proxy.stalled == 1
            await store.register_broker(1, registration(9092))
            assert set(await store.live_brokers()) == {1}
        finally:
            await store.close()


async def test_malformed_znodes_are_clear_errors(zk_cluster: Cluster, raw: KazooClient) -> None:
    store = await zk_cluster.client()
    seen: list[dict[str, TopicAssignment]] = []
    await store.watch_topics(seen.append)
    raw.create("/brokers/topics/bad", b'{"version":3,"partitions":{"x":[1]}}')
    with pytest.raises(MalformedZNode, match="/brokers/topics/bad") as exc:
        await store.topic_assignments()
    assert exc.value.path == "/brokers/topics/bad"
    raw.set("/brokers/topics/bad", b"not json")
    with pytest.raises(MalformedZNode, match="/brokers/topics/bad"):
        await store.topic_assignments()

    raw.create("/brokers/ids/5", b'{"version":5,"host":"h","port":1}')  # no endpoints
    with pytest.raises(MalformedZNode, match="/brokers/ids/5.*endpoints"):
        await store.live_brokers()
    raw.ensure_path("/controller_epoch")
    raw.set("/controller_epoch", b"one")
    with pytest.raises(MalformedZNode, match="/controller_epoch"):
        await store.controller_epoch()
    raw.set("/latest_producer_id_block",
            b'{"version":1,"broker":0,"block_start":"a","block_end":"b"}')
    with pytest.raises(MalformedZNode, match="/latest_producer_id_block"):
        await store.allocate_producer_ids(0)

    # a watch logs the bad topic and keeps working for the others
    good = TopicAssignment(name="good", topic_id=uuid.uuid4(), partitions={0: [1]})
    await store.create_topic(good, {}, lease=None)
    await eventually(lambda: seen[-1] == {"good": good}, "the good topic in the watch")


async def test_big_writes_span_several_fenced_multis(zk_cluster: Cluster, raw: KazooClient,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zktopics, "OPS_PER_MULTI", 7)  # 40 partitions: many multis
    store = await zk_cluster.client()
    lease = await store.try_elect_controller(1)
    assert lease is not None
    await store.create_topic(TopicAssignment(name="big", topic_id=uuid.uuid4(),
                                             partitions={p: [1] for p in range(40)}), {}, lease)
    states = {p: zn.LeaderAndIsr(controller_epoch=lease.epoch, leader=1, leader_epoch=0,
                                 isr=[1]) for p in range(40)}
    assert await store.create_partition_states("big", states, lease) == dict.fromkeys(states, 0)
    assert len(await store.partition_states("big")) == 40
    await store.request_topic_deletion("big")
    await store.delete_topic("big", lease)
    assert not raw.exists("/brokers/topics/big")
    assert not raw.exists("/admin/delete_topics/big")
    assert not raw.exists("/config/topics/big")


async def test_unexpected_zookeeper_errors_are_coordination_errors(
        zk_cluster: Cluster, raw: KazooClient) -> None:
    store = await zk_cluster.client()
    raw.delete("/brokers/ids")  # an operator removed a path Kafka creates at startup
    with pytest.raises(CoordinationError, match="live_brokers.*NoNode"):
        await store.live_brokers()


async def test_kafka_written_topic_without_id_and_state_with_recovery(
        zk_cluster: Cluster, raw: KazooClient) -> None:
    """Bytes as Kafka 2.x/3.x brokers wrote them decode (no topic_id before 2.8; a
    leader_recovery_state after an unclean election)."""
    store = await zk_cluster.client()
    raw.create("/brokers/topics/old", b'{"version":1,"partitions":{"0":[1,2]}}')
    raw.create("/brokers/topics/old/partitions/0/state", makepath=True,
               value=b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":4,'
                     b'"isr":[2],"leader_recovery_state":1}')
    (old,) = (await store.topic_assignments()).values()
    assert old.topic_id == uuid.UUID(int=0) and old.partitions == {0: [1, 2]}
    (state, version), = (await store.partition_states("old")).values()
    assert (state.leader, state.leader_epoch, state.isr, state.recovery_state) == (
        2, 4, [2], zn.RECOVERING)
    assert version == 0


async def test_a_restarted_broker_removes_only_what_its_previous_session_holds(
        zk_cluster: Cluster, raw: KazooClient) -> None:
    """The previous process (its session still alive on the server) registered broker 1
    and is controller; the restarted broker names that session and removes both, at
    once. Naming any other session removes nothing."""
    previous = await zk_cluster.client()
    await previous.register_broker(1, registration(9001))
    assert await previous.try_elect_controller(1) is not None
    other = await zk_cluster.client()
    await other.register_broker(2, registration(9002))
    restarted = await zk_cluster.client()

    assert previous.session_id is not None and other.session_id is not None
    assert not await restarted.remove_stale_registration(1, other.session_id)
    assert not await restarted.remove_stale_registration(2, previous.session_id)
    assert raw.exists("/brokers/ids/1") and raw.exists("/brokers/ids/2")
    assert raw.exists("/controller")

    assert await restarted.remove_stale_registration(1, previous.session_id)
    assert raw.exists("/brokers/ids/1") is None and raw.exists("/controller") is None
    assert raw.exists("/brokers/ids/2") is not None
    epoch = await restarted.register_broker(1, registration(9001))
    assert raw.exists("/brokers/ids/1").czxid == epoch
    assert raw.exists("/brokers/ids/1").ephemeralOwner == restarted.session_id


async def test_a_gone_controller_is_removed_but_never_its_successor(
        zk_cluster: Cluster, raw: KazooClient) -> None:
    first = await zk_cluster.client()
    lease = await first.try_elect_controller(1)
    assert lease is not None
    witness = await zk_cluster.client()
    assert not await witness.remove_dead_controller(2)  # not the controller
    assert raw.exists("/controller") is not None
    assert await witness.remove_dead_controller(1)
    assert raw.exists("/controller") is None

    # another broker is elected (a new epoch): a late removal aimed at broker 1 leaves
    # its successor alone
    second = await zk_cluster.client()
    again = await second.try_elect_controller(3)
    assert again is not None and again.epoch == lease.epoch + 1
    assert not await witness.remove_dead_controller(1)
    assert raw.exists("/controller") is not None
    # the old controller's writes are fenced by the epoch it held
    with pytest.raises(ControllerMoved):
        await first.create_topic(
            TopicAssignment(name="t", topic_id=uuid.uuid4(), partitions={0: [1]}), {}, lease)


async def test_a_topic_whose_znode_turns_malformed_is_not_taken_for_deleted(
        zk_cluster: Cluster, raw: KazooClient) -> None:
    """Brokers delete the logs of a topic that leaves the topics watch: a znode that
    cannot be read (a bad write, a tool's) keeps its last readable assignment; only a
    gone znode deletes the topic."""
    store = await zk_cluster.client()
    seen: list[dict[str, TopicAssignment]] = []
    await store.watch_topics(seen.append)
    kept = TopicAssignment(name="kept", topic_id=uuid.uuid4(), partitions={0: [1]})
    await store.create_topic(kept, {}, lease=None)
    await eventually(lambda: seen and "kept" in seen[-1], "the topic in the watch")
    raw.set("/brokers/topics/kept", b"not json")
    other = TopicAssignment(name="other", topic_id=uuid.uuid4(), partitions={0: [1]})
    await store.create_topic(other, {}, lease=None)  # a later change: the watch has re-read by then
    await eventually(lambda: "other" in seen[-1], "the other topic in the watch")
    assert all(view.get("kept") == kept for view in seen if "other" in view), seen[-1]
    raw.delete("/brokers/topics/kept")
    await eventually(lambda: "kept" not in seen[-1], "the deleted topic gone from the watch")
