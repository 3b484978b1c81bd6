"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM
credentials in the metadata store (ZooKeeper's /config/users/<user> in cluster
mode), with Kafka's per-user errors."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.registry import handles
from pybroker.security import credentials
from pybroker.security.scram import (
    BY_TYPE,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    from_salted_password,
)
from pybroker.security.store import store_for

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


def _result(user: str, code: ErrorCode = ErrorCode.NONE, message: str | None = "",
            infos: list[dict[str, int]] | None = None) -> dict[str, Any]:
    # a success's message is "": Kafka's ScramImage.describe leaves it unset (the
    # schema's default for this nullable string is "", not null)
    return {"user": user, "error_code": int(code), "error_message": message,
            "credential_infos": infos or []}


@handles(50, (0, 0))
async def handle_describe_user_scram_credentials(ctx: BrokerContext,
                                                 request: Request) -> dict[str, Any]:
    store = store_for(ctx.admin.backend, ctx.config.log_dirs[0])
    requested = request.body["users"]
    names = ([u["name"] for u in requested] if requested
             else await credentials.users(store))
    counts = Counter(names)
    results = []
    for user in dict.fromkeys(names):
        if counts[user] > 1:
            results.append(_result(user, ErrorCode.DUPLICATE_RESOURCE,
                                   f"Cannot describe SCRAM credentials for the same user "
                                   f"twice in a single request: {user}"))
            continue
        found = await credentials.describe(store, user)
        if not found:
            results.append(_result(user, ErrorCode.RESOURCE_NOT_FOUND,
                                   f"Attempt to describe a user credential that does not "
                                   f"exist: {user}"))
            continue
        results.append(_result(user, infos=[
            {"mechanism": MECHANISMS[m][1], "iterations": c.iterations}
            for m, c in found.items()]))
    # "" as Kafka, which leaves the top-level message unset too
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "results": results}


@handles(51, (0, 0))
async def handle_alter_user_scram_credentials(ctx: BrokerContext,
                                              request: Request) -> dict[str, Any]:
    store = store_for(ctx.admin.backend, ctx.config.log_dirs[0])
    body = request.body
    deletions: dict[str, list[str]] = {}
    upserts: dict[str, dict[str, ScramCredential]] = {}
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: Counter[tuple[str, int]] = Counter(
        (d["name"], d["mechanism"]) for d in body["deletions"] + body["upsertions"])
    order = list(dict.fromkeys(d["name"] for d in body["deletions"] + body["upsertions"]))
    for item in body["deletions"] + body["upsertions"]:
        user, mech_type = item["name"], item["mechanism"]
        if user in errors:
            continue
        mechanism = BY_TYPE.get(mech_type)
        if not user:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism is None:
            errors[user] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                            f"Unknown SCRAM mechanism type {mech_type}")
        elif seen[(user, mech_type)] > 1:
            errors[user] = (ErrorCode.DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request")
        elif "salted_password" not in item:
            deletions.setdefault(user, []).append(mechanism)
        elif item["iterations"] < MIN_ITERATIONS:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif item["iterations"] > MAX_ITERATIONS:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not item["salt"] or not item["salted_password"]:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                            "Salt and salted password must not be empty")
        else:
            upserts.setdefault(user, {})[mechanism] = from_salted_password(
                mechanism, bytes(item["salted_password"]), bytes(item["salt"]),
                item["iterations"])
    results = []
    for user in order:
        if user not in errors:
            existing = await credentials.describe(store, user)
            missing = [m for m in deletions.get(user, []) if m not in existing]
            if missing:
                errors[user] = (ErrorCode.RESOURCE_NOT_FOUND,
                                "Attempt to delete a user credential that does not exist")
        if user in errors:
            code, message = errors[user]
            results.append({"user": user, "error_code": int(code), "error_message": message})
            continue
        await credentials.alter(store, user, upserts.get(user, {}), deletions.get(user, []))
        results.append({"user": user, "error_code": 0, "error_message": None})
    return {"throttle_time_ms": 0, "results": results}
