"""Entity configs on ZooKeeper: /config/<entity type>/<name> for entities other than
topics (brokers now; users and clients take the same path), a mixin of
ZooKeeperBackend as zktopics.py is.

Layout and payload are Kafka's (AdminZkClient.changeEntityConfig): the znode holds
{"version":1,"config":{...}} and every change also creates
/config/changes/config_change_<seq> naming "<type>/<name>", so Kafka's own brokers
and tools on the same ensemble see the change. The cluster-wide broker default is the
entity `<default>`. Brokers here watch the config znodes themselves (a children watch
on /config/<type> with a data watch per entity): level-triggered, so a change made while
a broker was away is seen when it comes back, with no notification sequence to track."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from pybroker.coordination import znodes as zn
from pybroker.coordination.base import check_entity_type
from pybroker.coordination.errors import CoordinationUnavailable
from pybroker.coordination.watches import Callback, Dispatcher, WatchHandle, invoke
from pybroker.coordination.zkclient import AsyncKazoo, first_error, kazoo_errors_translated
from pybroker.coordination.zkwatches import ChildrenDataWatch, ZkWatch

log = logging.getLogger(__name__)

#: retries of a create-or-set that raced another writer
RACE_RETRIES_MAX = 100


def entity_config_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{name}"


async def write_config_znode(zk: AsyncKazoo, path: str, configs: Mapping[str, str],
                             entity_path: str, *, must_exist: str | None = None,
                             missing: Callable[[], Exception] | None = None) -> None:
    """Create or replace the config znode `path` and announce the change under
    /config/changes, in one multi (Kafka's AdminZkClient.changeEntityConfig; the
    notification names `entity_path`, "<type>/<name>"). With `must_exist` the multi
    first checks that znode (a topic's own) and raises `missing()` when it is gone."""
    data = zn.encode(zn.TopicConfigZNode(config=dict(configs)))
    notification = zn.encode(zn.ConfigChangeNotification(entity_path=entity_path))
    exists = await zk.call("exists", path) is not None
    if not exists:
        # the first entity of a type no broker creates at start (groups): Kafka
        # creates a config znode with its parents (setOrCreateEntityConfigs)
        await zk.call("ensure_path", path.rpartition("/")[0])
    write_at = 0 if must_exist is None else 1
    for _ in range(RACE_RETRIES_MAX):
        txn = zk.kazoo.transaction()
        if must_exist is not None:
            txn.check(must_exist, -1)
        if exists:
            txn.set_data(path, data)
        else:
            txn.create(path, data)
        txn.create(f"{zn.CONFIG_CHANGES}/{zn.CONFIG_CHANGE_PREFIX}", notification,
                   sequence=True)
        failed = first_error(await zk.commit(txn))
        if failed is None:
            return
        index, error = failed
        if index < write_at and missing is not None:
            raise missing()
        if index == write_at and isinstance(error, (NodeExistsError, NoNodeError)):
            exists = not exists  # another writer created or deleted it meanwhile
            continue
        raise error
    raise CoordinationUnavailable(f"setting the configs of {entity_path} kept racing")


@kazoo_errors_translated
class EntityConfigOps:
    """Entity config operations of ZooKeeperBackend (see the module doc)."""

    zk: AsyncKazoo
    _dispatcher: Dispatcher

    async def _add_watch(self, watch: ZkWatch) -> WatchHandle:
        raise NotImplementedError  # ZooKeeperBackend's

    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        """The entity's stored configs ({} when none)."""
        check_entity_type(entity_type)
        path = entity_config_path(entity_type, name)
        try:
            data, _ = await self.zk.call("get", path)
        except NoNodeError:
            return {}
        return zn.decode(path, data, zn.TopicConfigZNode).config

    async def set_entity_configs(self, entity_type: str, name: str,
                                 configs: Mapping[str, str]) -> None:
        """Replace the entity's configs and announce the change (/config/changes)."""
        check_entity_type(entity_type)
        await write_config_znode(self.zk, entity_config_path(entity_type, name), configs,
                                 f"{entity_type}/{name}")

    async def watch_entity_configs(self, entity_type: str, callback: Callback) -> WatchHandle:
        """callback(dict name -> configs) with every entity of the type, then after
        each change."""
        check_entity_type(entity_type)

        def decode(path: str, data: bytes | None, stat: ZnodeStat) -> dict[str, str]:
            return zn.decode(path, data, zn.TopicConfigZNode).config

        async def on_set(values: dict[str, tuple[Any, int]]) -> None:
            await invoke(callback, {name: dict(v[0]) for name, v in values.items()
                                    if v[0] is not None})

        return await self._add_watch(ChildrenDataWatch(
            self.zk, self._dispatcher, f"/config/{entity_type}",
            data_path=lambda name: entity_config_path(entity_type, name), decode=decode,
            on_set=on_set))
