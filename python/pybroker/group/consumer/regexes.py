"""Regex subscriptions of KIP-848 consumer groups: checking a pattern, resolving
patterns against the topic names, and running resolutions off the heartbeat.

Kafka's coordinator compiles subscribed regexes with RE2/J. pybroker matches with
Python's `re` (full match), whose common syntax is the same, and refuses as
INVALID_REGULAR_EXPRESSION what RE2 has no meaning for (lookaround, backreferences,
conditionals, atomic groups, possessive repeats) instead of matching topics Kafka
would never match. RE2-only syntax Python lacks (`\\z`, `\\pL`, `[[:alpha:]]`) is
refused too.

Kafka resolves a group's regexes on an executor and applies the result as a later
coordinator write; `LoopExecutor` does the same on the broker's event loop (the
matching itself in a worker thread, over a snapshot of the names).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any


try:  # Python 3.11+
    from re import _constants as _sre_constants  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_constants
    import sre_parse as _sre_parse

log = logging.getLogger(__name__)

#: Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: a group's regexes are resolved at most
#: once in this time, whatever asks for it (a new regex, new topics, the interval)
MIN_REFRESH_INTERVAL_MS = 10_000

#: parsed opcodes with no RE2 equivalent -> what they are called in a refusal
_NOT_IN_RE2 = {name: what for name, what in (
    ("ASSERT", "lookaround"), ("ASSERT_NOT", "negative lookaround"),
    ("GROUPREF", "a backreference"), ("GROUPREF_EXISTS", "a conditional group"),
    ("ATOMIC_GROUP", "an atomic group"), ("POSSESSIVE_REPEAT", "a possessive repeat"))
    if hasattr(_sre_constants, name)}


#: an RE2 POSIX class (`[[:alpha:]]`), which Python's `re` reads as a plain set
_POSIX_CLASS = re.compile(r"\[:\^?[a-z]+:\]")


def invalid_reason(pattern: str) -> str | None:
    """Why a subscribed regex is refused, or None when it is accepted."""
    if _POSIX_CLASS.search(pattern):
        return "POSIX character classes are not supported"
    try:
        parsed = _sre_parse.parse(pattern)
    except re.error as exc:
        return str(exc)
    stack: list[Any] = [parsed]
    while stack:
        for op, arg in stack.pop():
            if str(op) in _NOT_IN_RE2:
                return f"{_NOT_IN_RE2[str(op)]} is not RE2 syntax"
            stack.extend(_subpatterns(arg))
    return None


def _subpatterns(arg: Any) -> Iterable[Any]:
    """The nested parsed patterns inside an opcode's argument."""
    if isinstance(arg, _sre_parse.SubPattern):
        yield arg
    elif isinstance(arg, (list, tuple)):
        for item in arg:
            yield from _subpatterns(item)


def resolve(regexes: Iterable[str], names: Iterable[str]) -> dict[str, frozenset[str]]:
    """The topics each regex fully matches. Internal topics are topics like any other
    here, as in Kafka (whose resolution filters only by the DESCRIBE ACL). A pattern
    that does not compile (it was checked when subscribed) matches nothing."""
    compiled: list[tuple[str, re.Pattern[str]]] = []
    out: dict[str, set[str]] = {}
    for regex in regexes:
        out[regex] = set()
        try:
            compiled.append((regex, re.compile(regex)))
        except re.error as exc:
            log.error("subscribed regex %r does not compile (%s): it matches nothing",
                      regex, exc)
    for name in names:
        for regex, pattern in compiled:
            if pattern.fullmatch(name):
                out[regex].add(name)
    return {regex: frozenset(topics) for regex, topics in out.items()}


Work = Callable[[], dict[str, frozenset[str]]]
Done = Callable[[dict[str, frozenset[str]] | None], None]


class LoopExecutor:
    """Runs a group's resolution without holding up the heartbeat that asked for it:
    the matching in a worker thread, its result applied on the event loop. One
    resolution per key at a time (Kafka's executor.isScheduled)."""

    def __init__(self) -> None:
        self._running: set[str] = set()

    def is_scheduled(self, key: str) -> bool:
        return key in self._running

    def schedule(self, key: str, work: Work, done: Done) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            done(work())  # no loop (tools, sync tests): resolve at once
            return
        self._running.add(key)

        async def run() -> None:
            result = None
            try:
                result = await loop.run_in_executor(None, work)
            except Exception:
                log.exception("resolving the regexes of %s failed", key)
            finally:
                self._running.discard(key)
            try:
                done(result)
            except Exception:
                log.exception("applying the resolved regexes of %s failed", key)

        loop.create_task(run(), name=f"regex-{key}")


class ManualExecutor:
    """Resolutions wait until `run_all` (unit tests: what the heartbeat does while a
    resolution is outstanding)."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[Work, Done]] = {}

    def is_scheduled(self, key: str) -> bool:
        return key in self.pending

    def schedule(self, key: str, work: Work, done: Done) -> None:
        self.pending[key] = (work, done)

    def run_all(self) -> int:
        ran = 0
        while self.pending:
            key = next(iter(self.pending))
            work, done = self.pending.pop(key)
            done(work())
            ran += 1
        return ran
