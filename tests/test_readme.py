"""The README, run as written: its marked code blocks (`<!-- walkthrough: NAME -->` just
before a fence), in README order, in one shell as a newcomer would type them, with a
`pybroker serve` of their own in a "second terminal".

Two ways in, as the README gives them:

* this install (`ci/test`): the environment running the tests is the install; the
  blocks from `serve` on run with its scripts first on PATH;
* the wheel (`ci/wheels --test`, PYBROKER_WHEEL names the built wheel): the README from
  the top, `python3 -m venv .venv` and `pip install dist/pybroker-*.whl` included, in a
  directory of its own with `dist/` holding that wheel, and a PATH with no cargo or rustc
  on it -- so the wheel installs and runs with no Rust toolchain.

The only change made to the README's text: its port, 9092, becomes a free one (and
`pybroker serve` listens there). Lines of a block that are whole comments (`# k1 ...`)
are the output the README promises: each must appear in that block's output."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_PORT = "9092"
#: the blocks after `serve`, in the order the README gives them
AFTER_SERVE = ("quickstart", "quickstart-python", "quickstart-kcat", "tools",
               "consumer-groups", "dump-log-segments")
#: installing the wheel's dependencies from PyPI into a fresh virtualenv
INSTALL_TIMEOUT_S = 600
#: everything after serve: a few tools, two perf tests, a group join or two
WALKTHROUGH_TIMEOUT_S = 300
SERVE_START_TIMEOUT_S = 60
SERVE_STOP_TIMEOUT_S = 30
RUST_TOOLS = ("cargo", "rustc", "rustup")
#: librdkafka's own log lines, as it prints them itself (`%6|1700000000.123|BGQUEUE|...`)
LIBRDKAFKA_LINE = re.compile(r"^%\d\|", re.MULTILINE)
MARK = "@@walkthrough "


@dataclass
class Block:
    name: str
    code: str

    def expected_lines(self) -> list[str]:
        """Whole-line comments: the output the README shows for this block."""
        return [line[2:] for line in self.code.splitlines() if line.startswith("# ")]


def readme_blocks() -> dict[str, Block]:
    pattern = re.compile(r"<!-- walkthrough: ([\w-]+) -->\n```bash\n(.*?)\n```", re.DOTALL)
    blocks = {m.group(1): Block(m.group(1), m.group(2))
              for m in pattern.finditer(README.read_text())}
    return blocks


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def on_port(code: str, port: int) -> str:
    return code.replace(f"127.0.0.1:{README_PORT}", f"127.0.0.1:{port}")


def script(blocks: list[Block], port: int, prologue: str = "") -> str:
    """One bash script of `blocks`, each announced on stdout and stderr."""
    parts = ["set -euo pipefail", prologue]
    for block in blocks:
        parts.append(f"echo '{MARK}{block.name}'; echo '{MARK}{block.name}' >&2")
        parts.append(on_port(block.code, port))
    return "\n".join(parts) + "\n"


def by_block(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    name = ""
    for line in text.splitlines(keepends=True):
        if line.startswith(MARK):
            name = line[len(MARK):].strip()
            sections[name] = ""
        else:
            sections[name] = sections.get(name, "") + line
    return sections


def run_bash(code: str, cwd: Path, env: dict[str, str],
             timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


def wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + SERVE_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"pybroker serve exited ({proc.returncode}):\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"pybroker serve not listening on {port} after {SERVE_START_TIMEOUT_S} s:\n"
                f"{log.read_text()}")


def walkthrough(blocks: dict[str, Block], workdir: Path, env: dict[str, str],
                activate: str = "") -> subprocess.CompletedProcess[str]:
    """`serve` in one shell, the blocks after it in another (both in `workdir`), checked."""
    serve = blocks["serve"].code.strip()
    assert serve == "pybroker serve", "the test runs the serve block on its own port"
    port = free_port()
    log = workdir / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-c",
             f"{activate}\nexec {serve} --override listeners=PLAINTEXT://127.0.0.1:{port}"],
            cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    try:
        wait_listening(server, port, log)
        result = run_bash(script([blocks[name] for name in AFTER_SERVE], port, activate),
                          workdir, env, WALKTHROUGH_TIMEOUT_S)
    finally:
        server.terminate()
        try:
            server.wait(SERVE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    check_output(result, blocks)
    assert server.returncode == 0, log.read_text()
    return result


def check_output(result: subprocess.CompletedProcess[str], blocks: dict[str, Block]) -> None:
    context = f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    assert result.returncode == 0, context
    assert "Traceback" not in result.stderr, context
    assert not LIBRDKAFKA_LINE.search(result.stderr), context
    out, err = by_block(result.stdout), by_block(result.stderr)
    for name in AFTER_SERVE:
        shown = out.get(name, "") + err.get(name, "")
        for line in blocks[name].expected_lines():
            assert line in shown.splitlines(), f"{name}: {line!r} not in\n{shown}"
    # readable output: values, not <Message object at 0x...>
    assert "<Message" not in out["quickstart-python"], out["quickstart-python"]
    assert "k4 from kcat @3" in out["quickstart-kcat"].splitlines(), out["quickstart-kcat"]
    assert "Created topic demo." in out["tools"].splitlines(), out["tools"]
    assert "Processed a total of 2 messages" in err["tools"], err["tools"]
    # --dry-run given: no "--execute option is missing" warning, the new offsets shown
    assert "--execute option is missing" not in out["consumer-groups"] + err["consumer-groups"]
    assert "NEW-OFFSET" in out["consumer-groups"], out["consumer-groups"]
    dump = out["dump-log-segments"].splitlines()
    assert dump[:2] == ["Dumping pybroker-data/demo-0/00000000000000000000.log",
                        "Log starting offset: 0"], dump


def test_readme_blocks_are_all_there() -> None:
    blocks = readme_blocks()
    for name in ("venv", "install-wheel", "install-source", "serve", *AFTER_SERVE):
        assert name in blocks, f"README has no walkthrough block {name!r}"
    # every command talks to the one broker the README starts
    for name in AFTER_SERVE:
        ports = set(re.findall(r"(?:127\.0\.0\.1|localhost):(\d+)", blocks[name].code))
        assert ports <= {README_PORT}, (name, ports)


@pytest.mark.timeout(WALKTHROUGH_TIMEOUT_S + 60)
def test_readme_walkthrough_with_this_install(tmp_path: Path) -> None:
    """Serve, quick start and the tools, with the pybroker the tests run on."""
    scripts = Path(sys.executable).parent
    if not (scripts / "pybroker").exists():
        pytest.skip(f"no pybroker script next to {sys.executable}")
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (ci/test installs it)")
    env = dict(os.environ, PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")
    walkthrough(readme_blocks(), tmp_path, env)


def no_rust_path() -> str:
    """PATH without any directory holding a Rust toolchain binary, this interpreter's first
    (so the README's `python3` is the one under test)."""
    dirs = [str(Path(sys.executable).parent)] + os.environ.get("PATH", "").split(os.pathsep)
    kept: list[str] = []
    for d in dirs:
        if d and d not in kept and not any((Path(d) / tool).exists() for tool in RUST_TOOLS):
            kept.append(d)
    return os.pathsep.join(kept)


@pytest.mark.skipif(not os.environ.get("PYBROKER_WHEEL"),
                    reason="needs a built wheel: run by ci/wheels --test (PYBROKER_WHEEL)")
@pytest.mark.timeout(INSTALL_TIMEOUT_S + WALKTHROUGH_TIMEOUT_S + 120)
def test_readme_from_the_top_with_the_wheel_and_no_rust(tmp_path: Path) -> None:
    wheel = Path(os.environ["PYBROKER_WHEEL"]).resolve()
    assert wheel.is_file(), wheel
    version = wheel.name.split("-")[1]
    blocks = readme_blocks()
    # the README's repository root, as far as the wheel's way in needs one: dist/
    (tmp_path / "dist").mkdir()
    shutil.copy(wheel, tmp_path / "dist" / wheel.name)
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CARGO_HOME", "RUSTUP_HOME",
                        "PYBROKER_WHEEL")}
    env["PATH"] = no_rust_path()
    for tool in RUST_TOOLS:
        assert shutil.which(tool, path=env["PATH"]) is None, tool
    # only wheels: nothing of pybroker's (or its dependencies') may need compiling
    env["PIP_ONLY_BINARY"] = ":all:"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    installed = run_bash(script([blocks["venv"], blocks["install-wheel"]], 0), tmp_path, env,
                         INSTALL_TIMEOUT_S)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert f"pybroker {version}" in installed.stdout.splitlines(), installed.stdout[-2000:]
    where = run_bash(". .venv/bin/activate\npython -c 'import pybroker._core as c; "
                     "print(c.__file__)'", tmp_path, env, 60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / ".venv"), where.stdout

    walkthrough(blocks, tmp_path, env, activate=". .venv/bin/activate")
