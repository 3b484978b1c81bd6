"""Where security metadata lives: entity configs (SCRAM credentials, quotas) in
Kafka's ZooKeeper layout in cluster mode, or a file in the data dir otherwise.

ZooKeeper (as Kafka writes it, so its tools and pybroker's read each other's):
  /config/users/<sanitized user>            {"version":1,"config":{"SCRAM-SHA-512":"salt=..."}}
  /config/clients/<sanitized client id>     {"version":1,"config":{"producer_byte_rate":"..."}}
  /config/users/<user>/clients/<client>     user + client id quotas
  /config/changes/config_change_<seq>       {"version":2,"entity_path":"users/<user>"}
Names are sanitized as Kafka's Sanitizer does (URL-encoding, `*` and space as
%2A and %20). The embedded store keeps the same paths as keys of one JSON file,
`pybroker-security.json`, written atomically."""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path
from typing import Any, Protocol

SECURITY_FILE = "pybroker-security.json"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: Java URL-encoding, with %20 for space and %2A for *."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


class SecurityStore(Protocol):
    async def entity_config(self, entity_path: str) -> dict[str, str]:
        """The config of `users/<sanitized>` (or clients/..., users/../clients/..); {}."""
        ...

    async def set_entity_config(self, entity_path: str, config: dict[str, str]) -> None: ...

    async def entities(self, entity_type: str) -> list[str]:
        """Sanitized names under /config/<entity_type>."""
        ...


class FileSecurityStore:
    """The single node's store: one JSON file in the first log dir."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / SECURITY_FILE
        self._data: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._data is None:
            try:
                self._data = json.loads(self.path.read_text())
            except FileNotFoundError:
                self._data = {}
            self._data.setdefault("config", {})
        return self._data

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self._data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    async def entity_config(self, entity_path: str) -> dict[str, str]:
        return dict(self._load()["config"].get(entity_path, {}))

    async def set_entity_config(self, entity_path: str, config: dict[str, str]) -> None:
        data = self._load()
        if config:
            data["config"][entity_path] = dict(config)
        else:
            data["config"].pop(entity_path, None)
        self._save()

    async def entities(self, entity_type: str) -> list[str]:
        prefix = entity_type + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self._load()["config"]
                       if p.startswith(prefix)})


class ZooKeeperSecurityStore:
    """Cluster mode: Kafka's znodes (see the module docstring)."""

    def __init__(self, zk: Any) -> None:
        self.zk = zk

    async def entity_config(self, entity_path: str) -> dict[str, str]:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = await self.zk.call("get", "/config/" + entity_path)
        except NoNodeError:
            return {}
        if not data:
            return {}
        return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}

    async def set_entity_config(self, entity_path: str, config: dict[str, str]) -> None:
        from kazoo.exceptions import NodeExistsError, NoNodeError

        path = "/config/" + entity_path
        data = json.dumps({"version": 1, "config": config}).encode()
        try:
            await self.zk.call("set", path, data)
        except NoNodeError:
            try:
                await self.zk.call("create", path, data, makepath=True)
            except NodeExistsError:
                await self.zk.call("set", path, data)
        # Kafka's brokers learn of the change through this sequential notification
        change = json.dumps({"version": 2, "entity_path": entity_path}).encode()
        await self.zk.call("create", "/config/changes/config_change_", change, sequence=True,
                           makepath=True)

    async def entities(self, entity_type: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(await self.zk.call("get_children", "/config/" + entity_type))
        except NoNodeError:
            return []


_STORES: dict[int, SecurityStore] = {}


def store_for(backend: Any, data_dir: str) -> SecurityStore:
    """The store of a broker's coordination backend (one per backend)."""
    store = _STORES.get(id(backend))
    if store is None:
        zk = getattr(backend, "zk", None)
        store = ZooKeeperSecurityStore(zk) if zk is not None else FileSecurityStore(data_dir)
        _STORES[id(backend)] = store
    return store
