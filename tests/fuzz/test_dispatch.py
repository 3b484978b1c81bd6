"""Generated and mutated requests through the real Dispatcher and handlers, in process.

For every advertised API and version: a generated request and its mutations each
get a well-formed response carrying their correlation id, or (when they do not
decode, or their API/version is not advertised) the connection is closed, with
nothing written. ApiVersions at an unsupported version is answered (v0 body);
acks=0 produce is not. The dispatcher never raises, no handler logs an error, and
a request may stay unanswered only while its own wait allows (a Fetch long poll
within max_wait_ms, a JoinGroup/SyncGroup waiting for its group). After each API,
the records acknowledged before fuzzing read back byte for byte; at the end a new
produce and fetch still work.
"""

from __future__ import annotations

import concurrent.futures
import random
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from pybroker import _core
from pybroker.handlers.registry import HANDLERS
from pybroker.protocol import (
    Api,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    decode_response,
)

from .inprocess import ANSWER_TIMEOUT_S, Exchange, InProcessBroker
from .layout import layout
from .mutate import mutate
from .settings import fuzz_settings
from .state import establish
from .strategies import PLAYGROUND, Names, advertised_versions, request_frames

pytestmark = pytest.mark.fuzz

CASES = list(advertised_versions())
IDS = [f"{api.name}-v{v}" for api, v in CASES]
PRODUCE, FETCH, JOIN_GROUP, SYNC_GROUP, API_VERSIONS = 0, 1, 11, 14, 18
CREATE_TOPICS, METADATA = 19, 3
#: mutations dispatched after each generated request
MUTATIONS_PER_EXAMPLE = 4
#: a request that may legitimately wait gets this long before it is left in flight
WAIT_PEEK_S = 0.2
#: never in any generated request (strategies.PLAYGROUND has the names they use)
KNOWN_TOPIC = "pybroker-fuzz-known-data"
KNOWN_PARTITIONS = 2
#: (api generated, outcome) -> count, over the whole module: shows (and the last
#: test checks) that the requests reached the handlers and not only the decoder
OUTCOMES: Counter[tuple[str, str]] = Counter()


@dataclass
class KnownData:
    """Batches acknowledged before fuzzing: (partition, base offset, batch as sent)."""

    batches: list[tuple[int, int, bytes]] = field(default_factory=list)

    def produce(self, fuzz: InProcessBroker, partition: int, batch: bytes) -> None:
        resp = fuzz.request(PRODUCE, 8, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": KNOWN_TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
        result = resp["responses"][0]["partition_responses"][0]
        assert result["error_code"] == 0, result
        self.batches.append((partition, result["base_offset"], batch))

    def verify(self, fuzz: InProcessBroker) -> None:
        for partition in range(KNOWN_PARTITIONS):
            expected = [(o, b) for p, o, b in self.batches if p == partition]
            stored = read_batches(fuzz, partition)
            assert len(stored) >= len(expected), f"partition {partition}: batches missing"
            for (offset, batch), (at, stored_batch) in zip(expected, stored, strict=False):
                assert at == offset
                # the broker sets base offset (0..8) and leader epoch (12..16), nothing else
                assert stored_batch[8:12] == batch[8:12] and stored_batch[16:] == batch[16:]


def read_batches(fuzz: InProcessBroker, partition: int) -> list[tuple[int, bytes]]:
    resp = fuzz.request(FETCH, 11, {
        "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20, "isolation_level": 0,
        "topics": [{"topic": KNOWN_TOPIC, "partitions": [
            {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 64 << 20}]}]})
    p = resp["responses"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    data = bytes(p["records"])
    out = []
    pos = 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        out.append((base_offset, data[pos:pos + 12 + length]))
        pos += 12 + length
    return out


def batch(seed: int) -> bytes:
    rng = random.Random(seed)
    count = rng.randint(1, 5)
    return _core.build_batch([b"k%d" % seed] * count,
                             [rng.randbytes(rng.randint(0, 300)) for _ in range(count)],
                             1_700_000_000_000 + seed)


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    broker = InProcessBroker(tmp_path_factory.mktemp("fuzz-dispatch"))
    try:
        topics = [(KNOWN_TOPIC, KNOWN_PARTITIONS), (PLAYGROUND.topics[0], 1),
                  (PLAYGROUND.topics[1], 3)]
        resp = broker.request(CREATE_TOPICS, 4, {"timeout_ms": 5000, "topics": [
            {"name": n, "num_partitions": p, "replication_factor": 1} for n, p in topics]})
        assert all(t["error_code"] == 0 for t in resp["topics"]), resp
        broker.wait_led([n for n, _ in topics])
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="module")
def names(fuzz: InProcessBroker) -> Names:
    """The playground, plus a live group member and an idempotent producer."""
    return establish(fuzz.request)


@pytest.fixture(scope="module")
def known(fuzz: InProcessBroker) -> KnownData:
    data = KnownData()
    for i in range(40):
        data.produce(fuzz, i % KNOWN_PARTITIONS, batch(i))
    data.verify(fuzz)
    return data


@pytest.fixture(autouse=True)
def intact_afterwards(fuzz: InProcessBroker, known: KnownData) -> Iterator[None]:
    """After each API: answers that arrived late were right, nothing was logged as an
    error, and the acknowledged records are all there."""
    yield
    for exchange in list(fuzz.in_flight):
        if exchange.future.done():
            fuzz.in_flight.remove(exchange)
            check_answer(exchange, *decoded(exchange.frame))
    errors = fuzz.errors.take()
    assert not errors, "pybroker logged errors:\n" + "\n".join(errors)
    known.verify(fuzz)


def decoded(frame: bytes) -> tuple[RequestHeader | None, dict[str, Any] | None, bool]:
    """(header, body, unsupported version) as the dispatcher's decoder sees the frame."""
    try:
        header, body = decode_request(frame)
        return header, body, False
    except ProtocolError as exc:
        header = getattr(exc, "header", None)
        return header, None, isinstance(exc, UnsupportedVersionError)


def may_wait_s(header: RequestHeader | None, body: dict[str, Any] | None) -> float:
    """How long the request may legitimately stay unanswered."""
    if header is None or body is None or header.api_key not in HANDLERS:
        return 0.0
    if header.api_key == FETCH:
        return max(0, body["max_wait_ms"]) / 1000
    if header.api_key in (JOIN_GROUP, SYNC_GROUP):
        return float("inf")  # until the group's own timeouts; the coordinator's tick ends it
    return 0.0


def expected_to_answer(header: RequestHeader | None, body: dict[str, Any] | None,
                       unsupported: bool) -> bool:
    if header is None:
        return False
    if header.api_key == API_VERSIONS and (body is not None or unsupported):
        return True
    spec = HANDLERS.get(header.api_key)
    return (body is not None and spec is not None
            and spec.min_version <= header.api_version <= spec.max_version)


def check_answer(exchange: Exchange, header: RequestHeader | None, body: dict[str, Any] | None,
                 unsupported: bool) -> None:
    keep = exchange.future.result(0)  # re-raises whatever the dispatcher raised
    responses = exchange.connection.responses
    name = exchange.label
    if not expected_to_answer(header, body, unsupported):
        OUTCOMES[name, "closed"] += 1
        assert keep is False, "an undecodable or unadvertised request kept the connection"
        assert responses == [], "an undecodable request was answered"
        return
    assert header is not None
    assert keep is True, f"the connection was closed after a valid {header}"
    if header.api_key == PRODUCE and body is not None and body["acks"] == 0:
        assert responses == [], "acks=0 produce was answered"
        OUTCOMES[name, "unanswered (acks=0)"] += 1
        return
    assert len(responses) == 1, f"{len(responses)} responses to one request"
    (response,) = responses
    (size, correlation_id) = struct.unpack_from(">ii", response)
    assert size == len(response) - 4
    assert correlation_id == header.correlation_id
    version = header.api_version if body is not None else 0
    _, answer = decode_response(header.api_key, version, response[4:])
    OUTCOMES[name, "answered" if not any_error(answer) else "answered with an error"] += 1


def any_error(body: Any) -> bool:
    """Whether a response carries a non-zero error_code anywhere."""
    if isinstance(body, dict):
        return bool(body.get("error_code")) or any(any_error(v) for v in body.values())
    if isinstance(body, list):
        return any(any_error(v) for v in body)
    return False


def dispatch(fuzz: InProcessBroker, frame: bytes, label: str) -> None:
    """Dispatch one frame and check what came of it; ``label``: the API it was made for."""
    header, body, unsupported = decoded(frame)
    exchange = fuzz.submit(frame, label)
    wait_s = may_wait_s(header, body)
    started = time.monotonic()
    timeout = WAIT_PEEK_S if wait_s > WAIT_PEEK_S else wait_s + ANSWER_TIMEOUT_S
    try:
        exchange.future.result(timeout)
    except concurrent.futures.TimeoutError:
        waited = time.monotonic() - started
        assert waited < wait_s, f"no answer after {waited:.1f}s to {header} {body}"
        fuzz.in_flight.append(exchange)  # a long poll: checked when it ends
        OUTCOMES[label, "waiting"] += 1
        return
    except Exception:
        pass  # check_answer re-raises it with the request in view
    check_answer(exchange, header, body, unsupported)


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
@fuzz_settings(examples=20)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_dispatch(fuzz: InProcessBroker, names: Names, api: Api, version: int,
                  data: st.DataObject, rng: random.Random) -> None:
    frame, _ = data.draw(request_frames(api, version, names))
    note(f"request: {frame.hex()}")
    dispatch(fuzz, frame, api.name)
    slots = layout(frame)
    for _ in range(MUTATIONS_PER_EXAMPLE):
        mutated, how = mutate(frame, slots, rng, frame)
        note(f"mutations: {how}; frame: {mutated.hex()}")
        dispatch(fuzz, mutated, api.name)


def test_produce_and_fetch_after_fuzzing(fuzz: InProcessBroker, known: KnownData) -> None:
    """Runs last: the broker still appends and serves, and nothing before was lost."""
    for i in range(KNOWN_PARTITIONS):
        known.produce(fuzz, i, batch(1000 + i))
    known.verify(fuzz)
    resp = fuzz.request(METADATA, 8, {"topics": [{"name": KNOWN_TOPIC}]})
    assert resp["topics"][0]["error_code"] == 0
    table = "\n".join(f"{n:24} {o:24} {c}" for (n, o), c in sorted(OUTCOMES.items()))
    print(f"\ndispatch outcomes:\n{table}")
    # every advertised API that was fuzzed reached its handler, and mutations closed some
    ran = {n for n, _ in OUTCOMES}
    answered = {n for n, o in OUTCOMES if o.startswith("answered")}
    assert ran & {api.name for api, _ in CASES} <= answered
    assert not ran or any(o == "closed" for _, o in OUTCOMES)
