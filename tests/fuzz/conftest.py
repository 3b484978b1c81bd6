"""Print how the fuzz tests were generated, so a failure can be replayed."""

from __future__ import annotations

from typing import Any

import pytest

from .settings import describe


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    ran = any(
        "tests/fuzz/" in str(getattr(r, "fspath", "") or getattr(r, "nodeid", ""))
        for reports in terminalreporter.stats.values() for r in reports
    )
    if ran:
        terminalreporter.write_line(f"fuzz: {describe()}")
