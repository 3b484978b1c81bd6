"""The checks fail closed without a broker: an API nobody said how to authorize is
refused, and an id no topic has never reaches a handler as allowed."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from pybroker.config import BrokerConfig
from pybroker.handlers.registry import HANDLERS
from pybroker.security.authorizer import Authorizer
from pybroker.security.checks import CHECKS, NO_RESOURCE, check
from pybroker.security.store import FileSecurityStore


def _authorizer(tmp_path: Path) -> Authorizer:
    authorizer = Authorizer(BrokerConfig({"super.users": "User:admin",
                                          "allow.everyone.if.no.acl.found": "true"}),
                            FileSecurityStore(tmp_path))
    asyncio.run(authorizer.ready())
    return authorizer


def test_every_handled_api_has_a_check_or_names_nothing() -> None:
    assert not set(CHECKS) & NO_RESOURCE
    assert set(HANDLERS) <= set(CHECKS) | NO_RESOURCE


def test_an_api_without_a_check_is_refused(tmp_path: Path) -> None:
    # even for a super user: nothing says what it touches
    decision = check(_authorizer(tmp_path), "User:admin", "h", 999, 0, {}, lambda i: None)
    assert decision is not None and decision.close and decision.denied
    assert check(_authorizer(tmp_path), "User:x", "h", 18, 3, {}, lambda i: None) is None


def test_an_unknown_topic_id_is_answered_not_passed_on(tmp_path: Path) -> None:
    """allow.everyone.if.no.acl.found=true allows every name: an id that resolves to no
    name must still not be let through to the handler."""
    unknown = uuid.uuid4()
    body = {"replica_id": -1, "replica_state": {"replica_id": -1}, "topics": [
        {"topic": "", "topic_id": unknown, "partitions": [{"partition": 0}]}]}
    decision = check(_authorizer(tmp_path), "User:admin", "h", 1, 13, body, lambda i: None)
    assert decision is not None and decision.merge is not None
    assert body["topics"] == []
    response: dict = {"responses": []}
    decision.merge(response)
    (answer,) = response["responses"]
    assert answer["topic_id"] == unknown
    assert [p["error_code"] for p in answer["partitions"]] == [100]  # UNKNOWN_TOPIC_ID
    deleted = {"topics": [{"name": None, "topic_id": unknown}]}
    decision = check(_authorizer(tmp_path), "User:admin", "h", 20, 6, deleted, lambda i: None)
    assert decision is not None and decision.response is not None
    assert [r["error_code"] for r in decision.response["responses"]] == [100]
