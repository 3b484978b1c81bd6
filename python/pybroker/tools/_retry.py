"""Retriable errors, asked again within the tool's timeout: the one mechanism every
tool's requests go through for it.

Kafka's admin client retries a request that failed with a RetriableException -- a
coordinator still loading its partition after a start, a controller or a partition leader
moving, a request timed out -- until its timeout, and fails on the others at once. The
tools do the same whichever client they speak through: confluent-kafka's (a
KafkaException carrying Kafka's code) or pybroker's own wire clients (error codes in the
response: `check`). Which codes are retriable is the error enum's to say
(ErrorCode.retriable). A retry is logged at INFO (`pybroker --log-level INFO ...`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio

from pybroker.errors import ErrorCode
from pybroker.tools._common import ToolError

log = logging.getLogger("pybroker.tools")

#: pause between attempts (Kafka's retry.backoff.ms is 100 ms; a tool is not in a hurry)
BACKOFF_S = 0.2

T = TypeVar("T")


class Retriable(ToolError):
    """A response carried a retriable error code: asked again until the timeout, then
    printed as the tool's failure."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


def retriable(exc: BaseException) -> ErrorCode | None:
    """The retriable Kafka error `exc` stands for, else None."""
    if isinstance(exc, Retriable):
        return exc.code
    if isinstance(exc, (ConnectionError, TimeoutError)):
        # a broker named by Metadata gone or silent mid-way (a leader killed): Kafka's
        # DisconnectException and TimeoutException are retriable too. The bootstrap
        # servers' own failure is a ToolError ("no broker reachable"), not this
        return ErrorCode.NETWORK_EXCEPTION
    # confluent-kafka: KafkaException(KafkaError), whose code() is Kafka's for a broker's
    # error (librdkafka's own are negative and not in the enum)
    error = exc.args[0] if exc.args else None
    code = getattr(error, "code", None)
    if not callable(code) or not callable(getattr(error, "str", None)):
        return None
    try:
        found = ErrorCode.known(int(code()))
    except (TypeError, ValueError):
        return None
    return found if found is not None and found.retriable else None


def first_retriable(response: Any) -> ErrorCode | None:
    """The first retriable `error_code` anywhere in a decoded response (top level, per
    resource, per partition), else None."""
    if isinstance(response, dict):
        code = response.get("error_code")
        if isinstance(code, int) and code:
            found = ErrorCode.known(code)
            if found is not None and found.retriable:
                return found
        items: Any = response.values()
    elif isinstance(response, list):
        items = response
    else:
        return None
    for item in items:
        if isinstance(item, (dict, list)):
            found = first_retriable(item)
            if found is not None:
                return found
    return None


def check(response: dict[str, Any], what: str, deep: bool = False) -> dict[str, Any]:
    """`response` as it is, unless its error_code (with `deep`, any error_code in it: per
    resource, per partition) is retriable: then Retriable. A per-partition error is
    retried only where the partitions come from Metadata (a leader moving, a partition
    not yet known to its new leader); elsewhere it is the answer for that partition."""
    code = first_retriable(response if deep else {"error_code": response.get("error_code")})
    if code is not None:
        raise Retriable(f"{what} failed: {code.name}", code)
    return response


def retrying(action: Callable[[], T], timeout_s: float, what: str) -> T:
    """`action()`, again after a retriable error until `timeout_s` has passed; then, or
    on any other error, its error."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return action()
        except Exception as exc:
            code = retriable(exc)
            if code is None or time.monotonic() + BACKOFF_S >= deadline:
                raise
            log.info("%s: %s, asking again", what, code.name)
        time.sleep(BACKOFF_S)


async def retrying_async(action: Callable[[], Awaitable[T]], timeout_s: float,
                         what: str) -> T:
    """retrying(), for a coroutine."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await action()
        except Exception as exc:
            code = retriable(exc)
            if code is None or time.monotonic() + BACKOFF_S >= deadline:
                raise
            log.info("%s: %s, asking again", what, code.name)
        await anyio.sleep(BACKOFF_S)


R = TypeVar("R")


def settle(attempt: Callable[[], R], codes: Callable[[R], Iterable[int]], timeout_s: float,
           what: str) -> R:
    """For a tool that reports an outcome per partition (get-offsets, delete-records):
    `attempt()` again while a partition's outcome is a retriable code (its leader moving,
    a partition its new leader does not know yet), until `timeout_s`; the last outcomes,
    whatever errors they still hold, are the tool's to report, as Kafka's tools do."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = retrying(attempt, max(0.0, deadline - time.monotonic()), what)
        found = [ErrorCode.known(code) for code in codes(result) if code]
        code = next((c for c in found if c is not None and c.retriable), None)
        if code is None or time.monotonic() + BACKOFF_S >= deadline:
            return result
        log.info("%s: %s, asking again", what, code.name)
        time.sleep(BACKOFF_S)
