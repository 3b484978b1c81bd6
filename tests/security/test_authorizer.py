"""The authorizer's rules without a broker: deny wins, implied operations,
wildcards and prefixes, super users, allow.everyone.if.no.acl.found, and ACLs
surviving in the store in Kafka's ZooKeeper layout."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pybroker.config import BrokerConfig
from pybroker.security.acls import Entry, Filter, Operation, Pattern, PatternType, Permission
from pybroker.security.acls import ResourceType as R
from pybroker.security.authorizer import Authorizer
from pybroker.security.store import FileSecurityStore

ALLOW, DENY = Permission.ALLOW, Permission.DENY


def _authorizer(tmp_path: Path, **config: str) -> Authorizer:
    authorizer = Authorizer(BrokerConfig({"super.users": "User:admin", **config}),
                            FileSecurityStore(tmp_path))
    asyncio.run(authorizer.ready())
    return authorizer


def test_rules(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path)
    asyncio.run(authorizer.create([
        (Pattern(R.TOPIC, "orders"), Entry("User:alice", "*", Operation.READ, ALLOW)),
        (Pattern(R.TOPIC, "orders"), Entry("User:*", "*", Operation.WRITE, ALLOW)),
        (Pattern(R.TOPIC, "orders"), Entry("User:mallory", "*", Operation.ALL, DENY)),
        (Pattern(R.TOPIC, "pre-", PatternType.PREFIXED),
         Entry("User:bob", "*", Operation.ALL, ALLOW)),
        (Pattern(R.GROUP, "*"), Entry("User:alice", "10.0.0.1", Operation.READ, ALLOW)),
    ]))
    ok = authorizer.authorize
    assert ok("User:alice", "h", Operation.READ, R.TOPIC, "orders")
    assert ok("User:alice", "h", Operation.DESCRIBE, R.TOPIC, "orders")  # implied by READ
    assert not ok("User:alice", "h", Operation.DELETE, R.TOPIC, "orders")
    assert ok("User:carol", "h", Operation.WRITE, R.TOPIC, "orders")  # User:*
    assert not ok("User:mallory", "h", Operation.WRITE, R.TOPIC, "orders")  # deny wins
    assert ok("User:bob", "h", Operation.DELETE, R.TOPIC, "pre-x")
    assert not ok("User:bob", "h", Operation.READ, R.TOPIC, "prex")
    assert ok("User:alice", "10.0.0.1", Operation.READ, R.GROUP, "any-group")
    assert not ok("User:alice", "10.0.0.2", Operation.READ, R.GROUP, "any-group")
    assert ok("User:admin", "h", Operation.ALTER, R.CLUSTER, "kafka-cluster")
    assert not ok("User:alice", "h", Operation.READ, R.TOPIC, "no-acls")
    everyone = _authorizer(tmp_path / "b", **{"allow.everyone.if.no.acl.found": "true"})
    assert everyone.authorize("User:alice", "h", Operation.READ, R.TOPIC, "no-acls")


def test_acls_persist_in_kafkas_layout_and_delete_by_filter(tmp_path: Path) -> None:
    authorizer = _authorizer(tmp_path)
    asyncio.run(authorizer.create([
        (Pattern(R.TOPIC, "t"), Entry("User:alice", "*", Operation.READ, ALLOW)),
        (Pattern(R.TOPIC, "p", PatternType.PREFIXED),
         Entry("User:alice", "*", Operation.WRITE, ALLOW))]))
    stored = json.loads((tmp_path / "pybroker-security.json").read_text())["acls"]
    assert stored["/kafka-acl/Topic/t"] == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
         "host": "*"}]}
    assert "/kafka-acl-extended/prefixed/Topic/p" in stored
    again = _authorizer(tmp_path)
    assert again.acls == authorizer.acls
    removed = asyncio.run(again.delete(Filter(R.ANY, None, PatternType.PREFIXED, None, None,
                                              Operation.ANY, Permission.ANY)))
    assert [p.name for p, _ in removed] == ["p"]
    assert list(_authorizer(tmp_path).acls) == [Pattern(R.TOPIC, "t")]


def test_any_resource_of_a_type(tmp_path: Path) -> None:
    """KIP-679's question (InitProducerId without a transactional id): WRITE on some
    topic, unless a DENY covers every topic the principal may write."""
    authorizer = _authorizer(tmp_path)
    asyncio.run(authorizer.create([
        (Pattern(R.TOPIC, "logs-", PatternType.PREFIXED),
         Entry("User:alice", "*", Operation.WRITE, ALLOW)),
        (Pattern(R.TOPIC, "orders"), Entry("User:bob", "*", Operation.WRITE, ALLOW)),
        (Pattern(R.TOPIC, "ord", PatternType.PREFIXED),
         Entry("User:bob", "*", Operation.ALL, DENY)),
        (Pattern(R.TOPIC, "x"), Entry("User:carol", "*", Operation.WRITE, ALLOW)),
        (Pattern(R.TOPIC, "*"), Entry("User:carol", "*", Operation.WRITE, DENY)),
        (Pattern(R.TOPIC, "y"), Entry("User:dave", "*", Operation.READ, ALLOW)),
    ]))
    anyone = authorizer.authorize_any
    assert anyone("User:alice", "h", Operation.WRITE, R.TOPIC)
    assert not anyone("User:bob", "h", Operation.WRITE, R.TOPIC)  # its allow is denied
    assert not anyone("User:carol", "h", Operation.WRITE, R.TOPIC)  # denied on `*`
    assert not anyone("User:dave", "h", Operation.WRITE, R.TOPIC)  # READ only
    assert not anyone("User:eve", "h", Operation.WRITE, R.TOPIC)
    assert anyone("User:admin", "h", Operation.WRITE, R.TOPIC)  # super user
