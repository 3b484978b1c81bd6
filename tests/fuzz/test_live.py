"""A short live run (``live.run``): a broker process, raw connections, mutated requests.

The bounded CI version of ``bench/fuzz_live.py``: 20,000 inputs (times
PYBROKER_FUZZ_SCALE) of every API, then the same checks as the long run: the
broker stayed up, every outcome agreed with the decoder, sockets went back to
the baseline, RSS stayed bounded, every acknowledged record reads back (also
after a restart), and the broker logged no error.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from .live import LiveConfig, run, summary
from .settings import SEED, scaled

pytestmark = pytest.mark.fuzz

SMOKE_INPUTS = 20_000


@pytest.mark.timeout(600)
def test_live_smoke(tmp_path: Path) -> None:
    if os.environ.get("PYBROKER_TEST_BOOTSTRAP"):
        pytest.skip("starts its own broker process")
    cfg = LiveConfig(inputs=scaled(SMOKE_INPUTS), connections=16, seed=int(SEED or 1),
                     corpus_per_version=5, known_records=1000, max_seconds=300,
                     data_dir=str(tmp_path), settle_s=20)
    progress = io.StringIO()
    result = run(cfg, progress)
    report = progress.getvalue() + summary(result)
    print(report)
    assert not result.failures(), report
    assert result.inputs_sent == cfg.inputs
    # the mix reached both sides: handlers answered, bad frames were refused
    assert result.outcomes["answered"] > 0 and result.outcomes["closed"] > 0, report
    assert result.acked_records >= cfg.known_records, report
