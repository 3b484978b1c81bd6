"""One failed log dir of a broker with two (Kafka's handleLogDirFailure in a cluster).

Broker 1 keeps its logs in two dirs. The kernel answers EIO to the fsyncs of the segment
files in one of them (strace's fault injection, limited to those files): that dir goes
offline, broker 1 stops leading and following its partitions and tells the controller,
which gives them other leaders and takes broker 1 out of their ISRs. Broker 1 stays up
and keeps serving the other dir. Producers with acks=all and min.insync.replicas=2 keep
being acknowledged on every partition, and every acknowledged record is read back.

Before, the partitions of the failed dir stayed led by broker 1 (answering
KAFKA_STORAGE_ERROR) until it was restarted, and broker 1 stopped at once: its follower
fetcher did not survive the failed fsync."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import Cluster, wait_for
from tests.cluster.scenario import TOPIC_CONFIGS
from tests.cluster.workload import assert_nothing_lost, start_producers
from tests.cluster.zookeeper import ZooKeeperServer

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "log")]
from test_log_dir_failure import attach_eio_on_fsync  # noqa: E402

PARTITIONS = 6
#: Kafka's default: a follower that stops fetching leaves the ISR by the leader's own
#: shrink only after this long, so an earlier exit is the controller's doing
LAG_TIME_MAX_MS = 30000
#: far above what the controller needs (about a second), below LAG_TIME_MAX_MS
MOVED_S = 20.0
WAIT_S = 60.0


@pytest.fixture
def two_dir_cluster(zookeeper: ZooKeeperServer, tmp_path: Path,
                    request: pytest.FixtureRequest) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper, tmp_path, overrides={"replica.lag.time.max.ms": LAG_TIME_MAX_MS})
    broker = cluster.brokers[1]
    broker.overrides["log.dirs"] = f"{broker.data_dir / 'a'},{broker.data_dir / 'b'}"
    request.node._pybroker_brokers = list(cluster.brokers.values())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_failed_dir_moves_its_partitions_away_and_loses_nothing(
        two_dir_cluster: Cluster) -> None:
    cluster = two_dir_cluster
    topic = "dirfail"
    # every append is fsynced, so the failure is met by the next produce
    cluster.create_topic(topic, PARTITIONS, configs={**TOPIC_CONFIGS, "flush.messages": "1"})
    broker = cluster.brokers[1]
    on = {d: sorted(int(p.name.rsplit("-", 1)[1]) for p in (broker.data_dir / d).glob(
        f"{topic}-*")) for d in ("a", "b")}
    assert on["a"] and on["b"], on
    doomed, kept = on["a"], on["b"]
    led_before = {p: cluster.leader(topic, p) for p in range(PARTITIONS)}
    assert any(led_before[p] == 1 for p in doomed), (
        f"broker 1 leads none of {doomed} (leaders {led_before}): the test shows nothing "
        "of a failed leader's dir")

    producers = start_producers(cluster.bootstrap, topic, PARTITIONS, timeout_s=WAIT_S)
    segments = [str(path) for p in doomed
                for path in (broker.data_dir / "a" / f"{topic}-{p}").glob("*.log")]
    assert broker.proc is not None
    tracer = attach_eio_on_fsync(broker.proc.pid, paths=segments)
    try:
        failed_at = time.monotonic()
        wait_for(lambda: all(cluster.leader(topic, p) not in (1, -1)
                             and 1 not in cluster.isr(topic, p) for p in doomed),
                 MOVED_S, f"partitions {doomed} of the failed dir led elsewhere, broker 1 out "
                          "of their ISRs")
        print(f"moved {time.monotonic() - failed_at:.1f}s after the injection")
        # the other dir's partitions are untouched: broker 1 still leads and follows them
        assert all(cluster.leader(topic, p) == led_before[p] and 1 in cluster.isr(topic, p)
                   for p in kept), {p: cluster.state(topic, p) for p in kept}
        moved_at = time.monotonic()
        for producer in producers:
            for partition in range(PARTITIONS):
                wait_for(lambda pr=producer, pa=partition: pr.acked_after(pa, moved_at),
                         WAIT_S, f"{producer.tag}: partition {partition} acknowledged after "
                                 "the move")
        assert broker.proc.poll() is None, "broker 1 stopped: only one of its dirs failed"
    finally:
        tracer.kill()
        tracer.wait(10)
    # the disk "fixed": a clean restart (the failed dir gets no clean-shutdown marker, so
    # its logs are recovered) brings broker 1 back into every ISR under its new
    # registration, which the old report of offline replicas does not cover
    broker.stop()
    assert not (broker.data_dir / "a" / ".kafka_cleanshutdown").exists()
    assert (broker.data_dir / "b" / ".kafka_cleanshutdown").exists()
    cluster.restart(1)
    wait_for(lambda: all(1 in cluster.isr(topic, p) for p in range(PARTITIONS)), WAIT_S,
             "broker 1 back in every ISR after its restart")
    totals = assert_nothing_lost(lambda p: cluster.read_partition(topic, p), PARTITIONS,
                                 producers)
    text = broker.log_path.read_text()
    assert f"log dir {broker.data_dir / 'a'} failed" in text
    assert "told the controller that" in text
    print(f"acknowledged: {totals}")
