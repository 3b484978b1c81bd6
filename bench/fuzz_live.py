#!/usr/bin/env python3
"""Live long-run fuzzing of the request path (issue 11): a broker process on loopback,
known records produced with confluent-kafka (acks=all), then N mutated requests of
every API over many raw connections, with the broker's RSS and fds sampled, and every
acknowledged record read back at the end. The engine is tests/fuzz/live.py (the CI
smoke run, tests/fuzz/test_live.py, uses it too); needs the `test` extra.

    python bench/fuzz_live.py --inputs 1000000            # about 15-30 min on 2 cores
    python bench/fuzz_live.py --inputs 20000 --json out.json
    python bench/fuzz_live.py --port 19400 --data-dir /tmp/fz --seed 7

Exit status 0 when the broker held up (see the RESULT line), 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.live import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
