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

Every block from `serve` on runs, in README order -- load-test and compare, the cluster
(a real ZooKeeper and three brokers in the background), the configuration, security,
verifiable-tools and Spark sections included -- in a directory holding the repository's
`config/`, as a fresh clone has it. The stock Kafka `compare` is shown against is a
second `pybroker serve` here, on the port the README gives Kafka. The cluster blocks are
left out only where ZooKeeper or Java is not installed, the Spark block only where
pyspark or Java is not (the wheel's virtualenv has no `[spark]` extra), the load-test
block only where locust is not (nor has it the `[load]` extra: tests/test_wheel_load.py
runs load-test from the wheel with it).

The only change made to the README's text and to `config/`: each port the README uses
(9092, the cluster's, ZooKeeper's) becomes a free one. Lines of a block that are whole
comments (`# k1 ...`) are the output the README promises: each must appear in that
block's output."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.zookeeper import unavailable_reason

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONFIG = ROOT / "config"
README_PORT = "9092"
#: every port the README and config/ use: the broker's, compare's stock Kafka peer's, the
#: cluster's three and its ZooKeeper's, the SASL broker's, local-cluster's ZooKeeper's
README_PORTS = ("9092", "9093", "9191", "9192", "9193", "2181", "9094", "2281")
#: the stock Kafka `compare` is run against: a second pybroker stands in for it here
PEER_PORT = "9093"
#: local-cluster's brokers: --port and the ports after it, a run of free ones
README_PORT_RUN = ("9291", "9292", "9293")
#: the blocks that need a ZooKeeper (and Java), and the one that needs pyspark and Java
CLUSTER_BLOCKS = ("cluster", "reassign", "cluster-stop", "local-cluster",
                  "local-cluster-stop")
SPARK_BLOCKS = ("spark",)
#: the blocks that need the `load` extra (locust), which the wheel's virtualenv has not
#: (tests/test_wheel_load.py runs load-test from the wheel with it)
LOAD_BLOCKS = ("load-test",)
#: blocks before `serve`: the install
INSTALL_BLOCKS = ("venv", "install-source", "install-wheel")
#: installing the wheel's dependencies from PyPI into a fresh virtualenv
INSTALL_TIMEOUT_S = 600
#: everything after serve: tools, two perf tests, group joins, a ZooKeeper and three
#: brokers, a SASL broker, a Spark session
WALKTHROUGH_TIMEOUT_S = 900
SERVE_START_TIMEOUT_S = 60
SERVE_STOP_TIMEOUT_S = 30
RUST_TOOLS = ("cargo", "rustc", "rustup")
#: librdkafka's own log lines, as it prints them itself (`%6|1700000000.123|BGQUEUE|...`)
LIBRDKAFKA_LINE = re.compile(r"^%\d\|", re.MULTILINE)
MARK = "@@walkthrough "
#: of each log the walk-through leaves (serve.log, cluster-data/, local-cluster's), the
#: end shown when it fails: the temporary dir, and the logs with it, is gone by then
LOG_TAIL_CHARS = 3000


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


def after_serve(blocks: dict[str, Block]) -> list[str]:
    """The names of the blocks after `serve`, in README order."""
    names = list(blocks)
    return names[names.index("serve") + 1:]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports() -> dict[str, str]:
    """README port -> a free port of this run, distinct ones (a run of consecutive ones
    for README_PORT_RUN)."""
    ports: dict[str, str] = {}
    while len(set(ports.values())) < len(README_PORTS) + len(README_PORT_RUN):
        first = free_run(len(README_PORT_RUN))
        ports = {p: str(free_port()) for p in README_PORTS}
        ports.update({p: str(first + i) for i, p in enumerate(README_PORT_RUN)})
    return ports


def free_run(count: int) -> int:
    """A port p with p .. p + count - 1 all free right now."""
    while True:
        first = free_port()
        held = []
        try:
            for port in range(first, first + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()


def on_ports(text: str, ports: dict[str, str]) -> str:
    pattern = re.compile(r"\b(" + "|".join(ports) + r")\b")
    return pattern.sub(lambda m: ports[m.group(1)], text)


def clone_config(workdir: Path, ports: dict[str, str]) -> None:
    """The repository's config/ in `workdir`, on this run's ports."""
    for source in CONFIG.rglob("*.properties"):
        target = workdir / "config" / source.relative_to(CONFIG)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(on_ports(source.read_text(), ports))


def script(blocks: list[Block], ports: dict[str, str], prologue: str = "") -> str:
    """One bash script of `blocks`, each announced on stdout and stderr."""
    parts = ["set -euo pipefail", prologue]
    for block in blocks:
        parts.append(f"echo '{MARK}{block.name}'; echo '{MARK}{block.name}' >&2")
        parts.append(on_ports(block.code, ports))
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
    """`code` in a bash of its own process group; whatever it left running in the
    background (a block that failed before stopping its brokers) is killed after."""
    proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", code], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the README's blocks ran over {timeout_s} s:\n{out[-3000:]}\n"
                    f"{err[-3000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


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


def runnable(blocks: dict[str, Block], workdir: Path, env: dict[str, str],
             activate: str) -> list[str]:
    """The blocks after serve this machine can run (see the module's docstring)."""
    names = after_serve(blocks)
    if unavailable_reason() is not None:
        names = [n for n in names if n not in CLUSTER_BLOCKS]
    spark = run_bash(f"{activate}\npython -c 'import pyspark'", workdir, env, 60)
    if spark.returncode != 0 or shutil.which("java", path=env.get("PATH")) is None:
        names = [n for n in names if n not in SPARK_BLOCKS]
    locust = run_bash(f"{activate}\npython -c 'import locust'", workdir, env, 60)
    if locust.returncode != 0:
        names = [n for n in names if n not in LOAD_BLOCKS]
    return names


def start_broker(command: str, port: int, workdir: Path, env: dict[str, str],
                 log: Path) -> subprocess.Popen[bytes]:
    """`command` (a `pybroker serve ...`) in a shell of its own, listening on `port`."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", command],
                                cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        wait_listening(proc, port, log)
    except BaseException:
        stop_broker(proc)
        raise
    return proc


def stop_broker(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(SERVE_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def walkthrough(blocks: dict[str, Block], workdir: Path, env: dict[str, str],
                activate: str = "") -> subprocess.CompletedProcess[str]:
    """`serve` in one shell, the blocks after it in another (both in `workdir`, which
    gets the repository's config/), checked."""
    serve = blocks["serve"].code.strip()
    assert serve == "pybroker serve config/server.properties", serve
    ports = free_ports()
    clone_config(workdir, ports)
    port = int(ports[README_PORT])
    names = runnable(blocks, workdir, env, activate)
    log = workdir / "serve.log"
    brokers = []
    try:
        brokers.append(server := start_broker(f"{activate}\nexec {serve}", port, workdir,
                                              env, log))
        if "compare" in names:  # the stock Kafka it compares with: another pybroker here
            peer = int(ports[PEER_PORT])
            brokers.append(start_broker(
                f"{activate}\nexec pybroker serve --override "
                f"listeners=PLAINTEXT://127.0.0.1:{peer} --override log.dirs=peer-data",
                peer, workdir, env, workdir / "peer.log"))
        result = run_bash(script([blocks[name] for name in names], ports, activate),
                          workdir, env, WALKTHROUGH_TIMEOUT_S)
    finally:
        for proc in brokers:
            stop_broker(proc)
    check_output(result, blocks, names, workdir)
    assert server.returncode == 0, log.read_text()
    return result


def log_tails(workdir: Path) -> str:
    """The end of every log the walk-through wrote (brokers, ZooKeeper, local-cluster),
    so that a failure can be diagnosed from the test's report alone."""
    parts = []
    for path in sorted(workdir.rglob("*.log")):
        if ".venv" in path.relative_to(workdir).parts or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        parts.append(f"--- {path.relative_to(workdir)} (last {LOG_TAIL_CHARS} chars) ---\n"
                     f"{text[-LOG_TAIL_CHARS:]}")
    return "\n".join(parts)


def check_output(result: subprocess.CompletedProcess[str], blocks: dict[str, Block],
                 names: list[str], workdir: Path) -> None:
    context = f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    if result.returncode != 0:
        context += f"\nlogs:\n{log_tails(workdir)}"
    assert result.returncode == 0, context
    assert "Traceback" not in result.stderr, context
    assert not LIBRDKAFKA_LINE.search(result.stderr), context
    out, err = by_block(result.stdout), by_block(result.stderr)
    for name in names:
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
    if "local-cluster" in names:  # broker 1 killed, and the topic described after
        shown = out["local-cluster"]
        assert "broker 1 killed (kill -9 " in shown, shown
        assert len(re.findall(r"\tLeader: -?\d+\tReplicas: ", shown)) == 3, shown
        assert "Deleted play" in out["local-cluster-stop"], out["local-cluster-stop"]
    if "security" in names:  # the wrong password: the broker's reason, at once
        assert "Invalid username or password" in err["security"], err["security"]
    if "load-test" in names:  # locust's table (on stderr): produce and fetch, none failed
        shown = out["load-test"] + err["load-test"]
        rows = [line.split() for line in shown.splitlines()
                if line.startswith(("produce ", "fetch ")) and "%) |" in line]
        assert {row[0] for row in rows} == {"produce", "fetch"}, shown
        for row in rows:  # `# fails` is the first `n(p%)` column
            assert next(c for c in row if c.endswith("%)")).startswith("0("), row
        assert (workdir / "load_stats.csv").is_file()
    if "compare" in names:  # both sides measured
        shown = out["compare"]
        for phase in ("produce", "consume", "end-to-end"):
            assert f"\n{phase} 100 B records, 8 partitions" in shown, shown
        if "load-test" in names:  # the `load` extra's psutil: CPU and RSS, found by port
            assert re.search(r"peak RSS MB +[\d,]+ +[\d,]+ +[\d.]+x", shown), shown
    verifiable = out["verifiable"]
    assert '"name":"shutdown_complete"' in verifiable.replace(" ", ""), verifiable
    assert "Avg latency:" in verifiable, verifiable
    dump = out["dump-log-segments"].splitlines()
    assert dump[:2] == ["Dumping pybroker-data/demo-0/00000000000000000000.log",
                        "Log starting offset: 0"], dump


def test_readme_blocks_are_all_there() -> None:
    blocks = readme_blocks()
    for name in (*INSTALL_BLOCKS, "serve", "quickstart", "configuration", *CLUSTER_BLOCKS,
                 "security", *LOAD_BLOCKS, "compare", "tools", "tools-describe",
                 "verifiable", "consumer-groups", "dump-log-segments", *SPARK_BLOCKS):
        assert name in blocks, f"README has no walkthrough block {name!r}"
    assert list(blocks)[:len(INSTALL_BLOCKS) + 1] == [*INSTALL_BLOCKS, "serve"]
    # every command talks to a broker (or ZooKeeper) the README starts, on a port the
    # test moves to a free one; so does every config file
    texts = {name: blocks[name].code for name in after_serve(blocks)}
    texts.update({str(p): p.read_text() for p in CONFIG.rglob("*.properties")})
    for name, text in texts.items():
        ports = set(re.findall(r"(?:127\.0\.0\.1|localhost|Port)[:=](\d+)", text))
        assert ports <= {*README_PORTS, *README_PORT_RUN}, (name, ports)


def test_the_wheel_block_says_what_to_do_without_a_wheel(tmp_path: Path) -> None:
    """A fresh clone has no dist/: the wheel block says so instead of failing in pip."""
    result = run_bash(script([readme_blocks()["install-wheel"]], free_ports()), tmp_path,
                      dict(os.environ), 60)
    assert result.returncode == 0, result.stderr
    assert "no wheel in dist/: run ci/wheels first" in result.stdout, result.stdout


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

    installed = run_bash(script([blocks["venv"], blocks["install-wheel"]], free_ports()),
                         tmp_path, env, INSTALL_TIMEOUT_S)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert f"pybroker {version}" in installed.stdout.splitlines(), installed.stdout[-2000:]
    where = run_bash(". .venv/bin/activate\npython -c 'import pybroker._core as c; "
                     "print(c.__file__)'", tmp_path, env, 60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / ".venv"), where.stdout

    walkthrough(blocks, tmp_path, env, activate=". .venv/bin/activate")
