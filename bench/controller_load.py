#!/usr/bin/env python3
"""A new controller's work at scale, without brokers (issue 25): how long a controller
elected over N existing partition states takes to read them all and to move a dead
broker's partitions.

On a ZooKeeper of its own (Debian's package, as tests/cluster): three broker
registrations (three kazoo sessions, each with a listener that accepts connections,
as the controller watches them), N partitions as 100-partition topics at RF 3 with
their states written directly (the preferred replica leads, full ISR), then in this
process the real Controller (python/pybroker/controller/) is started:

1. **Load.** Time from its start until it is controller, and until its first pass over
   every topic is done (the states are all read; nothing needs writing): no topic
   pending and no reconcile running.
2. **Elections.** Broker 3's session is closed (its registration goes, as when a
   broker dies and its session ends): time until the controller noticed, until it has
   written every change (N/3 new leaders and 2N/3 ISR shrinks: its reconcile is done),
   and until no state in ZooKeeper names broker 3 as leader or in an ISR (read back
   with multiReads once the controller is done, polled only if it is not right yet:
   polling 30,000 states in the controller's process would slow the controller).
3. **A broker's view.** A separate process (`--watcher`) watches every partition state
   as a broker does (the backend's watch_partition_states, as metadata/listener.py):
   time until it has seen every state without broker 3.

With `--failover`, the issue's kill -9 of the controller instead: broker 3 is the
controller that died. Its registration stays (its session has not expired) but its
listener is closed before the new controller starts, as a killed process's is; the
new controller has to load every state, find broker 3 gone and move all of it:
time from its start (in a cluster, when the brokers found /controller's owner gone
and one of them was elected) until it is controller, and until it has written every
state without broker 3 (its own view: every partition's write done), then read back.

Besides wall-clock times, the CPU seconds each process spent (all its threads: the
event loop and kazoo's) from the close until the controller was done, and in the
watching process until it had seen every change: on a shared, loaded machine the wall
clock mostly measures the wait for a core, the CPU time what the work costs.

ZooKeeper runs as an operator runs it (`--zookeeper production`, the default: the JVM
as zkServer.sh starts it, forceSync=yes), or as tests/cluster's quick test server
(`--zookeeper test`: small heap, serial GC, client compiler only, no fsync), which the
figures in bench/RESULTS.md before issue 25's `elect25` section used.

Run it against another checkout with PYTHONPATH=<checkout>/python to compare. Every
wait is bounded.

    python bench/controller_load.py --partitions 10000
    python bench/controller_load.py --partitions 30000 --json out.json
    python bench/controller_load.py --partitions 30000 --failover
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from pybroker.config import BrokerConfig  # noqa: E402
from pybroker.controller.controller import Controller  # noqa: E402
from pybroker.coordination.base import StateUpdate, TopicAssignment  # noqa: E402
from pybroker.coordination.zkmultiread import get_many  # noqa: E402
from pybroker.coordination.zookeeper import ZooKeeperBackend  # noqa: E402
from pybroker.coordination.znodes import BrokerRegistration, LeaderAndIsr  # noqa: E402
from tests.cluster.zookeeper import ZooKeeperServer, unavailable_reason  # noqa: E402

PER_TOPIC = 100
BROKERS = (1, 2, 3)
#: the ZooKeeper server's process id (its CPU seconds are read from /proc)
ZOOKEEPER_PID = [0]


def zookeeper_cpu_s() -> float:
    """CPU seconds ZooKeeper's JVM has used so far (0 where /proc cannot tell)."""
    return process_cpu_s(ZOOKEEPER_PID[0])


def process_cpu_s(pid: int) -> float:
    """CPU seconds process `pid` has used so far, all its threads (0 where /proc cannot
    tell)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def zookeeper_threads_cpu_s() -> dict[str, float]:
    """ZooKeeper's CPU seconds so far by kind of thread (the JIT compiler's, the garbage
    collector's, the request pipeline's...): thread names with their numbers dropped."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{ZOOKEEPER_PID[0]}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")].rstrip("0123456789:-# ")
        fields = stat.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK")
    return out


def cpu_by_thread(start: dict[str, float], end: dict[str, float]) -> dict[str, float]:
    spent = {k: round(v - start.get(k, 0.0), 2) for k, v in end.items()}
    return dict(sorted(((k, v) for k, v in spent.items() if v >= 0.01),
                       key=lambda kv: -kv[1]))


async def warm_zookeeper(connect: str, names: list[str], rounds: int, pids: list[int],
                         tmp: Path, timeout: float) -> float:
    """Serve ZooKeeper what a running cluster's ZooKeeper serves, `rounds` times: a
    controller (the real one, broker 99, on a session of its own) elected, its watches
    set and its first pass over every state read, every state rewritten unchanged in
    its fenced multis (the watching process's persistent watch fires and it re-reads
    them), the controller resigning and its session closed; then wait until ZooKeeper
    and the watching process are idle. A ZooKeeper that has served a cluster for a
    while has its JIT's compiled code for all of these; one started seconds before
    compiles it during the measured phase, and code compiled after seeing only some
    kinds of request is thrown away and compiled again at the first other kind (in
    issue 25's fail30k runs, 1.6-1.7 of ZooKeeper's 2.4-3.4 CPU seconds in the
    measured phase went to its compiler threads). Returns the seconds it took."""
    started = time.monotonic()
    keys = [(n, p) for n in names for p in range(PER_TOPIC)]
    for _ in range(rounds):
        backend = ZooKeeperBackend(connect, session_timeout_ms=30000,
                                   request_timeout_ms=120000)
        await backend.start()
        controller = Controller(99, backend, BrokerConfig({"log.dirs": str(tmp),
                                                           "broker.id": "99"}))
        passes = [0]
        reconcile = controller._reconcile

        async def counted(*args: Any, reconcile: Any = reconcile,
                          passes: list[int] = passes) -> None:
            await reconcile(*args)
            passes[0] += 1

        controller._reconcile = counted  # type: ignore[method-assign]
        async with anyio.create_task_group() as tg:
            tg.start_soon(controller.run)

            async def loaded(controller: Controller = controller,
                             passes: list[int] = passes) -> bool:
                return (controller.is_active and len(controller._topics) >= len(names)
                        and not controller._pending and passes[0] > 0)

            await wait_until(loaded, timeout, "the warm-up controller's first pass")
            lease = controller.lease
            states = await backend.partition_states_of(keys)
            outcomes = await backend.update_partition_states(
                [StateUpdate(t, p, s.state, s.version) for (t, p), s in states.items()],
                lease)
            if not all(isinstance(o, int) for o in outcomes.values()):
                raise RuntimeError("a warm-up write failed")
            tg.cancel_scope.cancel()
        await controller.resign()
        await backend.close()
    deadline = time.monotonic() + timeout
    before = [process_cpu_s(p) for p in pids]
    while time.monotonic() < deadline:
        await anyio.sleep(0.5)
        now = [process_cpu_s(p) for p in pids]
        if all(b - a < 0.05 for a, b in zip(before, now, strict=True)):
            return time.monotonic() - started
        before = now
    raise RuntimeError(f"ZooKeeper and the watching process still busy after {timeout} s")


def replicas(index: int) -> list[int]:
    return [BROKERS[(index + k) % 3] for k in range(3)]


async def idle(stream: Any) -> None:
    async with stream:
        await anyio.sleep_forever()


class Listener:
    """A broker's listener (the controller watches it: refused means the process is
    gone), served until `close()`."""

    def __init__(self, listener: Any) -> None:
        self.listener = listener
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.scope = anyio.CancelScope()
        self.closed = anyio.Event()

    async def serve(self) -> None:
        with self.scope:
            await self.listener.serve(idle)
        await self.listener.aclose()
        self.closed.set()

    async def close(self) -> None:
        self.scope.cancel()
        await self.closed.wait()


async def states_without(backend: ZooKeeperBackend, names: list[str], broker: int) -> bool:
    paths = [f"/brokers/topics/{n}/partitions/{p}/state" for n in names
             for p in range(PER_TOPIC)]
    reads = await get_many(backend.zk, paths)
    return all(r is not None and (s := json.loads(r[0]))["leader"] != broker
               and broker not in s["isr"] for r in reads)


async def wait_until(check: Any, timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return time.monotonic()
        await anyio.sleep(0.02)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


async def watcher(connect: str, partitions: int, broker: int, timeout: float) -> None:
    """The broker's view (run in a process of its own): watch every partition state;
    print "ready" once all are seen, then "clear <monotonic time> <CPU seconds so far>"
    once none names `broker`, or "timeout"."""
    backend = ZooKeeperBackend(connect, session_timeout_ms=30000, request_timeout_ms=120000)
    await backend.start()
    naming: set[tuple[str, int]] = set()
    seen: set[tuple[str, int]] = set()
    done = anyio.Event()
    ready = [False]

    def changed(topic: str, changes: dict[int, Any]) -> None:
        for index, state in changes.items():
            key = (topic, index)
            seen.add(key)
            if state is not None and (state.state.leader == broker or broker in state.state.isr):
                naming.add(key)
            else:
                naming.discard(key)
        if ready[0] and not naming and not done.is_set():
            print(f"clear {time.monotonic()} {time.process_time()}", flush=True)
            done.set()

    await backend.watch_partition_states(changed)
    with anyio.fail_after(timeout):
        while len(seen) < partitions:
            await anyio.sleep(0.05)
    ready[0] = True
    print("ready", flush=True)
    try:
        with anyio.fail_after(timeout):
            await done.wait()
    except TimeoutError:
        print("timeout", flush=True)
    await backend.close()


def start_watcher(connect: str, partitions: int, timeout: float) -> subprocess.Popen[str]:
    """The broker's view: a process of its own; returns once it has seen every state."""
    view = subprocess.Popen(
        [sys.executable, __file__, "--watcher", connect, "--partitions", str(partitions),
         "--timeout", str(timeout)], stdout=subprocess.PIPE, text=True)
    assert view.stdout is not None
    line = view.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"the watching process said {line!r}")
    return view


async def watcher_done(view: subprocess.Popen[str], timeout: float) -> tuple[float, float]:
    """When the watching process saw every change, and its CPU seconds so far."""
    assert view.stdout is not None
    line = await anyio.to_thread.run_sync(view.stdout.readline)
    view.wait(timeout)
    if not line.startswith("clear "):
        raise RuntimeError(f"the watching process said {line!r}")
    seen, cpu = (float(x) for x in line.split()[1:3])
    return seen, cpu


async def measure(connect: str, partitions: int, timeout: float, tmp: Path,
                  failover: bool = False, warm_rounds: int = 0) -> dict[str, Any]:
    names = [f"load-{i:04d}" for i in range(max(1, partitions // PER_TOPIC))]
    async with anyio.create_task_group() as tg:
        clients: dict[int, ZooKeeperBackend] = {}
        listeners: dict[int, Listener] = {}
        for broker in BROKERS:
            listener = listeners[broker] = Listener(await anyio.create_tcp_listener(
                local_host="127.0.0.1"))
            tg.start_soon(listener.serve)
            port = listener.port
            clients[broker] = ZooKeeperBackend(connect, session_timeout_ms=30000,
                                               request_timeout_ms=120000)
            await clients[broker].start()
            await clients[broker].register_broker(
                broker, BrokerRegistration.create([("PLAINTEXT", "127.0.0.1", port)]))
        writer = ZooKeeperBackend(connect, session_timeout_ms=30000, request_timeout_ms=120000)
        await writer.start()
        lease = await writer.try_elect_controller(99)  # writes the states, then steps down
        assert lease is not None
        t0 = time.monotonic()
        for name in names:
            await writer.create_topic(TopicAssignment(
                name=name, topic_id=uuid.uuid4(),
                partitions={p: replicas(p) for p in range(PER_TOPIC)}), {}, lease)
            await writer.create_partition_states(name, {
                p: LeaderAndIsr(controller_epoch=lease.epoch, leader=replicas(p)[0],
                                leader_epoch=0, isr=replicas(p)) for p in range(PER_TOPIC)},
                lease)
        written_s = time.monotonic() - t0
        await writer.resign(lease)
        await writer.close()
        print(f"{len(names) * PER_TOPIC} partition states written in {written_s:.1f} s",
              file=sys.stderr, flush=True)
        # the broker's view: a process of its own, watching every state from here on
        view = await anyio.to_thread.run_sync(start_watcher, connect,
                                              len(names) * PER_TOPIC, timeout)
        warm_s = 0.0
        if warm_rounds:
            warm_s = await warm_zookeeper(connect, names, warm_rounds,
                                          [ZOOKEEPER_PID[0], view.pid], tmp, timeout)
            print(f"ZooKeeper warmed up ({warm_rounds} round(s) over every state) in "
                  f"{warm_s:.1f} s", file=sys.stderr, flush=True)

        backend = clients[1]
        controller = Controller(1, backend, BrokerConfig({"log.dirs": str(tmp),
                                                          "broker.id": "1"}))
        busy = [0]
        reconcile = controller._reconcile

        async def counted(*args: Any) -> None:
            busy[0] += 1
            try:
                await reconcile(*args)
            finally:
                busy[0] -= 1

        controller._reconcile = counted  # type: ignore[method-assign]
        if failover:
            result = await failover_figures(controller, view, names, listeners[3],
                                            timeout, tg, backend, written_s)
            tg.cancel_scope.cancel()
        else:
            t_start = time.monotonic()
            tg.start_soon(controller.run)

            async def elected() -> bool:
                return controller.is_active

            t_elected = await wait_until(elected, timeout, "the controller elected")

            async def settled() -> bool:
                # every topic known and no reconcile pending or running
                return (len(controller._topics) >= len(names) and not controller._pending
                        and not busy[0])

            await backend.settle()
            t_loaded = await wait_until(settled, timeout, "the first pass over every topic")
            t_kill, cpu_kill, zk_kill = time.monotonic(), time.process_time(), zookeeper_cpu_s()
            zk_threads, view_cpu_kill = zookeeper_threads_cpu_s(), process_cpu_s(view.pid)
            await clients[3].close()  # broker 3's session ends: its registration goes

            async def noticed() -> bool:
                return 3 not in controller._live

            t_noticed = await wait_until(noticed, timeout, "the controller noticed")
            t_done = await wait_until(settled, timeout, "the controller's reconcile")
            cpu_done, zk_done = time.process_time(), zookeeper_cpu_s()
            zk_threads = cpu_by_thread(zk_threads, zookeeper_threads_cpu_s())
            t_moved = await wait_until(lambda: states_without(backend, names, 3), timeout,
                                       "every state without broker 3")
            t_seen, view_cpu = await watcher_done(view, timeout)
            tg.cancel_scope.cancel()
    if failover:
        for client in clients.values():
            await client.close()
        return {**result, "zookeeper_warm_up_rounds": warm_rounds,
                "zookeeper_warm_up_s": round(warm_s, 2)}
    for broker in (1, 2):
        await clients[broker].close()
    return {"partitions": len(names) * PER_TOPIC, "states_written_s": round(written_s, 2),
            "elected_s": round(t_elected - t_start, 2),
            "loaded_s": round(t_loaded - t_start, 2),
            "noticed_s": round(t_noticed - t_kill, 2),
            "controller_s": round(t_done - t_noticed, 2),
            "controller_cpu_s": round(cpu_done - cpu_kill, 2),
            "zookeeper_cpu_s": round(zk_done - zk_kill, 2),
            "zookeeper_cpu_by_thread_s": zk_threads,
            "zookeeper_warm_up_rounds": warm_rounds, "zookeeper_warm_up_s": round(warm_s, 2),
            "elections_s": round(t_moved - t_kill, 2),
            "broker_view_s": round(t_seen - t_kill, 2),
            "broker_view_cpu_s": round(view_cpu - view_cpu_kill, 2)}


async def failover_figures(controller: Controller, view: subprocess.Popen[str],
                           names: list[str],
                           listener: Listener, timeout: float, tg: Any,
                           backend: ZooKeeperBackend, written_s: float) -> dict[str, Any]:
    """The new controller after broker 3 (the old controller) was killed: its listener
    closed, its registration still there."""
    keys = {(n, p) for n in names for p in range(PER_TOPIC)}
    without: set[tuple[str, int]] = set()
    all_written = anyio.Event()
    t_written = [0.0]
    write = backend.update_partition_states

    async def counting(updates: Any, lease: Any = None) -> Any:
        # the controller's view: a partition is done once a write without broker 3
        # succeeded (every partition names it: RF 3 on 3 brokers)
        outcomes = await write(updates, lease)
        for update in updates:
            key = (update.topic, update.partition)
            state = update.state
            if (isinstance(outcomes.get(key), int) and state.leader != 3
                    and 3 not in state.isr):
                without.add(key)
        if not all_written.is_set() and without >= keys:
            t_written[0] = time.monotonic()
            all_written.set()
        return outcomes

    backend.update_partition_states = counting  # type: ignore[method-assign]
    await listener.close()  # broker 3's process is gone; its session lives on
    t_start, cpu_start, zk_start = time.monotonic(), time.process_time(), zookeeper_cpu_s()
    zk_threads, view_cpu_start = zookeeper_threads_cpu_s(), process_cpu_s(view.pid)
    tg.start_soon(controller.run)

    async def elected() -> bool:
        return controller.is_active

    t_elected = await wait_until(elected, timeout, "the controller elected")
    with anyio.fail_after(timeout):
        await all_written.wait()
    cpu_done, zk_done = time.process_time(), zookeeper_cpu_s()
    zk_threads = cpu_by_thread(zk_threads, zookeeper_threads_cpu_s())
    t_moved = await wait_until(lambda: states_without(backend, names, 3), timeout,
                               "every state without broker 3")
    t_seen, view_cpu = await watcher_done(view, timeout)
    return {"partitions": len(keys), "states_written_s": round(written_s, 2),
            "elected_s": round(t_elected - t_start, 2),
            "elections_done_s": round(t_written[0] - t_start, 2),
            "controller_cpu_s": round(cpu_done - cpu_start, 2),
            "zookeeper_cpu_s": round(zk_done - zk_start, 2),
            "zookeeper_cpu_by_thread_s": zk_threads,
            "read_back_s": round(t_moved - t_start, 2),
            "broker_view_s": round(t_seen - t_start, 2),
            "broker_view_cpu_s": round(view_cpu - view_cpu_start, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--zookeeper", choices=("production", "test"), default="production",
                        help="ZooKeeper's JVM and fsync as an operator runs it (zkServer.sh's "
                             "JVM, forceSync=yes; the default), or tests/cluster's quick "
                             "test server (small heap, serial GC, client compiler only, no "
                             "fsync), as the bench used before")
    parser.add_argument("--failover", action="store_true",
                        help="the kill -9 of the controller (broker 3) instead")
    parser.add_argument("--warm-up", type=int, default=2, metavar="ROUNDS",
                        help="before the measured phase, rewrite every state unchanged and "
                             "read it this many times, with the watching process watching, "
                             "so ZooKeeper's JIT has compiled what a running cluster's "
                             "ZooKeeper has (default 2; 0: a ZooKeeper started seconds "
                             "before, as the bench ran before fail30k)")
    parser.add_argument("--watcher", metavar="CONNECT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.watcher:
        asyncio.run(watcher(args.watcher, args.partitions, 3, args.timeout))
        return
    reason = unavailable_reason()
    if reason:
        sys.exit(f"cannot run ZooKeeper: {reason}")
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-controller-load-") as tmp:
        zookeeper = ZooKeeperServer(Path(tmp) / "zk",
                                    production=args.zookeeper == "production").start()
        assert zookeeper.proc is not None
        ZOOKEEPER_PID[0] = zookeeper.proc.pid
        try:
            connect = zookeeper.connect_string(f"/load-{uuid.uuid4().hex[:8]}")
            result = asyncio.run(measure(connect, args.partitions, args.timeout, Path(tmp),
                                         args.failover, args.warm_up))
        finally:
            zookeeper.stop()
    result.update(zookeeper=args.zookeeper, load_average_start=round(load_start, 1),
                  load_average_end=round(os.getloadavg()[0], 1))
    print(f"ZooKeeper: {args.zookeeper}, warmed up {args.warm_up} round(s); load average "
          f"{result['load_average_start']} at the start, {result['load_average_end']} at the "
          f"end; ZooKeeper's CPU seconds by thread in the measured phase: "
          f"{result['zookeeper_cpu_by_thread_s']}")
    if args.failover:
        print(f"kill -9 of the controller (broker 3), {result['partitions']} partitions (RF 3, "
              f"3 brokers): the new controller elected {result['elected_s']} s after its "
              f"start, every state without broker 3 written {result['elections_done_s']} s "
              f"after its start ({result['controller_cpu_s']} CPU seconds in its process, "
              f"{result['zookeeper_cpu_s']} in ZooKeeper's), "
              f"read back {result['read_back_s']} s, a watching broker saw every change "
              f"{result['broker_view_s']} s after the start ({result['broker_view_cpu_s']} CPU "
              f"seconds in its process)")
    else:
        print(f"controller over {result['partitions']} partitions (RF 3, 3 brokers): elected "
              f"{result['elected_s']} s after start, first pass over every topic done "
              f"{result['loaded_s']} s after start; broker 3's session closed: noticed "
              f"{result['noticed_s']} s later, the controller's writes done "
              f"{result['controller_s']} s after noticing ({result['controller_cpu_s']} CPU "
              f"seconds in its process, {result['zookeeper_cpu_s']} in ZooKeeper's), every "
              f"state without it (read back) "
              f"{result['elections_s']} s after the close, a watching broker saw every change "
              f"{result['broker_view_s']} s after the close ({result['broker_view_cpu_s']} CPU "
              f"seconds in its process)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
