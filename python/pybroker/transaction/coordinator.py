"""The transaction coordinator (Kafka's TransactionCoordinator and
TransactionStateManager): the state of every transactional id whose
`__transaction_state` partition this broker leads.

A transaction goes Empty -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn)
-> PrepareCommit or PrepareAbort (EndTxn, answered once that is replicated)
-> markers on every partition -> CompleteCommit or CompleteAbort. A producer
re-initialising (InitProducerId) bumps the epoch, which fences older
instances; one found Ongoing is fenced (PrepareEpochFence) and aborted first.

The coordinator epoch of a partition is its leader epoch. On becoming leader
the partition is replayed and transactions caught in PrepareCommit/PrepareAbort
are completed; on losing it their state is dropped (the new leader does it).
`run()` aborts transactions past their timeout and forgets idle ids."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from pybroker.errors import BUG_REPORT, ErrorCode
from pybroker.phase_log import Tally
from pybroker.transaction import records
from pybroker.transaction.log import TRANSACTION_STATE_TOPIC, TransactionLog
from pybroker.transaction.marker_sender import MarkerSender
from pybroker.transaction.records import TxnState
from pybroker.transaction.state import EPOCH_EXHAUSTED, NO_PRODUCER_ID, TxnMetadata

if TYPE_CHECKING:
    from pybroker.config import BrokerConfig
    from pybroker.handlers.context import BrokerContext
    from pybroker.producer.ids import ProducerIdAllocator

log = logging.getLogger(__name__)

S = TxnState
COMPLETING = {S.PREPARE_COMMIT: S.COMPLETE_COMMIT, S.PREPARE_ABORT: S.COMPLETE_ABORT}
#: pause before a failed CompleteCommit/CompleteAbort write is retried
COMPLETE_RETRY_S = 0.5
#: in `unreadable`: a record whose key could not be read (it may be any id's)
ANY_ID = "\x00any"


def _wall_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, store: TransactionLog,
                 producer_ids: ProducerIdAllocator, *,
                 wall: Callable[[], int] = _wall_ms) -> None:
        self.config = config
        self.store = store
        self.producer_ids = producer_ids
        self.wall = wall
        self.txns: dict[str, TxnMetadata] = {}
        #: partition -> coordinator epoch (its leader epoch) of the partitions loaded here
        self.owned: dict[int, int] = {}
        #: partitions being loaded (COORDINATOR_LOAD_IN_PROGRESS) -> the epoch being loaded
        self.loading: dict[int, int] = {}
        #: partition -> transactional ids whose latest state record could not be read
        #: when it was loaded (ANY_ID: a record whose key could not be read)
        self.unreadable: dict[int, set[str]] = {}
        self.sender: MarkerSender | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._queued: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        #: the partitions loaded in one burst (a start, a failover): one INFO line
        self.load_tally = Tally(log, lambda counts, partitions, seconds: (
            f"loaded {counts['ids']} transactional ids from {counts['records']} "
            f"{TRANSACTION_STATE_TOPIC} records of {partitions} partitions in {seconds:.2f} s"
            + (f"; completing {counts['completing']} prepared transactions"
               if counts["completing"] else "")))

    def bind(self, ctx: BrokerContext) -> None:
        """The broker's context, for the markers (made after the coordinator)."""
        self.sender = MarkerSender(ctx)

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._tg is None:
            self._queued.append((fn, args))
        else:
            self._tg.start_soon(fn, *args)

    # --- ownership ----------------------------------------------------------------
    def partition_led(self, index: int, leader_epoch: int) -> None:
        """This broker now leads __transaction_state-`index`: load it."""
        self._forget(index)
        self.owned.pop(index, None)
        self.loading[index] = leader_epoch
        self._spawn(self._load, index, leader_epoch)

    def partition_lost(self, index: int) -> None:
        self.loading.pop(index, None)
        self.owned.pop(index, None)
        self._forget(index)

    def _forget(self, index: int) -> None:
        self.unreadable.pop(index, None)
        for txn_id in [t for t in self.txns if self.store.partition_of(t) == index]:
            del self.txns[txn_id]

    async def _load(self, index: int, leader_epoch: int) -> None:
        if self.loading.get(index) != leader_epoch:
            return  # lost, or led again at a newer epoch, before loading
        loaded: dict[str, TxnMetadata] = {}
        # ids whose state is not known: a producer of theirs cannot be told from a
        # zombie (its epoch, its open transaction), so they are refused, not started anew
        unreadable: set[str] = set()
        count = 0
        for key, value in self.store.load(index):
            try:
                txn_id = records.decode_key(key)
            except Exception as exc:
                log.error("%s-%d: a record key cannot be read (%s): every transactional id "
                          "of the partition is refused", TRANSACTION_STATE_TOPIC, index, exc)
                unreadable.add(ANY_ID)
                continue
            if txn_id is None:
                continue  # a key version this broker does not know: ignored, as Kafka does
            count += 1
            loaded.pop(txn_id, None)
            unreadable.discard(txn_id)  # each record holds the id's whole state
            if value is None:
                continue
            try:
                loaded[txn_id] = TxnMetadata.from_value(txn_id, records.decode_value(value))
            except Exception as exc:
                log.error("%s-%d: the state of transactional id %r cannot be read (%s): it "
                          "is refused", TRANSACTION_STATE_TOPIC, index, txn_id, exc)
                unreadable.add(txn_id)
        if self.loading.get(index) != leader_epoch:
            return
        for txn_id, md in loaded.items():
            if md.state != S.DEAD:
                self.txns[txn_id] = md
        if unreadable:
            self.unreadable[index] = unreadable
        del self.loading[index]
        self.owned[index] = leader_epoch
        log.debug("coordinating %d transactional ids of %s-%d (coordinator epoch %d, %d "
                  "records)", len(loaded), TRANSACTION_STATE_TOPIC, index, leader_epoch, count)
        completing = sum(1 for md in loaded.values() if md.state in COMPLETING)
        self.load_tally.add(ids=len(loaded), records=count, completing=completing)
        for md in loaded.values():
            if md.state in COMPLETING:
                self._begin_complete(md, index, leader_epoch)

    def coordinator_error(self, transactional_id: str) -> ErrorCode | None:
        index = self.store.partition_of(transactional_id)
        if index in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if index not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        bad = self.unreadable.get(index)
        if bad and (transactional_id in bad or ANY_ID in bad):
            # its state could not be loaded (see _load): still not loaded, as far as a
            # client can tell; never a fresh start that would forget an older producer
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def _still(self, index: int, epoch: int) -> Callable[[], bool]:
        return lambda: self.owned.get(index) == epoch

    # --- persistence ----------------------------------------------------------------
    async def _persist(self, md: TxnMetadata, nxt: TxnMetadata) -> ErrorCode:
        """Write `nxt` (md's next state) and apply it once replicated."""
        index = self.store.partition_of(md.transactional_id)
        epoch = self.owned.get(index)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        md.pending = nxt.state
        try:
            code = await self.store.write(index, records.encode_key(md.transactional_id),
                                          records.encode_value(nxt.to_value()))
        finally:
            md.pending = None
        if code == ErrorCode.NONE and self.owned.get(index) != epoch:
            code = ErrorCode.NOT_COORDINATOR  # lost the partition meanwhile
        if code == ErrorCode.NONE:
            md.apply(nxt)
        else:
            log.info("transactional id %s: writing %s failed: %s", md.transactional_id,
                     nxt.state.kafka_name, code.name)
        return code

    # --- InitProducerId -------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected_pid: int = NO_PRODUCER_ID,
                               expected_epoch: int = -1) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch). PRODUCER_FENCED is left to the handler to map
        for old versions."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.config["transaction.max.timeout.ms"]:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        if (code := self.coordinator_error(transactional_id)) is not None:
            return code, -1, -1
        md = self.txns.get(transactional_id)
        if md is None:
            pid = await self.producer_ids.next_id()
            if (code := self.coordinator_error(transactional_id)) is not None:
                return code, -1, -1
            md = self.txns.get(transactional_id)
            if md is None:
                md = TxnMetadata(transactional_id, pid, -1, timeout_ms, S.EMPTY, set(), -1,
                                 self.wall())
                self.txns[transactional_id] = md
        if md.pending is not None or md.state in COMPLETING:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        kip360 = expected_pid != NO_PRODUCER_ID
        if kip360:
            # KIP-360: the producer says which id/epoch it has. A retry of a bump whose
            # answer was lost gets the current id/epoch again; anything else not
            # current is a fenced instance.
            retry = (md.last_producer_epoch >= 0 and expected_epoch == md.last_producer_epoch
                     and expected_pid in (md.producer_id, md.last_producer_id))
            if retry and md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                return ErrorCode.NONE, md.producer_id, md.producer_epoch
            if not retry and (expected_pid != md.producer_id
                              or expected_epoch != md.producer_epoch):
                return ErrorCode.PRODUCER_FENCED, -1, -1
        if md.state == S.ONGOING:
            # an older instance has a transaction open: fence it, abort it, and let the
            # new producer retry once that is done
            code = await self._fence_and_abort(md)
            return (ErrorCode.CONCURRENT_TRANSACTIONS if code == ErrorCode.NONE else code), -1, -1
        now = self.wall()
        if md.producer_epoch >= EPOCH_EXHAUSTED:
            new_pid = await self.producer_ids.next_id()
            nxt = md.transition(producer_id=new_pid, producer_epoch=0, timeout_ms=timeout_ms,
                                state=S.EMPTY, partitions=set(), start_ms=-1,
                                last_update_ms=now, last_producer_id=md.producer_id,
                                last_producer_epoch=md.producer_epoch if kip360 else -1)
        else:
            nxt = md.transition(producer_epoch=md.producer_epoch + 1, timeout_ms=timeout_ms,
                                state=S.EMPTY, partitions=set(), start_ms=-1,
                                last_update_ms=now, last_producer_id=md.producer_id,
                                last_producer_epoch=md.producer_epoch if kip360 else -1)
        if md.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        code = await self._persist(md, nxt)
        if code != ErrorCode.NONE:
            return code, -1, -1
        return ErrorCode.NONE, md.producer_id, md.producer_epoch

    async def _fence_and_abort(self, md: TxnMetadata) -> ErrorCode:
        """PrepareEpochFence: bump the epoch (fencing the producer that has the
        transaction open) and abort the transaction with it."""
        epoch = md.producer_epoch + 1 if md.producer_epoch < EPOCH_EXHAUSTED else md.producer_epoch
        nxt = md.transition(state=S.PREPARE_ABORT, producer_epoch=epoch,
                            last_producer_epoch=md.producer_epoch, last_update_ms=self.wall())
        return await self._prepare_end(md, nxt)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode | None, TxnMetadata | None]:
        if (code := self.coordinator_error(transactional_id)) is not None:
            return code, None
        md = self.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if md.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return None, md

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Iterable[tuple[str, int]]
                             ) -> ErrorCode:
        code, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if code is not None:
            return code
        assert md is not None
        if md.state in COMPLETING:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        wanted = set(partitions)
        if md.state == S.ONGOING and wanted <= md.partitions:
            return ErrorCode.NONE
        now = self.wall()
        nxt = md.transition(state=S.ONGOING, partitions=md.partitions | wanted,
                            start_ms=md.start_ms if md.state == S.ONGOING else now,
                            last_update_ms=now)
        return await self._persist(md, nxt)

    # --- EndTxn ---------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        code, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if code is not None:
            return code
        assert md is not None
        wanted = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if md.state == S.ONGOING:
            return await self._prepare_end(
                md, md.transition(state=wanted, last_update_ms=self.wall()))
        if md.state == done:
            return ErrorCode.NONE  # a retry of an EndTxn that completed
        if md.state == wanted:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    async def _prepare_end(self, md: TxnMetadata, nxt: TxnMetadata) -> ErrorCode:
        """Write PrepareCommit/PrepareAbort, then complete in the background."""
        code = await self._persist(md, nxt)
        if code == ErrorCode.NONE:
            index = self.store.partition_of(md.transactional_id)
            epoch = self.owned.get(index)
            if epoch is not None:
                self._begin_complete(md, index, epoch)
        return code

    def _begin_complete(self, md: TxnMetadata, index: int, epoch: int) -> None:
        md.pending = COMPLETING[md.state]  # requests meanwhile: CONCURRENT_TRANSACTIONS
        self._spawn(self._complete, md, index, epoch)

    async def _complete(self, md: TxnMetadata, index: int, epoch: int) -> None:
        """Markers on every partition, then CompleteCommit/CompleteAbort."""
        final = COMPLETING[md.state]
        still = self._still(index, epoch)
        try:
            assert self.sender is not None, "bind() was not called"
            sent = await self.sender.send(
                producer_id=md.producer_id, producer_epoch=md.producer_epoch,
                coordinator_epoch=epoch, commit=final == S.COMPLETE_COMMIT,
                partitions=sorted(md.partitions), still_coordinator=still)
            while sent and still():
                nxt = md.transition(state=final, partitions=set(), last_update_ms=self.wall())
                code = await self._persist(md, nxt)
                md.pending = final
                if code == ErrorCode.NONE:
                    log.debug("transactional id %s: %s", md.transactional_id, final.kafka_name)
                    return
                await anyio.sleep(COMPLETE_RETRY_S)
        except Exception:
            log.exception("transactional id %s: completing the transaction failed; its "
                          "producer's next request finds it pending and it is completed "
                          "again. " + BUG_REPORT, md.transactional_id)
        finally:
            md.pending = None

    # --- timeouts and expiry ------------------------------------------------------------
    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            queued, self._queued = self._queued, []
            for fn, args in queued:
                tg.start_soon(fn, *args)
            tg.start_soon(self._expiry_loop)
            interval = self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
            while True:
                await anyio.sleep(interval / 1000)
                try:
                    await self.abort_timed_out()
                except Exception:
                    log.exception("aborting timed-out transactions failed; tried again at "
                                  "the next check. " + BUG_REPORT)

    async def abort_timed_out(self) -> int:
        now = self.wall()
        expired = [md for md in self.txns.values()
                   if md.state == S.ONGOING and md.pending is None
                   and md.start_ms + md.timeout_ms < now]
        for md in expired:
            if md.state == S.ONGOING and md.pending is None:
                log.info("transactional id %s (producer %d epoch %d) timed out after %d ms; "
                         "aborting", md.transactional_id, md.producer_id, md.producer_epoch,
                         md.timeout_ms)
                await self._fence_and_abort(md)
        return len(expired)

    async def _expiry_loop(self) -> None:
        interval = self.config["transaction.remove.expired.transaction.cleanup.interval.ms"]
        while True:
            await anyio.sleep(interval / 1000)
            try:
                await self.expire_transactional_ids()
            except Exception:
                log.exception("expiring transactional ids failed; tried again at the next "
                              "check. " + BUG_REPORT)

    async def expire_transactional_ids(self) -> int:
        """Tombstone ids with no transaction, idle for transactional.id.expiration.ms."""
        now = self.wall()
        max_idle = self.config["transactional.id.expiration.ms"]
        idle = [md for md in self.txns.values()
                if md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                and md.pending is None and md.last_update_ms + max_idle < now]
        for md in idle:
            index = self.store.partition_of(md.transactional_id)
            if index not in self.owned or md.pending is not None:
                continue
            md.pending = S.DEAD
            try:
                code = await self.store.write(index, records.encode_key(md.transactional_id),
                                              None)
            finally:
                md.pending = None
            if code == ErrorCode.NONE and self.txns.get(md.transactional_id) is md:
                del self.txns[md.transactional_id]
                log.info("transactional id %s expired", md.transactional_id)
        return len(idle)

    # --- DescribeTransactions / ListTransactions ----------------------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if (code := self.coordinator_error(transactional_id)) is not None:
            return code, None
        md = self.txns.get(transactional_id)
        if md is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, md

    def list(self, states: set[TxnState] | None, producer_ids: set[int] | None,
             min_duration_ms: int = -1) -> tuple[ErrorCode, list[TxnMetadata]]:
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        now = self.wall()
        out = []
        for md in self.txns.values():
            if states and md.state not in states:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (md.state != S.ONGOING
                                         or now - md.start_ms < min_duration_ms):
                continue
            out.append(md)
        return ErrorCode.NONE, sorted(out, key=lambda m: m.transactional_id)

    async def close(self) -> None:
        if self.sender is not None:
            await self.sender.close()
