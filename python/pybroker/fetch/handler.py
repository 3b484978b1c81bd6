"""The fetcher's side of a fetch session (Kafka's FetchSessionHandler), for followers.

Each fetch names the partitions wanted now with their fetch parameters. The first
fetch to a leader (epoch 0) names them all; once the leader has answered with a
session id, later fetches (epoch 1, 2, ...) name only partitions that are new or whose
parameters changed, and list as forgotten those no longer wanted. The leader answers
only the partitions that changed; every partition left out is unchanged.

A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...) or a
failed connection starts over with a full fetch; a leader that answers a full fetch with
session id 0 (its cache is full) gets full fetches until it creates one."""

from __future__ import annotations

from typing import Any

from pybroker.errors import ErrorCode
from pybroker.fetch.sessions import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

#: (topic, partition) -> the request fields of that partition
Wanted = dict[tuple[str, int], dict[str, Any]]


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: what the leader's session holds for us (as last sent)
        self.sent: Wanted = {}
        self._pending: Wanted = {}

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(self, wanted: Wanted) -> dict[str, Any]:
        """Session fields, topics and forgotten topics of the next fetch."""
        self._pending = dict(wanted)
        if self.full:
            send = wanted
            forgotten: dict[str, list[int]] = {}
        else:
            send = {k: v for k, v in wanted.items() if self.sent.get(k) != v}
            forgotten = {}
            for topic, index in self.sent:
                if (topic, index) not in wanted:
                    forgotten.setdefault(topic, []).append(index)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, _), fields in send.items():
            topics.setdefault(topic, []).append(fields)
        return {
            "session_id": self.session_id, "session_epoch": self.epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps}
                                      for t, ps in forgotten.items()],
        }

    def resend(self, key: tuple[str, int]) -> None:
        """Name the partition again, with its fields, in the next fetch (the leader answers
        it again). It stays in what the leader's session holds: if it is no longer wanted
        by then, the next fetch lists it as forgotten. (Dropping it from `sent` instead
        left the leader's session holding it for good once it was unfollowed: an answered
        error came back at once in every fetch, and the follower fetched in a hot loop,
        issue 26.)"""
        if key in self.sent:
            self.sent[key] = {}

    def handle_response(self, response: dict[str, Any]) -> bool:
        """Advance the session after an answer; False when it was a session error (the
        next fetch is a full one)."""
        code = response.get("error_code", 0)
        if code != ErrorCode.NONE:
            if code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR):
                self.reset()
                return False
            return True
        if self.full:
            if response["session_id"] == INVALID_SESSION_ID:
                self.reset()
            else:
                self.session_id = response["session_id"]
                self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        self.sent = self._pending
        return True

    def reset(self) -> None:
        """Start over with a full fetch (the leader closes any session we named)."""
        self.epoch = INITIAL_EPOCH
        self.sent = {}
