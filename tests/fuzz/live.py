"""The live long run: mutated requests over many raw connections to a broker process.

1. Start ``pybroker serve`` on loopback (a free port unless given) with a fresh data dir.
2. Create the playground topics the corpus names, a group member and an idempotent
   producer it names too (``state.establish``), and the known-data topic, which no
   corpus request names. Produce known records with confluent-kafka (acks=all) and
   record every acknowledged (partition, offset) -> (key, value); a slow trickle of
   further acknowledged records keeps going while the fuzzing runs.
3. Build the corpus: valid request frames of every declared API and version, drawn
   from the Hypothesis strategies with a fixed seed, and the layout of each.
4. Send N inputs over C raw connections at once: a few percent valid corpus requests,
   the rest mutations of them (``mutate``), a few with a lying size prefix, some
   pipelined in bursts of 2-5. The project's own decoder predicts each outcome (the
   server layer must agree with it): an answer with the right correlation id, in
   order, no answer (acks=0 produce), or the connection closed (after answering
   what came before it). Disagreements are recorded with the frame, for replay.
5. Every second: the broker's RSS, fd and socket counts; that the process is alive.
6. At the end: sockets back to the baseline (bounded wait), RSS growth bounded,
   every acknowledged record read back intact, no ERROR or traceback in the broker's
   log, a clean SIGTERM exit, and after a restart on the same data the records again.

Everything is bounded: inputs, a total time budget, every wait. Loopback only.
Run by hand with ``bench/fuzz_live.py``; ``test_live.py`` runs a short one in CI.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import selectors
import socket
import struct
import sys
import tempfile
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil

from pybroker.handlers.registry import HANDLERS
from pybroker.protocol import (
    Api,
    ProtocolError,
    UnsupportedVersionError,
    decode_request,
)

from .layout import Slot, layout
from .livebroker import (
    HOST,
    BrokerProcess,
    KnownProducer,
    Trickle,
    admin_setup,
    ensure_playground,
    raw_request,
    read_back,
    settled_usage,
    usage,
)
from .mutate import mutate
from .state import establish
from .strategies import Names, declared_versions, encode_frame, request_bodies

PRODUCE, FETCH, JOIN_GROUP, SYNC_GROUP, API_VERSIONS = 0, 1, 11, 14, 18
CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
#: how long the client waits for a request that may long-poll before giving up on it
LONG_POLL_GIVE_UP_S = 1.0
#: how long an answer (or a close) may take on a loaded 2-core box
ANSWER_TIMEOUT_S = 10.0
MISMATCH_SAMPLES = 20
#: how often the playground topics are created again (fuzzed DeleteTopics remove them)
PLAYGROUND_UPKEEP_S = 5.0


@dataclass
class LiveConfig:
    inputs: int = 1_000_000
    connections: int = 32
    seed: int = 1
    corpus_per_version: int = 30
    #: share of inputs sent unmutated, and with a size prefix that lies
    valid_share: float = 0.05
    framing_share: float = 0.01
    #: share of sends that pipeline 1-4 valid requests and an input on one connection
    pipeline_share: float = 0.1
    known_records: int = 5000
    #: acknowledged records produced per second while the fuzzing runs
    trickle_per_s: float = 50.0
    max_seconds: float = 3000.0
    sample_interval_s: float = 1.0
    rss_growth_max_mb: float = 512.0
    settle_s: float = 30.0
    port: int = 0
    data_dir: str | None = None
    restart_check: bool = True
    #: extra broker settings (--override key=value)
    overrides: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    config: dict[str, Any]
    inputs_sent: int = 0
    duration_s: float = 0.0
    corpus_frames: int = 0
    corpus_build_s: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    mutations: Counter[str] = field(default_factory=Counter)
    mismatches: int = 0
    mismatch_samples: list[dict[str, Any]] = field(default_factory=list)
    connects: int = 0
    connect_errors: int = 0
    rss_mb: list[float] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    sockets: list[int] = field(default_factory=list)
    baseline_fds: int = 0
    baseline_sockets: int = 0
    baseline_rss_mb: float = 0.0
    final_fds: int = 0
    final_sockets: int = 0
    final_rss_mb: float = 0.0
    partitions_at_end: int = 0
    #: requests the client gave up on whose own wait (max_wait_ms, a rebalance) had
    #: not ended by the final count: the broker may still hold their sockets
    waits_pending_at_end: int = 0
    final_socket_states: dict[str, int] = field(default_factory=dict)
    acked_records: int = 0
    acked_checked: int = 0
    acked_bad: list[str] = field(default_factory=list)
    acked_checked_after_restart: int = 0
    broker_alive: bool = True
    broker_exit_code: int | None = None
    broker_errors: list[str] = field(default_factory=list)
    broker_warnings: int = 0
    stopped_early: str = ""

    @property
    def inputs_per_s(self) -> float:
        return self.inputs_sent / self.duration_s if self.duration_s else 0.0

    def failures(self) -> list[str]:
        """What the run found wrong; empty when the broker held up."""
        out = []
        if not self.broker_alive:
            out.append("the broker died")
        if self.stopped_early:
            out.append(f"stopped early: {self.stopped_early}")
        if self.mismatches:
            out.append(f"{self.mismatches} outcomes disagree with the decoder")
        allowed = self.baseline_sockets + self.waits_pending_at_end
        if self.final_sockets > allowed:
            out.append(f"sockets {self.final_sockets} > baseline {self.baseline_sockets} + "
                       f"{self.waits_pending_at_end} requests still waiting")
        growth = max(self.rss_mb, default=0.0) - self.baseline_rss_mb
        if growth > self.config["rss_growth_max_mb"]:
            out.append(f"RSS grew {growth:.0f} MB")
        if self.acked_bad or self.acked_checked != self.acked_records:
            out.append(f"acknowledged records: {self.acked_checked}/{self.acked_records} "
                       f"intact, {len(self.acked_bad)} bad")
        if self.config["restart_check"] and self.acked_checked_after_restart != self.acked_records:
            out.append(f"after restart: {self.acked_checked_after_restart}/"
                       f"{self.acked_records} intact")
        if self.broker_errors:
            out.append(f"{len(self.broker_errors)} errors in the broker log")
        if self.broker_exit_code not in (0, None):
            out.append(f"broker exit code {self.broker_exit_code}")
        return out

    def to_json(self) -> dict[str, Any]:
        # asdict would rebuild a Counter from (key, count) pairs
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["outcomes"], out["mutations"] = dict(self.outcomes), dict(self.mutations)
        out["inputs_per_s"] = self.inputs_per_s
        out["failures"] = self.failures()
        return out


def count_partitions(data_dir: Path) -> int:
    """Partition directories in the data dir (topics the fuzzing created count too)."""
    return sum(1 for d in data_dir.iterdir() if d.is_dir() and "-" in d.name)


# ---------------------------------------------------------------------------- corpus


@dataclass
class Entry:
    frame: bytes
    slots: list[Slot]


def build_corpus(per_version: int, seed: int, names: Names) -> list[Entry]:
    """Valid frames of every declared API and version, drawn with a fixed seed."""
    frames: list[bytes] = []
    for api, version in declared_versions():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _collector(api, version, per_version, seed, names, frames)()
    return [Entry(f, layout(f)) for f in frames]


def _collector(api: Api, version: int, count: int, seed: int, names: Names,
               frames: list[bytes]) -> Callable[[], None]:
    """A Hypothesis run that appends ``count`` encoded requests to ``frames``."""
    import hypothesis
    from hypothesis import HealthCheck, Phase

    # legal creations would pile up topics (fds, metadata size) over a long run;
    # only a mutated validate_only byte still creates some
    validate_only = api.key in (CREATE_TOPICS, CREATE_PARTITIONS)

    @hypothesis.seed(seed)
    @hypothesis.settings(max_examples=count, database=None, deadline=None,
                         phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @hypothesis.given(request_bodies(api, version, names))
    def collect(body: dict[str, Any]) -> None:
        if validate_only:
            body["validate_only"] = True
        frames.append(encode_frame(api, version, len(frames), "fuzz-live", body))

    return collect  # type: ignore[no-any-return]


# ------------------------------------------------------------------- expected outcome

ANSWER, CLOSE, SILENT, ANY = "answer", "close", "silent", "any"


def expectation(frame: bytes) -> tuple[str, int, float]:
    """What the broker must do with ``frame`` by the project's decoder: (outcome,
    correlation id, how long it may legitimately wait before answering)."""
    try:
        header, body = decode_request(frame)
    except UnsupportedVersionError as exc:
        if exc.header.api_key == API_VERSIONS:
            return ANSWER, exc.header.correlation_id, 0.0
        return CLOSE, 0, 0.0
    except ProtocolError:
        return CLOSE, 0, 0.0
    spec = HANDLERS.get(header.api_key)
    if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
        if header.api_key == API_VERSIONS:
            return ANSWER, header.correlation_id, 0.0
        return CLOSE, 0, 0.0
    if header.api_key == PRODUCE and body["acks"] == 0:
        return SILENT, 0, 0.0
    if header.api_key == FETCH:
        return ANSWER, header.correlation_id, max(0, body["max_wait_ms"]) / 1000
    if header.api_key in (JOIN_GROUP, SYNC_GROUP):
        return ANSWER, header.correlation_id, float("inf")
    return ANSWER, header.correlation_id, 0.0


# ------------------------------------------------------------------------- the sender


@dataclass
class Sent:
    """One input on a connection, with what the decoder says must come of it."""

    expect: str
    correlation_id: int
    may_wait_s: float
    frame: bytes
    how: tuple[str, ...]


@dataclass
class Conn:
    sock: socket.socket | None = None
    #: inputs sent and not yet settled, in order (a pipelined burst holds several)
    pending: deque[Sent] = field(default_factory=deque)
    #: when the request at the head of ``pending`` started to wait
    since: float = 0.0
    buf: bytearray = field(default_factory=bytearray)
    #: what this connection carried before (for a mismatch's report)
    history: list[str] = field(default_factory=list)

    def head(self) -> Sent | None:
        """The first pending input that expects something (acks=0 produce expects nothing)."""
        while self.pending and self.pending[0].expect == SILENT:
            self.pending.popleft()
        return self.pending[0] if self.pending else None


class Fuzzer:
    def __init__(self, cfg: LiveConfig, port: int, corpus: list[Entry], result: Result) -> None:
        self.cfg = cfg
        self.port = port
        self.corpus = corpus
        self.result = result
        self.rng = random.Random(cfg.seed)
        self.sel = selectors.DefaultSelector()
        self.conns = [Conn() for _ in range(cfg.connections)]
        #: when each request the client gave up on may end its wait (monotonic time)
        self.abandoned_until: list[float] = []

    def next_input(self, valid: bool = False) -> tuple[bytes, Sent]:
        """The bytes to send (size prefix included) and what must come of them."""
        rng = self.rng
        entry = self.corpus[rng.randrange(len(self.corpus))]
        roll = rng.random()
        if valid or roll < self.cfg.valid_share:
            frame, how = entry.frame, ["valid"]
        else:
            donor = self.corpus[rng.randrange(len(self.corpus))].frame
            frame, how = mutate(entry.frame, entry.slots, rng, donor)
        size = len(frame)
        if roll > 1 - self.cfg.framing_share:
            size = rng.choice([size + 1, size + 8, max(size - 1, 0), 2**31 - 1, -1, 0])
            sent = Sent(ANY, 0, 0.0, frame, (*how, "size-prefix"))
        else:
            sent = Sent(*expectation(frame), frame, tuple(how))
        return struct.pack(">i", size) + frame, sent

    def connect(self, c: Conn) -> bool:
        try:
            sock = socket.create_connection((HOST, self.port), timeout=ANSWER_TIMEOUT_S)
        except OSError:
            self.result.connect_errors += 1
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sock = sock
        self.result.connects += 1
        return True

    def drop(self, c: Conn, reset: bool = False) -> None:
        if c.sock is not None:
            if c.sock in self.sel.get_map():
                self.sel.unregister(c.sock)
            if reset:  # RST instead of FIN: no TIME_WAIT left behind, and a path of its own
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.sock.close()
        c.sock = None
        c.pending.clear()
        c.buf.clear()
        c.history.clear()

    def send(self, c: Conn) -> bool:
        """Send the next input, or a pipelined burst of them, on an idle connection;
        False when it could not connect."""
        if c.sock is None and not self.connect(c):
            return False
        burst = 1
        if self.rng.random() < self.cfg.pipeline_share:
            burst = self.rng.randint(2, 5)
        burst = min(burst, self.cfg.inputs - self.result.inputs_sent)
        data = bytearray()
        reached = True  # the broker reads no further than a request it closes on
        for i in range(burst):
            # a burst is valid requests, then one input like any other: answers in
            # order, then whatever the last one gets (a close answers the rest first)
            raw, sent = self.next_input(valid=i < burst - 1)
            data += raw
            self.result.mutations.update(sent.how)
            self.result.inputs_sent += 1
            c.history.append(f"{sent.expect}:{sent.frame[:48].hex()}")
            if not reached:
                self.result.outcomes["pipelined behind a close (never read)"] += 1
                continue
            if sent.expect == SILENT:
                self.result.outcomes["acks=0 produce (no answer expected)"] += 1
            c.pending.append(sent)
            reached = sent.expect not in (CLOSE, ANY)
        del c.history[:-8]
        assert c.sock is not None
        try:
            c.sock.sendall(data)
        except OSError:
            # the broker closed this connection after an earlier request
            self.result.outcomes["send failed (closed earlier)"] += 1
            self.drop(c)
            return True
        c.since = time.monotonic()
        if c.head() is None:  # acks=0 produce only: nothing will come back
            self.drop(c, reset=self.rng.random() < 0.5)
        else:
            self.sel.register(c.sock, selectors.EVENT_READ, c)
        return True

    def mismatch(self, c: Conn, sent: Sent | None, what: str) -> None:
        self.result.mismatches += 1
        self.result.outcomes[f"MISMATCH: {what}"] += 1
        if len(self.result.mismatch_samples) < MISMATCH_SAMPLES:
            self.result.mismatch_samples.append({
                "what": what, "expected": sent.expect if sent else None,
                "mutations": list(sent.how) if sent else [],
                "frame": sent.frame.hex() if sent else "", "connection": list(c.history),
                "at": time.strftime("%H:%M:%S")})
        self.drop(c, reset=True)

    def readable(self, c: Conn) -> None:
        assert c.sock is not None
        try:
            chunk = c.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            head = c.head()
            if head is None or head.expect == ANSWER:
                self.mismatch(c, head, "closed instead of answering")
                return
            self.result.outcomes["closed" if head.expect == CLOSE else
                                 "size prefix lied: closed"] += 1
            self.drop(c)
            return
        c.buf += chunk
        while len(c.buf) >= 8:
            (size, correlation_id) = struct.unpack_from(">ii", c.buf)
            if len(c.buf) < 4 + size:
                return
            del c.buf[:4 + size]
            head = c.head()
            if head is not None and head.expect == ANY:
                # the stream is out of step after a lying size prefix: done with it
                self.result.outcomes["size prefix lied: answered"] += 1
                self.drop(c)
                return
            if head is None or head.expect == CLOSE:
                self.mismatch(c, head, "answered a request the decoder rejects")
                return
            if correlation_id != head.correlation_id:
                self.mismatch(c, head, "wrong correlation id (or out of order)")
                return
            self.result.outcomes["answered"] += 1
            c.pending.popleft()
            c.since = time.monotonic()
        if c.head() is None:
            if c.buf:
                self.mismatch(c, None, "bytes after the last response")
            elif self.rng.random() < 0.3:  # and sometimes the client just goes
                self.drop(c)
            else:
                self.sel.unregister(c.sock)

    def overdue(self, c: Conn, now: float) -> None:
        head = c.head()
        if head is None:
            return
        waited = now - c.since
        if head.expect == ANY:
            if waited > LONG_POLL_GIVE_UP_S:
                self.result.outcomes["size prefix lied: client gave up"] += 1
                self.drop(c, reset=True)
        elif head.may_wait_s > LONG_POLL_GIVE_UP_S and waited > LONG_POLL_GIVE_UP_S:
            self.result.outcomes["long poll: client gave up"] += 1
            self.abandoned_until.append(c.since + head.may_wait_s)
            self.drop(c, reset=self.rng.random() < 0.5)
        elif waited > head.may_wait_s + ANSWER_TIMEOUT_S:
            self.mismatch(c, head, f"no {head.expect} within {waited:.1f}s")

    def run(self, deadline: float, on_tick: Callable[[], bool]) -> None:
        next_tick = next_upkeep = 0.0
        while True:
            now = time.monotonic()
            if now >= next_tick:
                if not on_tick():
                    return
                next_tick = now + self.cfg.sample_interval_s
                if now >= next_upkeep:
                    ensure_playground(self.port)
                    next_upkeep = now + PLAYGROUND_UPKEEP_S
            if now > deadline:
                self.result.stopped_early = f"time budget {self.cfg.max_seconds:.0f}s spent"
                return
            idle = [c for c in self.conns if not c.pending]
            if self.result.inputs_sent >= self.cfg.inputs and len(idle) == len(self.conns):
                return
            for c in idle:
                if self.result.inputs_sent < self.cfg.inputs and not self.send(c):
                    time.sleep(0.01)  # cannot connect: on_tick will find out why
                    break
            if self.sel.get_map():
                for key, _ in self.sel.select(timeout=0.05):
                    if key.data.sock is not None:
                        self.readable(key.data)
            now = time.monotonic()
            for c in self.conns:
                if c.pending:
                    self.overdue(c, now)

    def close_all(self) -> None:
        for c in self.conns:
            self.drop(c)
        self.sel.close()


# ------------------------------------------------------------------------------ run


def run(cfg: LiveConfig, out: Any = sys.stdout) -> Result:
    result = Result(config=asdict(cfg))
    tmp = None
    if cfg.data_dir:  # kept: a fresh run directory under it
        base = Path(cfg.data_dir) / time.strftime("run-%Y%m%dT%H%M%S")
        base.mkdir(parents=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="pybroker-fuzz-")
        base = Path(tmp.name)
    overrides = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
                 **cfg.overrides}
    broker = BrokerProcess(base / "data", cfg.port, overrides)

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    try:
        say(f"fuzz-live: broker on {HOST}:{broker.port}, data {broker.data_dir}, "
            f"log {broker.log_path}")
        broker.start()
        assert broker.proc is not None
        proc = psutil.Process(broker.proc.pid)
        admin_setup(broker.bootstrap)
        producer = KnownProducer(broker.bootstrap)
        for i in range(cfg.known_records):
            producer.produce(i)
        producer.flush()
        say(f"fuzz-live: {len(producer.acked)} known records acknowledged")

        names = establish(functools.partial(raw_request, broker.port))
        started = time.monotonic()
        corpus = build_corpus(cfg.corpus_per_version, cfg.seed, names)
        result.corpus_build_s = time.monotonic() - started
        result.corpus_frames = len(corpus)
        say(f"fuzz-live: corpus of {len(corpus)} valid frames in {result.corpus_build_s:.1f}s")

        rss, fds, sockets = settled_usage(proc, None, cfg.settle_s)
        result.baseline_rss_mb, result.baseline_fds, result.baseline_sockets = rss, fds, sockets
        # the trickle producer keeps one connection of its own open from here on
        trickle = Trickle(producer, cfg.known_records, cfg.trickle_per_s)
        trickle.start()

        fuzzer = Fuzzer(cfg, broker.port, corpus, result)
        last_report = [time.monotonic()]

        def tick() -> bool:
            if not broker.alive():
                result.broker_alive = False
                return False
            try:
                rss, fds, sockets = usage(proc)
            except (psutil.Error, OSError):
                result.broker_alive = broker.alive()
                return result.broker_alive
            result.rss_mb.append(rss)
            result.fds.append(fds)
            result.sockets.append(sockets)
            if time.monotonic() - last_report[0] >= 10:
                last_report[0] = time.monotonic()
                elapsed = time.monotonic() - started
                say(f"fuzz-live: {result.inputs_sent} inputs, {elapsed:.0f}s, "
                    f"{result.inputs_sent / elapsed:.0f}/s, RSS {rss:.0f} MB, fds {fds} "
                    f"({sockets} sockets), mismatches {result.mismatches}")
            return True

        started = time.monotonic()
        try:
            fuzzer.run(started + cfg.max_seconds, tick)
        finally:
            result.duration_s = time.monotonic() - started
            fuzzer.close_all()
            trickle.stop()
            producer.flush()
        acked = producer.acked
        result.acked_records = len(acked)
        say(f"fuzz-live: {result.inputs_sent} inputs in {result.duration_s:.1f}s; "
            f"checking the broker")
        del producer, trickle  # the producer's connection goes with it
        if broker.alive():
            rss, fds, sockets = settled_usage(proc, result.baseline_sockets, cfg.settle_s)
            result.final_rss_mb, result.final_fds, result.final_sockets = rss, fds, sockets
            now = time.monotonic()
            result.waits_pending_at_end = sum(t > now for t in fuzzer.abandoned_until)
            result.final_socket_states = dict(Counter(
                c.status for c in proc.net_connections(kind="tcp")))
            result.rss_mb.append(rss)
            result.partitions_at_end = count_partitions(broker.data_dir)
            result.acked_checked, result.acked_bad = read_back(broker.bootstrap, acked)
        else:
            result.broker_alive = False
        result.broker_exit_code = broker.stop()
        if cfg.restart_check and result.broker_alive:
            broker.start()
            result.acked_checked_after_restart, bad = read_back(broker.bootstrap, acked)
            result.acked_bad += [f"after restart: {b}" for b in bad]
            code = broker.stop()
            if code != 0:
                result.broker_exit_code = code
        result.broker_errors, result.broker_warnings = broker.log_problems()
    finally:
        broker.kill()
        if tmp is not None:
            tmp.cleanup()
    return result


# --------------------------------------------------------------------------- report


def summary(result: Result) -> str:
    cfg = result.config
    rows = [
        ("inputs", f"{result.inputs_sent:,} (asked {cfg['inputs']:,}; seed {cfg['seed']}, "
                   f"{cfg['connections']} connections)"),
        ("duration", f"{result.duration_s:,.1f} s"),
        ("inputs/s", f"{result.inputs_per_s:,.0f}"),
        ("corpus", f"{result.corpus_frames:,} valid frames, every declared API and version "
                   f"({result.corpus_build_s:.1f} s to build)"),
        ("connections opened", f"{result.connects:,} ({result.connect_errors} connect errors)"),
        ("RSS MB min/max", f"{min(result.rss_mb, default=0):.0f} / "
                           f"{max(result.rss_mb, default=0):.0f} (baseline "
                           f"{result.baseline_rss_mb:.0f}, final {result.final_rss_mb:.0f})"),
        ("fds baseline/peak/final", f"{result.baseline_fds} / {max(result.fds, default=0)} / "
                                    f"{result.final_fds}"),
        ("sockets baseline/peak/final", f"{result.baseline_sockets} / "
                                        f"{max(result.sockets, default=0)} / "
                                        f"{result.final_sockets}"),
        ("sockets at end by state", ", ".join(
            f"{k} {v}" for k, v in sorted(result.final_socket_states.items()))),
        ("abandoned waits not over", f"{result.waits_pending_at_end} (the broker may hold "
                                     "their sockets until they end)"),
        ("partition dirs at end", f"{result.partitions_at_end}"),
        ("acked records checked", f"{result.acked_checked:,} / {result.acked_records:,} intact; "
                                  f"after restart {result.acked_checked_after_restart:,}"),
        ("broker log", f"{len(result.broker_errors)} errors, {result.broker_warnings:,} warnings"),
        ("broker exit code", f"{result.broker_exit_code}"),
        ("mismatches", f"{result.mismatches}"),
    ]
    rows += [(f"  {name}", f"{count:,}") for name, count in result.outcomes.most_common()]
    rows.append(("mutations applied", ", ".join(
        f"{name} {count:,}" for name, count in result.mutations.most_common())))
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    for sample in result.mismatch_samples[:5]:
        lines.append(f"mismatch: {json.dumps(sample)}")
    for line in result.broker_errors[:10]:
        lines.append(f"broker error: {line}")
    failures = result.failures()
    lines.append("RESULT: " + ("; ".join(failures) if failures else "ok"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    d = LiveConfig()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=d.inputs, help="inputs to send")
    ap.add_argument("--connections", type=int, default=d.connections,
                    help="raw connections in use at once")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--corpus-per-version", type=int, default=d.corpus_per_version,
                    help="valid frames generated per API version")
    ap.add_argument("--known-records", type=int, default=d.known_records)
    ap.add_argument("--trickle-per-s", type=float, default=d.trickle_per_s,
                    help="acknowledged records produced per second during the run")
    ap.add_argument("--max-seconds", type=float, default=d.max_seconds,
                    help="time budget of the sending phase")
    ap.add_argument("--rss-growth-max-mb", type=float, default=d.rss_growth_max_mb)
    ap.add_argument("--port", type=int, default=d.port, help="broker port (default: a free one)")
    ap.add_argument("--data-dir", help="broker data dir parent (default: a temp dir, removed)")
    ap.add_argument("--no-restart-check", action="store_true",
                    help="skip the restart and second read-back")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker setting")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args(argv)
    cfg = LiveConfig(inputs=args.inputs, connections=args.connections, seed=args.seed,
                     corpus_per_version=args.corpus_per_version,
                     known_records=args.known_records, trickle_per_s=args.trickle_per_s,
                     max_seconds=args.max_seconds, rss_growth_max_mb=args.rss_growth_max_mb,
                     port=args.port, data_dir=args.data_dir,
                     restart_check=not args.no_restart_check,
                     overrides=dict(o.split("=", 1) for o in args.override))
    result = run(cfg)
    print(summary(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1, default=list))
    return 1 if result.failures() else 0
