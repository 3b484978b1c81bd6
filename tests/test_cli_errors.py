"""`pybroker serve` with a configuration mistake: one clear line on stderr, a non-zero
exit, no traceback, and no data directory left behind (issue 11, defect 6)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import BrokerFactory

#: a failed start takes an interpreter start and an import; this bounds a hang
RUN_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(data_dir: Path, *args: str, listeners: str | None = None) -> (
        subprocess.CompletedProcess[str]):
    listeners = listeners or f"PLAINTEXT://127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "pybroker", "serve", "--override", f"log.dirs={data_dir}",
           "--override", f"listeners={listeners}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def assert_refused(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Non-zero exit, exactly one line on stderr (containing `fragments`), no traceback."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A port some other socket is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize(("settings", "fragments"), [
    (["--override", "listeners=PLAINTEXT://127.0.0.1:notaport"],
     ["Unable to parse PLAINTEXT://127.0.0.1:notaport to a broker endpoint"]),
    (["--override", "listeners=nonsense"], ["Unable to parse nonsense to a broker endpoint"]),
    (["--override", "listeners=PLAINTEXT://127.0.0.1:70000"], ["port out of range"]),
    (["--log-level", "bogus"], ["--log-level", "bogus"]),
    (["--override", "num.partitions=many"], ["num.partitions"]),
    # a TLS listener without a keystore, a SASL one without a mechanism pybroker serves
    # (Kafka's default is GSSAPI), are refused, not served in clear
    (["--override", "listeners=SSL://127.0.0.1:0"], ["SSL", "ssl.keystore.location"]),
    (["--override", "listeners=SASL_SSL://127.0.0.1:0"], ["SASL_SSL"]),
    (["--override", "listeners=INTERNAL://127.0.0.1:0",
      "--override", "listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT"],
     ["INTERNAL://127.0.0.1:0", "SASL_PLAINTEXT"]),
    (["--override", "listeners=INTERNAL://127.0.0.1:0"],
     ["No security protocol defined for listener INTERNAL"]),
    (["--override", "listener.security.protocol.map=PLAINTEXT:TLS"],
     ["Invalid security protocol `TLS` defined in listener.security.protocol.map"]),
    (["--override", "advertised.listeners=PLAINTEXT://0.0.0.0:9092"],
     ["advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
      "Use a routable IP address."]),
    (["--override", "advertised.listeners=OTHER://example.com:9092",
      "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"],
     ["advertised.listeners listener names must be equal to or a subset"]),
    (["--override", "listeners=PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"],
     ["Each listener must have a different name"]),
    (["--override", "listeners=PLAINTEXT://127.0.0.1:19390,OTHER://localhost:19390",
      "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"],
     ["Each listener must have a different port"]),
], ids=["port-not-a-number", "nonsense", "port-out-of-range", "log-level", "bad-value",
        "ssl", "sasl-ssl", "sasl-through-map", "name-not-in-map", "bad-protocol-in-map",
        "advertised-wildcard", "advertised-unknown-name", "duplicate-name",
        "duplicate-port"])
def test_bad_config_is_refused_in_one_line(tmp_path: Path, settings: list[str],
                                           fragments: list[str]) -> None:
    data_dir = tmp_path / "new" / "data"
    assert_refused(serve(data_dir, *settings), *fragments)
    assert not (tmp_path / "new").exists()


def test_port_in_use_is_one_line_and_leaves_no_data_dir(tmp_path: Path,
                                                        listening_port: int) -> None:
    data_dir = tmp_path / "new" / "data"
    result = serve(data_dir, listeners=f"PLAINTEXT://127.0.0.1:{listening_port}")
    assert_refused(result, f"127.0.0.1:{listening_port}", "Address already in use")
    assert not (tmp_path / "new").exists()


def test_metrics_port_in_use_is_one_line_and_leaves_no_data_dir(
        tmp_path: Path, listening_port: int) -> None:
    # the metrics endpoint binds after the data dir exists: the start removes what it made
    data_dir = tmp_path / "new" / "data"
    result = serve(data_dir, "--log-level", "ERROR",
                   "--override", f"metrics.port={listening_port}")
    assert_refused(result, f"metrics.port {listening_port}", "Address already in use")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("metrics", [False, True], ids=["listener", "metrics"])
def test_failed_start_keeps_an_existing_data_dir(tmp_path: Path, listening_port: int,
                                                 metrics: bool) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "keep-me").write_text("x")
    if metrics:
        result = serve(data_dir, "--log-level", "ERROR",
                       "--override", f"metrics.port={listening_port}")
    else:
        result = serve(data_dir, listeners=f"PLAINTEXT://127.0.0.1:{listening_port}")
    assert_refused(result, "Address already in use")
    assert (data_dir / "keep-me").read_text() == "x"


def test_unknown_keys_are_logged_once(broker_factory: BrokerFactory) -> None:
    b = broker_factory({"listener": "PLAINTEXT://127.0.0.1:1", "num.partitons": "3"})
    b.stop()
    log = b.log_tail(1000)
    typo = "The configuration 'listener' was supplied but isn't a known config."
    assert log.count(typo) == 1, log
    assert "Did you mean 'listeners'?" in log
    assert log.count("The configuration 'num.partitons' was supplied") == 1, log


def test_named_listener_from_the_protocol_map_serves(broker_factory: BrokerFactory) -> None:
    b = broker_factory(start=False)
    b.overrides.update({"listeners": f"INTERNAL://{b.host}:{b.port}",
                        "listener.security.protocol.map": "INTERNAL:PLAINTEXT"})
    b.start()  # waits for an ApiVersions answer on the INTERNAL listener
    assert "listening on INTERNAL://" in b.log_tail()


def test_data_dir_of_another_cluster_is_refused_in_one_line(tmp_path: Path) -> None:
    """A data dir whose meta.properties names another cluster (here: its metadata file
    was lost, so the node starts as a new cluster of one) is refused, and kept."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    meta = "#\nversion=0\nbroker.id=0\ncluster.id=AnotherClusterId00000\n"
    (data_dir / "meta.properties").write_text(meta)
    result = serve(data_dir, "--log-level", "ERROR")
    assert_refused(result, "AnotherClusterId00000", "cluster")
    assert (data_dir / "meta.properties").read_text() == meta
