"""The server-side assignors: every subscribed partition once, balanced, sticky."""

from __future__ import annotations

import random
import uuid

from pybroker.group.consumer.assignors import range_, uniform
from pybroker.group.consumer.records import Assignment

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def flat(target: dict[str, Assignment]) -> dict[str, set[tuple[uuid.UUID, int]]]:
    return {m: {(t, p) for t, ps in a.items() for p in ps} for m, a in target.items()}


def test_uniform_is_complete_balanced_and_sticky() -> None:
    rng = random.Random(7)
    for _ in range(50):
        n = rng.randint(1, 8)
        counts = {A: rng.randint(1, 20), B: rng.randint(0, 9)}
        subs = {f"m{i}": frozenset({A, B}) for i in range(n)}
        target = flat(uniform(subs, counts, {}))
        owned = [tp for tps in target.values() for tp in tps]
        assert sorted(owned) == sorted((t, p) for t, c in counts.items() for p in range(c))
        sizes = [len(v) for v in target.values()]
        assert max(sizes) - min(sizes) <= 1
        # a member leaves: the others keep everything they had
        if n > 1:
            gone = f"m{n - 1}"
            previous = uniform(subs, counts, {})
            rest = {m: s for m, s in subs.items() if m != gone}
            after = flat(uniform(rest, counts, previous))
            for m in rest:
                assert flat(previous)[m] <= after[m]


def test_uniform_respects_subscriptions() -> None:
    target = flat(uniform({"x": frozenset({A}), "y": frozenset({A, B})}, {A: 2, B: 4}, {}))
    assert all(t == A for t, _ in target["x"])
    assert len(target["x"]) + len(target["y"]) == 6
    assert abs(len(target["x"]) - len(target["y"])) <= 2  # x can only take A's two


def test_range_gives_consecutive_ranges_per_topic() -> None:
    target = range_({"b": frozenset({A}), "a": frozenset({A})}, {A: 5}, {})
    assert target == {"a": {A: frozenset({0, 1, 2})}, "b": {A: frozenset({3, 4})}}
