"""Where security metadata lives: entity configs (SCRAM credentials, quotas) in
Kafka's ZooKeeper layout in cluster mode, or a file in the data dir otherwise.

ZooKeeper (as Kafka writes it, so its tools and pybroker's read each other's):
  /config/users/<sanitized user>            {"version":1,"config":{"SCRAM-SHA-512":"salt=..."}}
  /config/clients/<sanitized client id>     {"version":1,"config":{"producer_byte_rate":"..."}}
  /config/users/<user>/clients/<client>     user + client id quotas
  /config/changes/config_change_<seq>       {"version":2,"entity_path":"users/<user>"}
  /kafka-acl/<ResourceType>/<name>          literal ACLs: {"version":1,"acls":[{"principal":
                                            "User:a","permissionType":"Allow","operation":
                                            "Read","host":"*"}]}
  /kafka-acl-extended/prefixed/<Type>/<name> prefixed ACLs, same payload
  /kafka-acl-changes/acl_changes_<seq>, /kafka-acl-extended-changes/acl_changes_<seq>
Names are sanitized as Kafka's Sanitizer does (URL-encoding, `*` and space as
%2A and %20). The embedded store keeps the same paths as keys of one JSON file,
`pybroker-security.json`, written atomically."""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path
from typing import Any, Protocol

from pybroker.security.acls import (
    OPERATION_FROM_ZK,
    OPERATION_ZK,
    PERMISSION_FROM_ZK,
    PERMISSION_ZK,
    RESOURCE_FROM_ZK,
    RESOURCE_ZK,
    Entry,
    Pattern,
    PatternType,
)

SECURITY_FILE = "pybroker-security.json"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: Java URL-encoding, with %20 for space and %2A for *."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def acl_path(pattern: Pattern) -> str:
    kind = RESOURCE_ZK[pattern.resource_type]
    if pattern.pattern_type == PatternType.PREFIXED:
        return f"/kafka-acl-extended/prefixed/{kind}/{pattern.name}"
    return f"/kafka-acl/{kind}/{pattern.name}"


def encode_acls(entries: set[Entry]) -> bytes:
    return json.dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": PERMISSION_ZK[e.permission],
         "operation": OPERATION_ZK[e.operation], "host": e.host} for e in sorted(entries)]}
    ).encode()


def decode_acls(data: bytes) -> set[Entry]:
    out = set()
    for item in json.loads(data or b"{}").get("acls", []):
        try:
            out.add(Entry(item["principal"], item["host"], OPERATION_FROM_ZK[item["operation"]],
                          PERMISSION_FROM_ZK[item["permissionType"]]))
        except KeyError:
            continue
    return out


class SecurityStore(Protocol):
    async def entity_config(self, entity_path: str) -> dict[str, str]:
        """The config of `users/<sanitized>` (or clients/..., users/../clients/..); {}."""
        ...

    async def set_entity_config(self, entity_path: str, config: dict[str, str]) -> None: ...

    async def entities(self, entity_type: str) -> list[str]:
        """Sanitized names under /config/<entity_type>."""
        ...

    async def all_entity_configs(self) -> dict[str, dict[str, str]]:
        """Every users/..., clients/... config by path."""
        ...

    async def config_version(self) -> object:
        """Changes whenever any broker changes an entity config (None: only this one)."""
        ...

    async def load_acls(self) -> dict[Pattern, set[Entry]]: ...

    async def set_acls(self, pattern: Pattern, entries: set[Entry]) -> None: ...

    async def acl_version(self) -> object:
        """Changes whenever any broker changes an ACL (None: only this broker does)."""
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
            self._data.setdefault("acls", {})
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


    async def all_entity_configs(self) -> dict[str, dict[str, str]]:
        return {p: dict(c) for p, c in self._load()["config"].items()}

    async def config_version(self) -> object:
        return None

    async def load_acls(self) -> dict[Pattern, set[Entry]]:
        out = {}
        for path, payload in self._load()["acls"].items():
            pattern = _pattern_of(path)
            if pattern is not None:
                out[pattern] = decode_acls(json.dumps(payload).encode())
        return {p: e for p, e in out.items() if e}

    async def set_acls(self, pattern: Pattern, entries: set[Entry]) -> None:
        data = self._load()
        if entries:
            data["acls"][acl_path(pattern)] = json.loads(encode_acls(entries))
        else:
            data["acls"].pop(acl_path(pattern), None)
        self._save()

    async def acl_version(self) -> object:
        return None


def _pattern_of(path: str) -> Pattern | None:
    parts = path.strip("/").split("/")
    if parts[0] == "kafka-acl" and len(parts) >= 3:
        kind, name, ptype = parts[1], "/".join(parts[2:]), PatternType.LITERAL
    elif parts[0] == "kafka-acl-extended" and len(parts) >= 4 and parts[1] == "prefixed":
        kind, name, ptype = parts[2], "/".join(parts[3:]), PatternType.PREFIXED
    else:
        return None
    resource = RESOURCE_FROM_ZK.get(kind)
    return Pattern(resource, name, ptype) if resource is not None else None


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

    async def _put(self, path: str, data: bytes) -> None:
        """Set the znode's data, creating it (and its parents) when it does not exist."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        try:
            await self.zk.call("set", path, data)
        except NoNodeError:
            try:
                await self.zk.call("create", path, data, makepath=True)
            except NodeExistsError:  # created by another writer meanwhile
                await self.zk.call("set", path, data)

    async def set_entity_config(self, entity_path: str, config: dict[str, str]) -> None:
        await self._put("/config/" + entity_path,
                        json.dumps({"version": 1, "config": config}).encode())
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


    async def all_entity_configs(self) -> dict[str, dict[str, str]]:
        from kazoo.exceptions import NoNodeError

        out = {}
        for kind in ("users", "clients"):
            for name in await self.entities(kind):
                path = f"{kind}/{name}"
                out[path] = await self.entity_config(path)
                if kind == "users":
                    try:
                        clients = await self.zk.call("get_children", f"/config/{path}/clients")
                    except NoNodeError:
                        clients = []
                    for client in clients:
                        sub = f"{path}/clients/{client}"
                        out[sub] = await self.entity_config(sub)
        return out

    async def config_version(self) -> object:
        from kazoo.exceptions import NoNodeError

        try:
            return max(await self.zk.call("get_children", "/config/changes"), default="")
        except NoNodeError:
            return ""

    async def load_acls(self) -> dict[Pattern, set[Entry]]:
        from kazoo.exceptions import NoNodeError

        out: dict[Pattern, set[Entry]] = {}
        for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
            try:
                kinds = await self.zk.call("get_children", root)
            except NoNodeError:
                continue
            for kind in kinds:
                try:
                    names = await self.zk.call("get_children", f"{root}/{kind}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = _pattern_of(f"{root}/{kind}/{name}")
                    if pattern is None:
                        continue
                    try:
                        data, _ = await self.zk.call("get", f"{root}/{kind}/{name}")
                    except NoNodeError:
                        continue
                    entries = decode_acls(data)
                    if entries:
                        out[pattern] = entries
        return out

    async def set_acls(self, pattern: Pattern, entries: set[Entry]) -> None:
        await self._put(acl_path(pattern), encode_acls(entries))
        kind = RESOURCE_ZK[pattern.resource_type]
        if pattern.pattern_type == PatternType.PREFIXED:
            change = json.dumps({"version": 1, "resourceType": kind, "name": pattern.name,
                                 "patternType": "PREFIXED"}).encode()
            root = "/kafka-acl-extended-changes"
        else:
            change, root = f"{kind}:{pattern.name}".encode(), "/kafka-acl-changes"
        await self.zk.call("create", f"{root}/acl_changes_", change, sequence=True,
                           makepath=True)

    async def acl_version(self) -> object:
        """The newest change notifications (Kafka's brokers delete old ones)."""
        from kazoo.exceptions import NoNodeError

        version = []
        for root in ("/kafka-acl-changes", "/kafka-acl-extended-changes"):
            try:
                children = await self.zk.call("get_children", root)
            except NoNodeError:
                children = []
            version.append(max(children, default=""))
        return tuple(version)


_STORES: dict[int, SecurityStore] = {}


def store_for(backend: Any, data_dir: str) -> SecurityStore:
    """The store of a broker's coordination backend (one per backend)."""
    store = _STORES.get(id(backend))
    if store is None:
        zk = getattr(backend, "zk", None)
        store = ZooKeeperSecurityStore(zk) if zk is not None else FileSecurityStore(data_dir)
        _STORES[id(backend)] = store
    return store
