"""The controller's pass over the states it wrote (a state-change line each: thousands in
a controlled shutdown or a failover at 10,000 partitions) lets the other tasks in as it
goes (issue 25): it was one block of the event loop, among the longest stalls the
brokers logged."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from pybroker.config import BrokerConfig
from pybroker.controller.controller import LOGGED_STATES, Controller
from pybroker.coordination.base import StateUpdate
from pybroker.coordination.znodes import LeaderAndIsr
from tests.loop_turns import Turns

PARTITIONS = 300
#: what one state's outcome costs in the stand-in (a loaded machine's line)
STEP_S = 0.001


class _Outcomes(dict):  # type: ignore[type-arg]
    """The store's answers: each lookup holds the loop a while, as a log line does."""

    def __init__(self, turns: Turns, versions: dict[Any, int]) -> None:
        super().__init__(versions)
        self._turns = turns

    def get(self, key: Any, default: Any = None) -> Any:
        time.sleep(STEP_S)
        self._turns.note()
        return super().get(key, default)


class _Backend:
    def __init__(self, turns: Turns) -> None:
        self._turns = turns

    async def update_partition_states(self, updates: list[StateUpdate], lease: Any
                                      ) -> dict[Any, Any]:
        return _Outcomes(self._turns, {(u.topic, u.partition): 1 for u in updates})


def test_writing_many_states_gives_other_tasks_turns(tmp_path: Path) -> None:
    turns = Turns()
    controller = Controller(1, _Backend(turns),  # type: ignore[arg-type]
                            BrokerConfig({"log.dirs": str(tmp_path)}))
    state = LeaderAndIsr(leader=1, leader_epoch=1, isr=[1], controller_epoch=1)
    updates = [StateUpdate("t", i, state, 0) for i in range(PARTITIONS)]
    stale: set[str] = set()

    async def write() -> None:
        stale.update(await controller._write_states(updates, None))  # type: ignore[arg-type]

    turns.run(write)
    assert len(turns.seen) == PARTITIONS and not stale
    # the other task ran while the pass was going (not only before and after it)
    assert turns.seen[-1] > turns.seen[0], (turns.seen[0], turns.seen[-1])


def test_a_big_batch_logs_its_states_at_debug_and_one_line_at_info(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A line per state at INFO, formatted and written on the loop, was most of the pass;
    a small batch (an election, a topic's creation of a few partitions) keeps them."""
    controller = Controller(1, _Backend(Turns()),  # type: ignore[arg-type]
                            BrokerConfig({"log.dirs": str(tmp_path)}))
    state = LeaderAndIsr(leader=1, leader_epoch=1, isr=[1], controller_epoch=1)

    def lines(count: int) -> list[tuple[int, str]]:
        caplog.clear()
        updates = [StateUpdate("t", i, state, 0) for i in range(count)]
        anyio.run(controller._write_states, updates, None)  # type: ignore[arg-type]
        return [(r.levelno, r.getMessage()) for r in caplog.records
                if r.name == "pybroker.controller.controller"]

    with caplog.at_level(logging.INFO, logger="pybroker.controller.controller"):
        small = lines(LOGGED_STATES)
        big = lines(PARTITIONS)
    assert [m for level, m in small if level == logging.INFO][:2] == [
        "controller: t-0 leader 1 epoch 1 isr [1]", "controller: t-1 leader 1 epoch 1 isr [1]"]
    assert len(small) == LOGGED_STATES + 1
    assert big == [(logging.INFO, f"controller: {PARTITIONS} partition state(s) written, "
                                  "0 stale (each state's line at DEBUG)")]
    with caplog.at_level(logging.DEBUG, logger="pybroker.controller.controller"):
        debug = lines(PARTITIONS)
    assert sum(level == logging.DEBUG for level, _ in debug) == PARTITIONS
