"""log/dir_lock.py: a data dir's `.lock` is held by one user at a time, and a refusal
writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.log.dir_lock import LOCK_FILE, DirLock, DirLocked, lock_dirs, release_all


def test_second_lock_in_the_same_process_is_refused(tmp_path: Path) -> None:
    held = DirLock.acquire(tmp_path)
    with pytest.raises(DirLocked, match=r"Failed to acquire lock on file \.lock in "):
        DirLock.acquire(tmp_path)
    held.release()
    again = DirLock.acquire(tmp_path)  # released: the next user gets it
    assert again.held
    again.release()
    assert (tmp_path / LOCK_FILE).exists()  # never removed (see the module docstring)


def test_lock_dirs_takes_all_or_none(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    other = DirLock.acquire(second)
    with pytest.raises(DirLocked, match=str(second)):
        lock_dirs([first, second])
    # the lock on `first` taken before the refusal was let go
    taken = DirLock.acquire(first)
    taken.release()
    other.release()
    locks = lock_dirs([first, second])
    assert all(lock.held for lock in locks)
    release_all(locks)


def test_refusal_leaves_the_dir_as_it_was(tmp_path: Path) -> None:
    held = DirLock.acquire(tmp_path)
    (tmp_path / "meta.properties").write_text("broker.id=0\n")
    before = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                    for p in tmp_path.iterdir())
    with pytest.raises(DirLocked):
        DirLock.acquire(tmp_path)
    after = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.iterdir())
    assert after == before
    held.release()


def test_a_missing_dir_is_created(tmp_path: Path) -> None:
    lock = DirLock.acquire(tmp_path / "new" / "data")
    assert (tmp_path / "new" / "data" / LOCK_FILE).is_file()
    lock.release()


def test_a_dir_named_twice_is_a_config_error(tmp_path: Path) -> None:
    from pybroker.config import ConfigError

    with pytest.raises(ConfigError, match="twice"):
        lock_dirs([tmp_path / "a", tmp_path / "b", tmp_path / "b" / ".." / "a"])
    taken = lock_dirs([tmp_path / "a", tmp_path / "b"])  # nothing left held
    release_all(taken)
