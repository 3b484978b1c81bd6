"""Issue 11: one bad client never takes the broker down, and what a client leaves
behind (socket, buffers, waiters) goes when it goes. Raw sockets against a real
broker process; resources are read off the process with psutil."""

from __future__ import annotations

import os
import resource
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil
import pytest

from tests.conftest import Broker, BrokerFactory, free_port

from . import grouprawclient as grc
from . import rawclient
from .rawclient import RawClient, frame, i32, metadata_v4, request_header

parser = pytest.importorskip("prometheus_client.parser")

WAIT_S = 20.0
DESCRIBE_GROUPS = 15
MiB = 1 << 20


# --- helpers ---------------------------------------------------------------------------
def process(b: Broker) -> psutil.Process:
    assert b.proc is not None
    return psutil.Process(b.proc.pid)


def wait_until(cond: Callable[[], bool], what: str | Callable[[], str],
               timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            text = what if isinstance(what, str) else what()
            raise AssertionError(f"timed out after {timeout}s waiting for {text}")
        time.sleep(0.05)


def client_sockets(proc: psutil.Process, port: int) -> int:
    """The broker's sockets of client connections on its Kafka listener."""
    return sum(1 for c in proc.net_connections(kind="tcp")
               if c.laddr and c.laddr.port == port and c.raddr)


#: fds the broker may open or close meanwhile besides client connections (a metrics scrape)
FD_SLACK = 2


def released(proc: psutil.Process, port: int, baseline_fds: int) -> bool:
    return client_sockets(proc, port) == 0 and proc.num_fds() <= baseline_fds + FD_SLACK


def fds_back(proc: psutil.Process, port: int, baseline: int) -> Callable[[], str]:
    def describe() -> str:
        files = sorted(os.readlink(f"/proc/{proc.pid}/fd/{fd}")
                       for fd in os.listdir(f"/proc/{proc.pid}/fd"))
        return (f"the broker's fds back to {baseline}: {client_sockets(proc, port)} client "
                f"sockets, {len(files)} open: {files}")
    return describe


def scrape(port: int) -> dict[str, float]:
    """Unlabelled gauges by name, plus the fetch purgatory as 'fetch_purgatory'."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            if not s.labels:
                out[s.name] = s.value
            elif s.name == "pybroker_purgatory_size" and s.labels.get("operation") == "fetch":
                out["fetch_purgatory"] = s.value
    return out


def assert_alive_and_serving(b: Broker) -> None:
    assert b.proc is not None and b.proc.poll() is None, "the broker died\n" + b.log_tail()
    with RawClient(b.bootstrap, timeout=5) as rc:
        assert rc.api_versions(0).error_code == 0


def addr(b: Broker) -> tuple[str, int]:
    return b.host, b.port


def make_topic(b: Broker, topic: str) -> None:
    with RawClient(b.bootstrap) as rc:
        metadata_v4(rc, [topic], True)
        wait_until(lambda: rc.list_offsets(topic, 0, -1)[0] == 0, f"topic {topic}")


def fill(b: Broker, topic: str, total_bytes: int) -> int:
    """Append about total_bytes of records in 100 KB batches; returns the record count."""
    count = 0
    with RawClient(b.bootstrap) as rc:
        while count * 10_000 < total_bytes:
            batch = rawclient.build_batch([rawclient.Rec(os.urandom(10_000)) for _ in range(10)])
            assert rc.produce(topic, 0, batch, acks=1).error_code == 0
            count += 10
    return count


def hard_close(sock: socket.socket) -> None:
    """close with SO_LINGER 0: the peer gets a RST."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Traffic:
    """A second client producing and consuming in a loop, counting round trips."""

    def __init__(self, b: Broker, topic: str) -> None:
        self.b, self.topic = b, topic
        self.rounds = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with RawClient(self.b.bootstrap, timeout=10) as rc:
                while not self._stop.is_set():
                    batch = rawclient.build_batch([rawclient.Rec(b"tick")])
                    res = rc.produce(self.topic, 0, batch, acks=1)
                    assert res.error_code == 0, res
                    part = rc.fetch(self.topic, 0, res.base_offset, max_wait_ms=100)
                    assert part.error_code == 0 and part.records, part
                    self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def __enter__(self) -> Traffic:
        self._thread.start()
        wait_until(lambda: self.rounds > 0 or bool(self.errors), "the first round trip")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)

    def assert_still_going(self) -> None:
        start = self.rounds
        wait_until(lambda: self.rounds >= start + 3 or bool(self.errors), "more round trips")
        assert not self.errors, repr(self.errors)


def group_members(b: Broker, group: str) -> int:
    """Members of a group (DescribeGroups v0)."""
    with RawClient(b.bootstrap) as rc:
        r = rawclient.Reader(rc.request(DESCRIBE_GROUPS, 0, rawclient.array(
            [rawclient.string(group)])))
    assert r.i32() == 1
    assert r.i16() == 0
    r.string(), r.string(), r.string(), r.string()  # group id, state, protocol type, protocol
    return r.i32()


@contextmanager
def raw_sockets(b: Broker, n: int) -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection(addr(b), timeout=10))
        yield socks
    finally:
        for s in socks:
            s.close()


# --- defect 1: a disconnect while a response is being sent -----------------------------
@pytest.mark.parametrize("how", ["reset", "close"])
def test_consumer_leaving_mid_fetch_response_does_not_stop_the_broker(
        broker_factory: BrokerFactory, how: str) -> None:
    b = broker_factory()
    make_topic(b, "big")
    make_topic(b, "traffic")
    fill(b, "big", 4 * MiB)
    with Traffic(b, "traffic") as traffic:
        for _ in range(3):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the response stalls
            s.settimeout(10)
            s.connect(addr(b))
            body = rawclient.fetch_body_v4("big", 0, 0, max_wait_ms=100, max_bytes=64 * MiB,
                                           partition_max_bytes=64 * MiB)
            s.sendall(frame(request_header(rawclient.API_FETCH, 4, 1) + body))
            assert s.recv(4, socket.MSG_PEEK), "the response did not start"
            if how == "reset":
                hard_close(s)
            else:
                # read what arrived, then close: a FIN, then a RST for the bytes that follow
                s.setblocking(False)
                try:
                    while s.recv(1 << 16):
                        pass
                except BlockingIOError:
                    pass
                s.close()
            traffic.assert_still_going()
    assert_alive_and_serving(b)
    log = b.log_tail(500)
    assert "Traceback" not in log and "StorageError" not in log, log


# --- defect 3: clients leaving while their requests wait -------------------------------
def test_clients_leaving_long_poll_fetches_release_sockets_and_waiters(
        broker_factory: BrokerFactory) -> None:
    port = free_port()
    b = broker_factory(metrics_port=port)
    make_topic(b, "quiet")
    proc = process(b)
    scrape(port)  # the metrics endpoint is up (it opens after the listeners)
    baseline = proc.num_fds()
    n = 200
    with raw_sockets(b, n) as socks:
        body = rawclient.fetch_body_v4("quiet", 0, 0, max_wait_ms=60_000, min_bytes=1)
        for i, s in enumerate(socks):
            s.sendall(frame(request_header(rawclient.API_FETCH, 4, i) + body))
        wait_until(lambda: scrape(port).get("fetch_purgatory") == n, f"{n} waiting fetches")
        wait_until(lambda: client_sockets(proc, b.port) == n, f"{n} client sockets")
        assert proc.num_fds() >= baseline + n - FD_SLACK
        for i, s in enumerate(socks):
            if i % 2:
                hard_close(s)
            else:
                s.close()
    # promptly, long before max_wait_ms: sockets closed, waiters gone, gauges back
    wait_until(lambda: released(proc, b.port, baseline), fds_back(proc, b.port, baseline),
               timeout=15)
    metrics = scrape(port)
    assert metrics["fetch_purgatory"] == 0
    assert metrics["pybroker_connections"] == 0
    assert_alive_and_serving(b)


def test_request_pipelined_behind_a_long_poll_waits_without_spinning_the_broker(
        broker_factory: BrokerFactory) -> None:
    """The connection keeps its readiness callback registered between reads (issue 18).
    Bytes of a pipelined request arriving while a long-poll fetch waits make the socket
    readable for as long as the fetch waits: the broker must stop watching it then, not
    wake up on it again and again, and must still answer both requests in order."""
    b = broker_factory()
    make_topic(b, "quiet")
    proc = process(b)
    wait_ms = 3000
    with RawClient(b.bootstrap, timeout=15) as rc:
        fetch = rc.send(rawclient.API_FETCH, 4,
                        rawclient.fetch_body_v4("quiet", 0, 0, max_wait_ms=wait_ms))
        cpu0 = sum(proc.cpu_times()[:2])
        sent = time.monotonic()
        pipelined = rc.send(rawclient.API_METADATA, 1, rawclient.metadata_body_v1(["quiet"]))
        corr, _ = rc.recv()
        waited = time.monotonic() - sent
        cpu = sum(proc.cpu_times()[:2]) - cpu0
        assert corr == fetch
        assert rc.recv()[0] == pipelined
    # the fetch answered at its deadline, not early; over those ~3 s an idle broker uses
    # a few tens of ms of CPU, a loop woken by the readable socket every turn a whole core
    assert waited > wait_ms / 1000 / 2, waited
    assert cpu < 0.3 * waited, f"broker used {cpu:.2f} s CPU in {waited:.2f} s of waiting"
    assert_alive_and_serving(b)


def test_clients_leaving_waiting_join_groups_release_their_sockets(
        broker_factory: BrokerFactory) -> None:
    port = free_port()
    # the initial rebalance delay keeps every JoinGroup waiting for a minute
    b = broker_factory(metrics_port=port, group_initial_rebalance_delay_ms=60_000)
    proc = process(b)
    scrape(port)  # the metrics endpoint is up (it opens after the listeners)
    with RawClient(b.bootstrap) as rc:  # as clients do: find the coordinator first
        found = grc.parse_find_coordinator_v1(rc.request(
            grc.FIND_COORDINATOR, 1, grc.find_coordinator_v1("waiting-group", 0)))
        assert found[0] == 0, found
    baseline = proc.num_fds()
    n = 200
    with raw_sockets(b, n) as socks:
        for i, s in enumerate(socks):
            body = grc.join_group_v5("waiting-group", instance_id=f"member-{i}",
                                     session_ms=30_000, rebalance_ms=60_000)
            s.sendall(frame(request_header(grc.JOIN_GROUP, 5, i) + body))
        wait_until(lambda: group_members(b, "waiting-group") == n, f"{n} members joining")
        wait_until(lambda: client_sockets(proc, b.port) == n, f"{n} client sockets")
        assert proc.num_fds() >= baseline + n - FD_SLACK
        for s in socks:
            s.close()
    wait_until(lambda: released(proc, b.port, baseline), fds_back(proc, b.port, baseline),
               timeout=15)
    assert scrape(port)["pybroker_connections"] == 0
    assert_alive_and_serving(b)


# --- defect 4: size prefixes that only claim a size -----------------------------------
def test_size_claims_do_not_allocate_what_they_claim(broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    proc = process(b)
    rss_before = proc.memory_info().rss
    claim = i32(100_000_000) + request_header(rawclient.API_PRODUCE, 3, 1)[:10]
    assert len(claim) == 14
    with raw_sockets(b, 20) as socks:
        for s in socks:
            s.sendall(claim)
        # the broker has read every claim once it answers a request sent after them
        assert_alive_and_serving(b)
        peak = rss_before
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.05)
        assert_alive_and_serving(b)
    grown = peak - rss_before
    # 20 claims of 100 MB: 2 GB if allocated up front
    assert grown < 100 * MiB, f"RSS grew by {grown / MiB:.0f} MiB"
    assert peak < 300 * MiB, f"RSS {peak / MiB:.0f} MiB"


def test_small_request_memory_pool_pauses_reads_and_every_produce_completes(
        broker_factory: BrokerFactory) -> None:
    b = broker_factory({"socket.request.max.bytes": MiB, "queued.max.request.bytes": MiB})
    make_topic(b, "pooled")
    per_client, clients = 5, 4
    batch = rawclient.build_batch([rawclient.Rec(os.urandom(100_000)) for _ in range(8)])
    assert 700_000 < len(batch) < MiB
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            with RawClient(b.bootstrap, timeout=30) as rc:
                for _ in range(per_client):
                    assert rc.produce("pooled", 0, batch, acks=1).error_code == 0
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, repr(errors)
    with RawClient(b.bootstrap) as rc:
        assert rc.high_watermark("pooled") == clients * per_client * 8
    assert_alive_and_serving(b)


# --- defect 5: idle connections and connection limits ---------------------------------
def test_idle_connections_are_closed_after_connections_max_idle_ms(
        broker_factory: BrokerFactory) -> None:
    b = broker_factory(connections_max_idle_ms=1000)
    make_topic(b, "slow")
    with RawClient(b.bootstrap) as idle, RawClient(b.bootstrap, timeout=15) as polling:
        assert idle.api_versions(0).error_code == 0
        # a request in progress longer than the idle limit keeps its connection
        started = time.monotonic()
        part = polling.fetch("slow", 0, 0, max_wait_ms=2500)
        assert part.error_code == 0 and time.monotonic() - started >= 2.0
        assert idle.is_closed_by_peer(timeout=10), "the idle connection stayed open"
        assert polling.api_versions(0).error_code == 0
        assert polling.is_closed_by_peer(timeout=10)
    assert_alive_and_serving(b)


@pytest.mark.parametrize("limits", [
    {"max.connections.per.ip": 3},
    {"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "127.0.0.1:3"},
])
def test_connections_over_the_per_ip_limit_are_closed(
        broker_factory: BrokerFactory, limits: dict[str, object]) -> None:
    b = broker_factory(limits)
    clients = [RawClient(b.bootstrap) for _ in range(3)]
    try:
        for rc in clients:
            assert rc.api_versions(0).error_code == 0
        with RawClient(b.bootstrap) as extra:
            assert extra.is_closed_by_peer(), "a 4th connection from 127.0.0.1 was kept"
        clients[0].close()

        def another_is_served() -> bool:
            try:
                with RawClient(b.bootstrap, timeout=2) as again:
                    return again.api_versions(0).error_code == 0
            except (OSError, struct.error):
                return False
        wait_until(another_is_served, "a connection once one closed")
        assert clients[1].api_versions(0).error_code == 0
    finally:
        for rc in clients:
            rc.close()
    assert "Rejected connection from 127.0.0.1" in b.log_tail(200)


def test_at_max_connections_new_connections_wait_to_be_accepted(
        broker_factory: BrokerFactory) -> None:
    b = broker_factory(max_connections=3)
    first = [RawClient(b.bootstrap) for _ in range(3)]
    try:
        for rc in first:
            assert rc.api_versions(0).error_code == 0
        waiting = RawClient(b.bootstrap, timeout=10)  # the kernel completes the handshake
        try:
            corr = waiting.send(rawclient.API_VERSIONS, 0, b"")
            waiting.sock.settimeout(1.0)
            with pytest.raises(TimeoutError):
                waiting.recv()  # not accepted, so not answered
            first[0].close()
            waiting.sock.settimeout(10)
            got, body = waiting.recv()
            assert got == corr and rawclient.parse_api_versions_v0(body).error_code == 0
        finally:
            waiting.close()
    finally:
        for rc in first:
            rc.close()


def test_many_idle_connections_cost_little_and_give_memory_back(
        broker_factory: BrokerFactory) -> None:
    n = 2000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:  # for this process and the broker, which inherits it
        if hard != resource.RLIM_INFINITY and hard < n + 200:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below {n + 200}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + 200, hard))
    b = broker_factory()
    proc = process(b)
    with RawClient(b.bootstrap) as warm:  # the first requests import and cache code
        for _ in range(20):
            warm.api_versions(0)
    rss_before = proc.memory_info().rss
    fds_before = proc.num_fds()
    probe = frame(request_header(rawclient.API_VERSIONS, 0, 1))
    with raw_sockets(b, n) as socks:
        for s in socks:
            s.sendall(probe)
        for s in socks:  # every connection was accepted and has been served once
            s.settimeout(10)
            assert s.recv(4, socket.MSG_WAITALL)
        wait_until(lambda: client_sockets(proc, b.port) == n, f"{n} client sockets")
        rss_during = proc.memory_info().rss
    wait_until(lambda: released(proc, b.port, fds_before), fds_back(proc, b.port, fds_before))
    rss_after = proc.memory_info().rss
    per_conn = (rss_during - rss_before) / n
    assert per_conn < 32 * 1024, f"{per_conn / 1024:.1f} KiB per idle connection"
    # what stays is the Python allocator's (about the objects' size, reused by the next
    # connections); the 64 KiB per connection read buffers of old stayed as well
    kept = rss_after - rss_before
    assert kept < 32 * MiB, f"{kept / MiB:.1f} MiB kept after the connections closed"
    assert_alive_and_serving(b)
