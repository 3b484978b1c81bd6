"""Make ``pybroker`` importable from the source tree when it is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parents[2] / "python"
try:
    import pybroker.protocol  # noqa: F401
except ImportError:
    sys.path.insert(0, str(_SRC))
