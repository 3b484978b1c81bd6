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

from collections.abc import Iterable
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
        #: what `sent` becomes once the leader takes the fetch being built: the whole of
        #: it after a full fetch, else the changes (None: forgotten)
        self._pending: Wanted = {}
        self._changes: dict[tuple[str, int], dict[str, Any] | None] | None = None
        #: keys to compare again at the next incremental build whatever the caller says
        #: changed: resent ones, and those of a fetch the leader did not take
        self._recheck: set[tuple[str, int]] = set()
        #: the next build compares every key (a fetch built so was not taken)
        self._compare_all = False
        #: a fetch was built and its answer not handled yet
        self._built = False

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(self, wanted: Wanted, changed: Iterable[tuple[str, int]] | None = None
              ) -> dict[str, Any]:
        """Session fields, topics and forgotten topics of the next fetch. `changed`: the
        only keys whose fields may differ from the last build's (the caller keeps
        `wanted` from round to round): an incremental fetch then compares those alone,
        not every partition followed (issue 25); None compares them all."""
        if self._built:  # the last fetch built never got an answer handled: not taken
            self._not_taken()
        self._built = True
        if changed is not None and not self.full and not self._compare_all:
            return self._build_changed(wanted, changed)
        self._compare_all = False
        self._changes = None
        self._recheck = set()
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

    def _build_changed(self, wanted: Wanted, changed: Iterable[tuple[str, int]]
                       ) -> dict[str, Any]:
        sent = self.sent
        changes: dict[tuple[str, int], dict[str, Any] | None] = {}
        topics: dict[str, list[dict[str, Any]]] = {}
        forgotten: dict[str, list[int]] = {}
        keys = self._recheck
        keys.update(changed)
        for key in keys:
            fields = wanted.get(key)
            if fields is None:
                if key in sent:
                    forgotten.setdefault(key[0], []).append(key[1])
                    changes[key] = None
            elif sent.get(key) != fields:
                topics.setdefault(key[0], []).append(fields)
                changes[key] = fields
        self._recheck = set()
        self._changes = changes
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
            self._recheck.add(key)

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
            self._not_taken()
            return True
        self._built = False
        changes, self._changes = self._changes, None
        if self.full:
            if response["session_id"] == INVALID_SESSION_ID:
                self.reset()
            else:
                self.session_id = response["session_id"]
                self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        if changes is None:
            self.sent = self._pending
        else:
            for key, fields in changes.items():
                if fields is None:
                    self.sent.pop(key, None)
                else:
                    self.sent[key] = fields
        return True

    def _not_taken(self) -> None:
        """The fetch built last did not reach the leader's session: what it named is
        compared again at the next build."""
        self._built = False
        if self._changes is None:
            self._compare_all = True
        else:
            self._recheck.update(self._changes)
            self._changes = None

    def reset(self) -> None:
        """Start over with a full fetch (the leader closes any session we named)."""
        self.epoch = INITIAL_EPOCH
        self.sent = {}
        self._changes = None
        self._recheck = set()
        self._compare_all = False
        self._built = False
