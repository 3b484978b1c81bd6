"""One transactional id's state on its coordinator (Kafka's TransactionMetadata).

Transitions are made as Kafka makes them: the next state is computed, the
metadata is marked with `pending` (other requests for the id meanwhile get
CONCURRENT_TRANSACTIONS), the record is written to `__transaction_state` and
replicated, and only then is the new state applied in memory."""

from __future__ import annotations

import dataclasses

from pybroker.transaction.records import TxnState, TxnValue

#: RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: an epoch this high cannot be bumped again: the producer gets a new id
#: (Kafka's isEpochExhausted: epoch >= Short.MAX_VALUE - 1)
EPOCH_EXHAUSTED = 32766

#: valid previous states of each state (Kafka's TransactionState.validPreviousStates)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                               TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE,
                                       TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                       TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                              TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


@dataclasses.dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    #: the producer id/epoch before the last bump (KIP-360 retries; memory only,
    #: value v0 does not carry them)
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: the state being written, None when no transition is under way
    pending: TxnState | None = None

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnValue) -> TxnMetadata:
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms,
                   value.state, {(t, p) for t, ps in value.partitions.items() for p in ps},
                   value.start_ms, value.last_update_ms)

    def to_value(self) -> TxnValue:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(index)
        return TxnValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                        by_topic, self.last_update_ms, self.start_ms)

    def transition(self, **changes: object) -> TxnMetadata:
        """The metadata after a transition (not applied); raises ValueError for a
        transition Kafka does not allow."""
        nxt = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        if nxt.state != self.state and self.state not in VALID_PREVIOUS[nxt.state]:
            raise ValueError(f"{self.transactional_id}: {self.state.kafka_name} -> "
                             f"{nxt.state.kafka_name} is not a valid transition")
        nxt.partitions = set(nxt.partitions)
        nxt.pending = None
        return nxt

    def apply(self, nxt: TxnMetadata) -> None:
        for field in dataclasses.fields(self):
            if field.name != "pending":
                setattr(self, field.name, getattr(nxt, field.name))
