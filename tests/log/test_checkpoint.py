from pathlib import Path

import pytest

from pybroker.log.checkpoint import read_checkpoint, write_checkpoint


def test_round_trip_in_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(path, {("orders", 0): 12, ("my.topic-x", 11): 0})
    assert path.read_text() == "0\n2\norders 0 12\nmy.topic-x 11 0\n"
    assert read_checkpoint(path) == {("orders", 0): 12, ("my.topic-x", 11): 0}


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "nope") == {}


def test_truncated_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n3\na 0 1\n")
    with pytest.raises(ValueError):
        read_checkpoint(path)
