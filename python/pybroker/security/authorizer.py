"""The ACL authorizer (Kafka's AclAuthorizer / StandardAuthorizer rules), selected
by `authorizer.class.name`:

- `super.users` (`User:a;User:b`) may do everything;
- a DENY entry that matches (principal or User:*, host or *, the operation or ALL)
  wins over any ALLOW;
- an ALLOW entry for the operation, or ALL, or one that implies it (READ, WRITE,
  DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
- a resource no ACL matches at all is allowed only with
  `allow.everyone.if.no.acl.found=true`.
Patterns: LITERAL names (`*` is every resource of the type) and PREFIXED ones.
ACLs live in the metadata store (pybroker.security.store); this keeps them in
memory and reloads them when another broker changes them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from pybroker.config import BrokerConfig, ConfigError
from pybroker.security.acls import (
    IMPLIES,
    Entry,
    Filter,
    Operation,
    Pattern,
    PatternType,
    Permission,
    ResourceType,
    WILDCARD,
)
from pybroker.security.store import SecurityStore

log = logging.getLogger(__name__)

#: Kafka's authorizer classes, all served by this one
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer",
                      "kafka.security.auth.SimpleAclAuthorizer")
#: how often a broker in a cluster looks for ACL changes made through another broker
REFRESH_INTERVAL_S = 1.0


def enabled(config: BrokerConfig) -> bool:
    name = config["authorizer.class.name"]
    if not name:
        return False
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name: unknown authorizer {name} (pybroker "
                          f"serves {', '.join(AUTHORIZER_CLASSES[:2])})")
    return True


def super_users(text: str) -> frozenset[str]:
    return frozenset(p.strip() for p in text.split(";") if p.strip())


class Authorizer:
    def __init__(self, config: BrokerConfig, store: SecurityStore) -> None:
        self.super_users = super_users(config["super.users"])
        self.allow_if_no_acl = bool(config["allow.everyone.if.no.acl.found"])
        self.store = store
        self.acls: dict[Pattern, set[Entry]] = {}
        self._loaded = False
        self._version: object = None
        self._refresher: asyncio.Task[None] | None = None

    async def ready(self) -> None:
        if not self._loaded:
            self.acls = await self.store.load_acls()
            self._version = await self.store.acl_version()
            self._loaded = True
            if self._version is not None and self._refresher is None:
                self._refresher = asyncio.get_running_loop().create_task(self._refresh())

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_INTERVAL_S)
            try:
                version = await self.store.acl_version()
                if version != self._version:
                    self.acls = await self.store.load_acls()
                    self._version = version
            except Exception as exc:  # the store may be unreachable for a while
                log.info("reloading ACLs: %s", exc)

    # --- decisions -----------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        matching = [entries for pattern, entries in self.acls.items()
                    if pattern.matches(resource_type, name)]
        if not matching:
            return self.allow_if_no_acl
        wanted = (operation, Operation.ALL, *IMPLIES.get(operation, ()))
        allowed = False
        for entries in matching:
            for entry in entries:
                if entry.principal not in (principal, "User:*") or entry.host not in (host, "*"):
                    continue
                if entry.permission == Permission.DENY and entry.operation in (
                        operation, Operation.ALL):
                    return False
                if entry.permission == Permission.ALLOW and entry.operation in wanted:
                    allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: Operation,
                      resource_type: ResourceType) -> bool:
        """May the principal do `operation` on some resource of the type (Kafka's
        authorizeByResourceType, KIP-679: an idempotent producer with WRITE on any topic)?
        Yes when an ALLOW binding for it is not covered by a DENY: a DENY on `*`, on the
        same literal name, or on a prefix of the allowed name or prefix."""
        if principal in self.super_users:
            return True

        def mine(entry: Entry) -> bool:
            return entry.principal in (principal, "User:*") and entry.host in (host, "*") \
                and entry.operation in (operation, Operation.ALL)

        allows, denies = [], []
        for pattern, entries in self.acls.items():
            if pattern.resource_type != resource_type:
                continue
            for entry in entries:
                if mine(entry):
                    (denies if entry.permission == Permission.DENY else allows).append(pattern)
        if not allows and not denies and not any(
                p.resource_type == resource_type for p in self.acls):
            return self.allow_if_no_acl

        def denied(allow: Pattern) -> bool:
            for deny in denies:
                if deny.pattern_type == PatternType.LITERAL and deny.name == WILDCARD:
                    return True
                if deny.pattern_type == PatternType.PREFIXED and allow.name.startswith(deny.name):
                    return True
                if deny.pattern_type == allow.pattern_type == PatternType.LITERAL \
                        and deny.name == allow.name:
                    return True
            return False

        return any(not denied(allow) for allow in allows)

    # --- the ACL APIs ----------------------------------------------------------------
    def describe(self, flt: Filter) -> dict[Pattern, list[Entry]]:
        out = {}
        for pattern, entries in sorted(self.acls.items()):
            if flt.matches_pattern(pattern):
                chosen = sorted(e for e in entries if flt.matches_entry(e))
                if chosen:
                    out[pattern] = chosen
        return out

    async def create(self, bindings: Iterable[tuple[Pattern, Entry]]) -> None:
        changed: dict[Pattern, set[Entry]] = {}
        for pattern, entry in bindings:
            entries = changed.setdefault(pattern, set(self.acls.get(pattern, ())))
            entries.add(entry)
        await self._write(changed)

    async def delete(self, flt: Filter) -> list[tuple[Pattern, Entry]]:
        removed = []
        changed: dict[Pattern, set[Entry]] = {}
        for pattern, entries in self.describe(flt).items():
            keep = set(self.acls[pattern]) - set(entries)
            changed[pattern] = keep
            removed.extend((pattern, e) for e in entries)
        await self._write(changed)
        return removed

    async def _write(self, changed: dict[Pattern, set[Entry]]) -> None:
        for pattern, entries in changed.items():
            await self.store.set_acls(pattern, entries)
            if entries:
                self.acls[pattern] = entries
            else:
                self.acls.pop(pattern, None)
        if changed:
            self._version = await self.store.acl_version()


def valid_binding(pattern: Pattern, entry: Entry) -> str | None:
    """Why a binding cannot be created (Kafka's INVALID_REQUEST messages), or None."""
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "Invalid resource type"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid pattern type"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != "kafka-cluster":
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if not pattern.name:
        return "Resource name must not be empty"
    if entry.operation in (Operation.ANY, Operation.UNKNOWN):
        return "Invalid operation"
    if entry.permission not in (Permission.ALLOW, Permission.DENY):
        return "Invalid permission type"
    if ":" not in entry.principal:
        return f"Could not parse principal from `{entry.principal}`"
    return None


_AUTHORIZERS: dict[int, Authorizer] = {}


def authorizer_for(config: BrokerConfig, backend: object) -> Authorizer | None:
    """The broker's authorizer (one per coordination backend), None when disabled."""
    if not enabled(config):
        return None
    found = _AUTHORIZERS.get(id(backend))
    if found is None:
        from pybroker.security.store import store_for

        found = Authorizer(config, store_for(backend, config.log_dirs[0]))
        _AUTHORIZERS[id(backend)] = found
    return found
