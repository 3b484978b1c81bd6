"""A broker's start imports only what a broker uses: the tools (and through them the
Kafka client library) and importlib.metadata (the version) cost a restart a good part
of its Python start (issue 25)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: an interpreter start and the broker's imports; this bounds a hang
RUN_TIMEOUT_S = 60


def test_serve_imports_neither_the_tools_nor_package_metadata() -> None:
    # `serve` as the command line runs it, up to the broker's import and the config's
    # refusal (the bad broker.id stops it before any port or dir is touched)
    script = textwrap.dedent("""
        import sys
        from pybroker import cli
        status = cli.main(["serve", "--override", "broker.id=not-a-number"])
        assert status == cli.EXIT_CONFIG, status
        import pybroker.broker, pybroker.server.dispatch
        heavy = ("confluent_kafka", "importlib.metadata", "pybroker.tools._common", "psutil")
        print(",".join(name for name in heavy if name in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", result.stdout


def test_the_version_is_still_there_when_asked_for() -> None:
    result = subprocess.run([sys.executable, "-m", "pybroker", "--version"],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    assert words[0] == "pybroker" and words[1][0].isdigit(), result.stdout
