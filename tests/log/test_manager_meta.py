"""meta.properties ties a data dir to its cluster and broker id: a broker refuses a dir
of another cluster or another broker id, as Kafka's do, instead of mixing its logs in."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.config import BrokerConfig, ConfigError
from pybroker.log.manager import META_FILE, LogManager


def started(root: Path, cluster_id: str, broker_id: int = 0) -> LogManager:
    m = LogManager(BrokerConfig({"log.dirs": str(root), "broker.id": str(broker_id)}),
                   cluster_id)
    m.startup()
    return m


def test_same_cluster_and_broker_start_again(tmp_path: Path) -> None:
    started(tmp_path, "cluster-a").shutdown()
    started(tmp_path, "cluster-a").shutdown()
    assert "cluster.id=cluster-a" in (tmp_path / META_FILE).read_text()


def test_a_dir_of_another_cluster_is_refused(tmp_path: Path) -> None:
    started(tmp_path, "cluster-a").shutdown()
    with pytest.raises(ConfigError, match="cluster-a.*cluster-b"):
        started(tmp_path, "cluster-b")
    assert "cluster.id=cluster-a" in (tmp_path / META_FILE).read_text()  # left as it was


def test_a_dir_of_another_broker_id_is_refused(tmp_path: Path) -> None:
    started(tmp_path, "cluster-a", broker_id=1).shutdown()
    with pytest.raises(ConfigError, match="broker.id 1"):
        started(tmp_path, "cluster-a", broker_id=2)


def test_a_meta_properties_without_broker_id_is_refused(tmp_path: Path) -> None:
    """Whose dir it is cannot be told: refused, as Kafka refuses a meta.properties
    without its id, and left as it was."""
    (tmp_path / META_FILE).write_text("version=0\ncluster.id=cluster-a\n")
    with pytest.raises(ConfigError, match="no broker.id"):
        started(tmp_path, "cluster-a")
    assert (tmp_path / META_FILE).read_text() == "version=0\ncluster.id=cluster-a\n"
