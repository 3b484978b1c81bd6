from pathlib import Path

import pytest

from pybroker.log.checkpoint import MalformedCheckpoint, read_checkpoint, write_checkpoint


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
    with pytest.raises(MalformedCheckpoint, match="expected 3 entries, found 1"):
        read_checkpoint(path)


@pytest.mark.parametrize("content", ["0\n2\na 0 1\nb zero 2\n", "1\n0\n", "", "\xff\xfe"],
                         ids=["bad-offset", "version", "empty", "binary"])
def test_malformed_files_raise_malformed_checkpoint(tmp_path: Path, content: str) -> None:
    path = tmp_path / "cp"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(MalformedCheckpoint, match=str(path)):
        read_checkpoint(path)
