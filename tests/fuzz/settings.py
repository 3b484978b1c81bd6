"""One place for the fuzz tests' Hypothesis settings: deterministic by default.

CI runs derandomized (the same examples every run, no example database), with
example counts sized so all of tests/fuzz takes about a minute on a 2-core box.
Environment knobs for deeper runs by hand:

  PYBROKER_FUZZ_SCALE=10   ten times the examples (and live inputs)
  PYBROKER_FUZZ_SEED=1234  random generation from this seed instead of derandomized
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import hypothesis
from hypothesis import HealthCheck

SCALE = float(os.environ.get("PYBROKER_FUZZ_SCALE", "1") or 1)
SEED = os.environ.get("PYBROKER_FUZZ_SEED") or None

F = TypeVar("F", bound=Callable[..., Any])


def scaled(count: int) -> int:
    return max(1, int(count * SCALE))


def fuzz_settings(examples: int) -> Callable[[F], F]:
    """Hypothesis settings (and seed, when PYBROKER_FUZZ_SEED is set) for one test."""
    chosen = hypothesis.settings(
        max_examples=scaled(examples),
        derandomize=SEED is None,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much, HealthCheck.large_base_example,
                               HealthCheck.function_scoped_fixture],
    )

    def apply(fn: F) -> F:
        fn = chosen(fn)
        if SEED is not None:
            fn = hypothesis.seed(int(SEED))(fn)
        return fn

    return apply


def describe() -> str:
    mode = f"seed={SEED}" if SEED is not None else "derandomize=True"
    return f"hypothesis {hypothesis.__version__}, {mode}, scale={SCALE:g}"
