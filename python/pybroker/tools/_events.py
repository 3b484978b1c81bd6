"""The JSON event lines of Kafka's verifiable clients (VerifiableProducer,
VerifiableConsumer): one compact object per line on stdout, `timestamp` (ms since
the epoch) and `name` first, flushed at once because Kafka's system tests read
them while the tool runs."""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def emit(name: str, **fields: Any) -> None:
    event = {"timestamp": int(time.time() * 1000), "name": name, **fields}
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Stop:
    """Set by SIGTERM (how Kafka's system tests end a verifiable client) so the main
    loop ends and the tool still prints its closing events, as Kafka's shutdown hook
    does."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True

    def install(self) -> None:
        import signal

        signal.signal(signal.SIGTERM, self)
