//! Transactions in the partition log (Kafka's exactly-once, log side):
//! end-transaction markers, the last stable offset and the aborted
//! transactions a read_committed fetch is told of.
//!
//! A marker is a control batch (attributes: transactional + control bits)
//! of the producer (id, epoch, base sequence -1) holding one record:
//!
//! ```text
//! key   = version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//! value = version int16 (0) | coordinatorEpoch int32
//! ```
//!
//! The leader writes it for WriteTxnMarkers ([`Log::append_end_txn_marker`],
//! after the checks of `producer_state.rs`); followers copy it and recovery
//! replays it, and all three apply it the same way: the producer's open
//! transaction ends, and if it was aborted the segment holding the marker
//! gets an entry in its `.txnindex` (`txn_index.rs`). Replay (recovery,
//! truncation) first drops the `.txnindex` entries at or above the offset it
//! replays from, then re-adds them from the markers, so the index always
//! matches the log.

use crate::batch::{self, BatchHeader, CONTROL_BIT, HEADER_SIZE, TRANSACTIONAL_BIT};
use crate::builder::{BatchBuilder, Record};
use crate::codec::{self, RecordIter};
use crate::error::Result;
use crate::log::{AppendInfo, Log};
use crate::producer_state::{CompletedTxn, EndTxnMarker, PendingUpdate};
use crate::segment::PreparedBatch;
use crate::txn_index::AbortedTxn;

/// Control record types (Kafka's `ControlRecordType`).
pub const CONTROL_TYPE_ABORT: i16 = 0;
pub const CONTROL_TYPE_COMMIT: i16 = 1;

/// The bytes of a marker batch (base offset 0, partition leader epoch -1:
/// the append sets both).
pub fn marker_batch(producer_id: i64, epoch: i16, marker: EndTxnMarker, timestamp: i64) -> Vec<u8> {
    let kind = if marker.commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut b = BatchBuilder::new(0, timestamp)
        .producer(producer_id, epoch, -1)
        .attributes(TRANSACTIONAL_BIT | CONTROL_BIT);
    b.push(Record::new(timestamp, Some(&key), Some(&value)));
    let mut raw = b.build();
    batch::set_partition_leader_epoch(&mut raw, -1);
    raw
}

/// What a whole control batch says, when it is a COMMIT or ABORT marker.
pub fn read_marker(raw: &[u8]) -> Option<EndTxnMarker> {
    let (h, data) = codec::batch_records(raw, codec::DECOMPRESSED_BYTES_MAX).ok()?;
    if !h.is_control() {
        return None;
    }
    let r = RecordIter::new(h, &data).next()?.ok()?;
    let key = r.key?;
    if key.len() < 4 {
        return None;
    }
    let commit = match i16::from_be_bytes([key[2], key[3]]) {
        CONTROL_TYPE_ABORT => false,
        CONTROL_TYPE_COMMIT => true,
        _ => return None,
    };
    let coordinator_epoch = match r.value {
        Some(v) if v.len() >= 6 => i32::from_be_bytes(v[2..6].try_into().ok()?),
        _ => -1,
    };
    Some(EndTxnMarker {
        commit,
        coordinator_epoch,
    })
}

impl Log {
    /// Appends the COMMIT or ABORT marker of (producer, epoch) as leader;
    /// see the module doc and `producer_state.rs` for the checks.
    pub fn append_end_txn_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        marker: EndTxnMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        self.check_open()?;
        let offset = self.log_end_offset;
        let mut pending = PendingUpdate::default();
        let completed = self.producers.check_end_txn(
            &mut pending,
            producer_id,
            epoch,
            marker,
            offset,
            now_ms,
        )?;
        let raw = marker_batch(producer_id, epoch, marker, now_ms);
        let mut header = [0u8; HEADER_SIZE];
        header.copy_from_slice(&raw[..HEADER_SIZE]);
        batch::set_base_offset(&mut header, offset);
        batch::set_partition_leader_epoch(&mut header, leader_epoch);
        let prepared = [PreparedBatch {
            header,
            records: &raw[HEADER_SIZE..],
        }];
        if self.epochs.assign(leader_epoch, offset) {
            self.epochs.flush()?;
        }
        if self.should_roll(raw.len() as u64, now_ms, offset, now_ms) {
            self.roll_at(now_ms)?;
        }
        self.active().append(&prepared)?;
        self.log_end_offset = offset + 1;
        self.producers.commit(pending, offset + 1);
        if let Some(t) = completed {
            self.producers.complete_txn(&t);
            if let Some(a) = self.aborted_entry(&t) {
                self.active().txn_index.append(a)?;
            }
        }
        Ok(AppendInfo {
            base_offset: offset,
            last_offset: offset,
            log_append_time_ms: -1,
            record_count: 1,
            batch_count: 1,
            duplicate_count: 0,
        })
    }

    /// The `.txnindex` entry of an ended transaction, if it was aborted.
    pub(crate) fn aborted_entry(&self, t: &CompletedTxn) -> Option<AbortedTxn> {
        t.is_aborted.then(|| AbortedTxn {
            producer_id: t.producer_id,
            first_offset: t.first_offset,
            last_offset: t.last_offset,
            last_stable_offset: self.producers.last_stable_offset_after(t),
        })
    }

    /// Applies a batch read from the log or copied from the leader to the
    /// producer state; `raw` is the whole batch (read for control batches
    /// only). Returns the aborted transaction it ended, for the `.txnindex`
    /// of the segment that holds it.
    pub(crate) fn replay_batch(
        &mut self,
        h: &BatchHeader,
        raw: Option<&[u8]>,
    ) -> Option<AbortedTxn> {
        let marker = if h.is_control() {
            raw.and_then(read_marker)
        } else {
            None
        };
        let t = self.producers.apply_from_log(h, marker)?;
        self.aborted_entry(&t)
    }

    /// First offset of the oldest open transaction.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers.first_unstable_offset()
    }

    /// Where read_committed reads stop, given the high watermark; see
    /// `ProducerStateManager::last_stable_offset`.
    /// Never below the log start (Kafka clamps the first unstable offset
    /// there: the transaction's start was deleted).
    pub fn last_stable_offset(&mut self, high_watermark: i64) -> i64 {
        let lso = self.producers.last_stable_offset(high_watermark);
        lso.max(self.log_start_offset.min(high_watermark))
    }

    /// (producer id, first offset) of the aborted transactions with data in
    /// [start, end), from the `.txnindex` of the segment holding `start` on.
    pub fn aborted_transactions(&self, start: i64, end: i64) -> Result<Vec<(i64, i64)>> {
        self.check_open()?;
        let floor = self
            .segments
            .range(..=start)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut out = Vec::new();
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            let (found, complete) = seg.txn_index.collect(start, end);
            out.extend(found.iter().map(|a| (a.producer_id, a.first_offset)));
            if complete {
                break;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::LogError;
    use crate::log::{LogConfig, OpenState};
    use crate::txn_index;
    use std::path::Path;

    fn data(pid: i64, epoch: i16, seq: i32, n: usize, txn: bool) -> Vec<u8> {
        let attrs = if txn { TRANSACTIONAL_BIT } else { 0 };
        let mut b = BatchBuilder::new(0, 1000)
            .producer(pid, epoch, seq)
            .attributes(attrs);
        for _ in 0..n {
            b.push(Record::new(1000, None, Some(b"v")));
        }
        b.build()
    }

    fn open(dir: &Path, clean: bool, segment_bytes: u64) -> Log {
        let config = LogConfig {
            segment_bytes,
            ..LogConfig::default()
        };
        let state = OpenState {
            recovery_point: 0,
            clean_shutdown: clean,
            log_start_offset: 0,
            now_ms: 1000,
        };
        Log::open(dir, config, state).unwrap()
    }

    fn marker(commit: bool, coordinator_epoch: i32) -> EndTxnMarker {
        EndTxnMarker {
            commit,
            coordinator_epoch,
        }
    }

    fn txnindex_bytes(dir: &Path, base: i64) -> Option<Vec<u8>> {
        std::fs::read(dir.join(crate::segment::file_name(base, "txnindex"))).ok()
    }

    fn abort_entry(pid: i64, first: i64, last: i64, lso: i64) -> Vec<u8> {
        txn_index::AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
        .encode()
        .to_vec()
    }

    #[test]
    fn marker_round_trip() {
        let m = marker(true, 7);
        let raw = marker_batch(42, 3, m, 1000);
        let h = BatchHeader::parse(&raw);
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (42, 3, -1)
        );
        assert_eq!(read_marker(&raw), Some(m));
        assert!(batch::check_stored_batch(&raw).is_ok());
        let abort = marker(false, 0);
        assert_eq!(read_marker(&marker_batch(1, 0, abort, 5)), Some(abort));
        // the record bytes are Kafka's: key 00 00 00 01, value 00 00 00 00 00 07
        let (_, data) = codec::batch_records(&raw, 1 << 20).unwrap();
        let r = RecordIter::new(h, &data).next().unwrap().unwrap();
        assert_eq!(r.key.unwrap(), &[0, 0, 0, 1]);
        assert_eq!(r.value.unwrap(), &[0, 0, 0, 0, 0, 7]);
        // a data batch is no marker
        assert_eq!(read_marker(&data_batch_for_test()), None);
    }

    fn data_batch_for_test() -> Vec<u8> {
        data(1, 0, 0, 1, true)
    }

    #[test]
    fn transaction_rules_lso_and_txnindex() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), true, 1 << 30);
        log.append(&data(-1, -1, -1, 1, false), 0, 1000).unwrap(); // 0
        log.append(&data(7, 0, 0, 2, true), 0, 1000).unwrap(); // 1-2
        log.append(&data(8, 0, 0, 1, true), 0, 1000).unwrap(); // 3
        assert_eq!(log.first_unstable_offset(), Some(1));
        assert_eq!(log.last_stable_offset(4), 1);
        assert_eq!(log.last_stable_offset(0), 0);
        // a plain batch of a producer inside a transaction: INVALID_TXN_STATE
        assert!(matches!(
            log.append(&data(7, 0, 2, 1, false), 0, 1000),
            Err(LogError::InvalidTxnState(_))
        ));
        // more transactional data does not move the transaction's start
        log.append(&data(7, 0, 2, 1, true), 0, 1000).unwrap(); // 4
        assert_eq!(
            log.producer_state()
                .entry(7)
                .unwrap()
                .current_txn_first_offset,
            1
        );
        // ABORT of 7 at 5 (coordinator epoch 3): the LSO it leaves is 8's start
        let info = log
            .append_end_txn_marker(7, 0, marker(false, 3), 0, 2000)
            .unwrap();
        assert_eq!((info.base_offset, info.last_offset), (5, 5));
        assert_eq!(
            txnindex_bytes(dir.path(), 0).unwrap(),
            abort_entry(7, 1, 5, 3)
        );
        assert_eq!(log.first_unstable_offset(), Some(3));
        // an older coordinator, an older producer epoch: refused, nothing written
        assert!(matches!(
            log.append_end_txn_marker(7, 0, marker(true, 2), 0, 2000),
            Err(LogError::TransactionCoordinatorFenced(_))
        ));
        assert!(matches!(
            log.append_end_txn_marker(8, -1, marker(true, 0), 0, 2000),
            Err(LogError::InvalidProducerEpoch(_))
        ));
        assert_eq!(log.log_end_offset(), 6);
        // COMMIT of 8 at 6: nothing open; until the high watermark passes the
        // marker the LSO stays at the transaction's start
        log.append_end_txn_marker(8, 0, marker(true, 0), 0, 2000)
            .unwrap();
        assert_eq!(log.first_unstable_offset(), None);
        assert_eq!(log.last_stable_offset(6), 3);
        assert_eq!(log.last_stable_offset(7), 7);
        assert_eq!(log.last_stable_offset(6), 6, "forgotten once replicated");
        assert_eq!(
            txnindex_bytes(dir.path(), 0).unwrap().len(),
            34,
            "commits not indexed"
        );
        assert_eq!(log.aborted_transactions(0, 7).unwrap(), vec![(7, 1)]);
        assert_eq!(log.aborted_transactions(0, 1).unwrap(), vec![]);
        assert_eq!(log.aborted_transactions(5, 7).unwrap(), vec![(7, 1)]);
        assert_eq!(log.aborted_transactions(6, 7).unwrap(), vec![]);
        // a marker for a producer with no open transaction ends nothing
        log.append_end_txn_marker(9, 0, marker(false, 0), 0, 2000)
            .unwrap();
        assert_eq!(txnindex_bytes(dir.path(), 0).unwrap().len(), 34);
        // the producer with a new epoch (bumped by its coordinator) may write again
        log.append_end_txn_marker(7, 1, marker(false, 3), 0, 2000)
            .unwrap();
        assert_eq!(log.producer_state().entry(7).unwrap().epoch, 1);
        log.append(&data(7, 1, 0, 1, false), 0, 1000).unwrap();
    }

    /// (first unstable offset, aborted transactions, per producer: id,
    /// epoch, coordinator epoch, open transaction's first offset).
    type TxnState = (Option<i64>, Vec<(i64, i64)>, Vec<(i64, i16, i32, i64)>);

    /// The state and .txnindex after open == those built by the appends.
    fn state_of(log: &Log) -> TxnState {
        let mut producers: Vec<_> = log
            .producer_state()
            .entries()
            .map(|e| {
                (
                    e.producer_id,
                    e.epoch,
                    e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
            })
            .collect();
        producers.sort();
        (
            log.first_unstable_offset(),
            log.aborted_transactions(0, i64::MAX).unwrap(),
            producers,
        )
    }

    /// Transactions over several segments: 7 aborted across a roll, 8 open.
    fn write_history(log: &mut Log) {
        log.append(&data(7, 0, 0, 3, true), 0, 1000).unwrap(); // 0-2
        log.append(&data(8, 0, 0, 3, true), 0, 1000).unwrap(); // 3-5
        log.roll(1000).unwrap();
        log.append(&data(7, 0, 3, 3, true), 0, 1000).unwrap(); // 6-8
        log.append_end_txn_marker(7, 0, marker(false, 2), 0, 2000)
            .unwrap(); // 9
        log.append(&data(9, 0, 0, 1, true), 0, 1000).unwrap(); // 10
        log.append_end_txn_marker(9, 0, marker(true, 2), 0, 2000)
            .unwrap(); // 11
        log.roll(1000).unwrap();
        log.append(&data(8, 0, 3, 1, true), 0, 1000).unwrap(); // 12
    }

    #[test]
    fn reopen_clean_and_unclean_rebuilds_state_and_txnindex() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), true, 1 << 30);
        write_history(&mut log);
        let expect = state_of(&log);
        assert_eq!(expect.0, Some(3));
        assert_eq!(expect.1, vec![(7, 0)]);
        // the abort is indexed in the segment of its marker (base 6), with
        // producer 8's open transaction as the LSO it left
        let entry = abort_entry(7, 0, 9, 3);
        assert_eq!(txnindex_bytes(dir.path(), 6).unwrap(), entry);
        assert!(txnindex_bytes(dir.path(), 0).is_none());
        // a fetch of segment 0's range finds the abort in the next segment
        assert_eq!(log.aborted_transactions(0, 3).unwrap(), vec![(7, 0)]);
        log.close().unwrap();
        // clean: the snapshot at the log end carries 8's open transaction
        let snap = crate::producer_state::snapshot_path(dir.path(), 13);
        let entries =
            crate::producer_state::decode_snapshot(&std::fs::read(&snap).unwrap()).unwrap();
        let e8 = entries.iter().find(|e| e.producer_id == 8).unwrap();
        assert_eq!(e8.current_txn_first_offset, 3);
        let e7 = entries.iter().find(|e| e.producer_id == 7).unwrap();
        assert_eq!((e7.current_txn_first_offset, e7.coordinator_epoch), (-1, 2));
        let log = open(dir.path(), true, 1 << 30);
        assert_eq!(state_of(&log), expect);
        drop(log);
        // unclean, every snapshot and .txnindex gone: all rebuilt from the log
        remove_derived_state(dir.path());
        let mut log = open(dir.path(), false, 1 << 30);
        assert_eq!(state_of(&log), expect);
        assert_eq!(txnindex_bytes(dir.path(), 6).unwrap(), entry);
        assert_eq!(log.last_stable_offset(13), 3);
        // a stale entry past the snapshot is replaced on replay
        drop(log);
        let p = dir.path().join(crate::segment::file_name(6, "txnindex"));
        let mut stale = entry.clone();
        stale.extend(abort_entry(9, 10, 11, 12));
        std::fs::write(&p, &stale).unwrap();
        let log = open(dir.path(), false, 1 << 30);
        assert_eq!(state_of(&log), expect);
        assert_eq!(std::fs::read(&p).unwrap(), entry);
    }

    #[test]
    fn truncation_reopens_and_forgets_transactions_and_index_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), true, 1 << 30);
        write_history(&mut log);
        // cut the abort marker: 7's transaction is open again, its entry gone
        log.truncate_to(9, 1000).unwrap();
        assert_eq!(log.first_unstable_offset(), Some(0));
        assert_eq!(txnindex_bytes(dir.path(), 6).unwrap(), Vec::<u8>::new());
        assert_eq!(log.aborted_transactions(0, 100).unwrap(), vec![]);
        assert_eq!(
            log.producer_state()
                .entry(7)
                .unwrap()
                .current_txn_first_offset,
            0
        );
        // cut below 8's start: only 7's transaction (from 0) is left open
        log.truncate_to(3, 1000).unwrap();
        assert_eq!(log.first_unstable_offset(), Some(0));
        assert!(log
            .producer_state()
            .entry(8)
            .is_none_or(|e| e.current_txn_first_offset < 0));
        log.truncate_fully_and_start_at(50, 1000).unwrap();
        assert_eq!(log.first_unstable_offset(), None);
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|f| !f
            .unwrap()
            .path()
            .to_string_lossy()
            .ends_with(".txnindex")));
    }

    #[test]
    fn a_follower_copy_builds_the_same_state_and_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut leader = open(dir.path(), true, 1 << 30);
        write_history(&mut leader);
        let bytes = leader
            .read(0, u64::MAX, true, None)
            .unwrap()
            .map(|s| s.read().unwrap())
            .unwrap();
        // the read stops at segment ends: copy segment by segment
        let fdir = tempfile::tempdir().unwrap();
        let mut follower = open(fdir.path(), true, 1 << 30);
        let mut chunk = bytes;
        let at = loop {
            follower.append_as_follower(&chunk, 1000).unwrap();
            let at = follower.log_end_offset();
            if at >= leader.log_end_offset() {
                break at;
            }
            chunk = leader
                .read(at, u64::MAX, true, None)
                .unwrap()
                .unwrap()
                .read()
                .unwrap();
        };
        assert_eq!(at, 13);
        assert_eq!(state_of(&follower), state_of(&leader));
        let idx: Vec<u8> = follower
            .segments()
            .flat_map(|s| s.txn_index().entries().to_vec())
            .flat_map(|e| e.encode())
            .collect();
        assert_eq!(idx, abort_entry(7, 0, 9, 3));
    }

    #[test]
    fn retention_deletes_a_segments_txnindex_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), true, 1 << 30);
        write_history(&mut log);
        assert!(txnindex_bytes(dir.path(), 6).is_some());
        // 8's open transaction starts at 3: below the log start the LSO is the start
        assert_eq!(log.last_stable_offset(13), 3);
        assert_eq!(log.advance_log_start_offset(12).unwrap(), 2);
        assert_eq!(log.last_stable_offset(13), 12);
        assert!(txnindex_bytes(dir.path(), 6).is_none());
        assert_eq!(log.aborted_transactions(12, 13).unwrap(), vec![]);
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        /// Random transactional appends, markers and rolls: the open
        /// transactions and aborted ones match a model, and an unclean reopen
        /// without snapshots or .txnindex files rebuilds exactly the same.
        #[test]
        fn replay_matches_the_appends(ops in prop::collection::vec((0u8..4, 0i64..3), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let mut log = open(dir.path(), true, 1 << 30);
            let mut seq = [0i32; 3];
            let mut open_at: [Option<i64>; 3] = [None; 3];
            let mut aborted: Vec<(i64, i64)> = Vec::new();
            for (op, pid) in ops {
                let p = pid as usize;
                let at = log.log_end_offset();
                match op {
                    0 => {
                        log.append(&data(pid, 0, seq[p], 2, true), 0, 1000).unwrap();
                        seq[p] += 2;
                        open_at[p].get_or_insert(at);
                    }
                    1 | 2 => {
                        log.append_end_txn_marker(pid, 0, marker(op == 1, 0), 0, 1000).unwrap();
                        if let Some(first) = open_at[p].take() {
                            if op == 2 {
                                aborted.push((pid, first));
                            }
                        }
                    }
                    _ => log.roll(1000).unwrap(),
                }
            }
            let expect_first = open_at.iter().flatten().min().copied();
            prop_assert_eq!(log.first_unstable_offset(), expect_first);
            let mut got = log.aborted_transactions(0, i64::MAX).unwrap();
            got.sort();
            aborted.sort();
            prop_assert_eq!(&got, &aborted);
            let before = state_of(&log);
            drop(log);
            remove_derived_state(dir.path());
            let log = open(dir.path(), false, 1 << 30);
            prop_assert_eq!(state_of(&log), before);
        }
    }

    /// Deletes every producer snapshot and .txnindex file: what recovery rebuilds
    /// from the log alone.
    fn remove_derived_state(dir: &std::path::Path) {
        for f in std::fs::read_dir(dir).unwrap() {
            let p = f.unwrap().path();
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            if ext == "snapshot" || ext == "txnindex" {
                std::fs::remove_file(p).unwrap();
            }
        }
    }

    fn keyed(pid: i64, seq: i32, kvs: &[(&str, &str)], txn: bool) -> Vec<u8> {
        let attrs = if txn { TRANSACTIONAL_BIT } else { 0 };
        let mut b = BatchBuilder::new(0, 1000)
            .producer(pid, 0, seq)
            .attributes(attrs);
        for (k, v) in kvs {
            b.push(Record::new(1000, Some(k.as_bytes()), Some(v.as_bytes())));
        }
        b.build()
    }

    /// (offset, key or "ctl") of everything in the log.
    fn contents(log: &Log) -> Vec<(i64, String)> {
        let mut out = Vec::new();
        let mut at = log.log_start_offset();
        while let Some(slice) = log.read(at, u64::MAX, true, None).unwrap() {
            let bytes = slice.read().unwrap();
            let mut pos = 0;
            while pos < bytes.len() {
                let h = BatchHeader::parse(&bytes[pos..]);
                let raw = &bytes[pos..pos + h.size()];
                let (_, data) = codec::batch_records(raw, 1 << 20).unwrap();
                for r in RecordIter::new(h, &data) {
                    let r = r.unwrap();
                    let what = if h.is_control() {
                        "ctl".to_string()
                    } else {
                        String::from_utf8_lossy(r.key.unwrap()).into_owned()
                    };
                    out.push((r.offset, what));
                }
                pos += h.size();
                at = h.next_offset();
            }
        }
        out
    }

    #[test]
    fn the_cleaner_drops_aborted_data_then_its_marker() {
        use crate::cleaner::CleanConfig;
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            compact: true,
            ..LogConfig::default()
        };
        let state = OpenState {
            now_ms: 1000,
            clean_shutdown: true,
            ..OpenState::default()
        };
        let mut log = Log::open(dir.path(), config, state).unwrap();
        log.append(&keyed(1, 0, &[("a", "1")], true), 0, 1000)
            .unwrap(); // 0
        log.append(&keyed(2, 0, &[("a", "2"), ("b", "x")], true), 0, 1000)
            .unwrap(); // 1-2
        log.append_end_txn_marker(1, 0, marker(true, 0), 0, 2000)
            .unwrap(); // 3
        log.append_end_txn_marker(2, 0, marker(false, 0), 0, 2000)
            .unwrap(); // 4
        log.append(&keyed(2, 2, &[("c", "3")], true), 0, 1000)
            .unwrap(); // 5
        log.append_end_txn_marker(2, 0, marker(true, 0), 0, 2000)
            .unwrap(); // 6
        log.append(&keyed(3, 0, &[("d", "4")], true), 0, 1000)
            .unwrap(); // 7: open
        log.roll(1000).unwrap();
        log.append(&keyed(-1, -1, &[("e", "5")], false), 0, 1000)
            .unwrap(); // 8
        log.roll(1000).unwrap();
        assert_eq!(log.aborted_transactions(0, 100).unwrap(), vec![(2, 1)]);
        let clean = |log: &mut Log, now_ms| {
            let c = CleanConfig {
                now_ms,
                delete_retention_ms: 1000,
                ..CleanConfig::default()
            };
            log.clean(0, c).unwrap()
        };
        // producer 3's open transaction (from 7) keeps its segment out
        let stats = clean(&mut log, 2500);
        assert_eq!(
            stats.first_dirty_offset, 0,
            "nothing cleanable before 7's segment"
        );
        log.append_end_txn_marker(3, 0, marker(true, 0), 0, 2000)
            .unwrap(); // 9
        log.roll(1000).unwrap();
        // within the delete horizon: aborted data goes, the markers stay, the
        // abort keeps its .txnindex entry in the cleaned segment
        let stats = clean(&mut log, 2500);
        assert_eq!(stats.records_removed, 2);
        let keys: Vec<(i64, String)> = contents(&log);
        let expect: Vec<(i64, String)> = [
            (0, "a"),
            (3, "ctl"),
            (4, "ctl"),
            (5, "c"),
            (6, "ctl"),
            (7, "d"),
            (8, "e"),
            (9, "ctl"),
        ]
        .iter()
        .map(|(o, k)| (*o, k.to_string()))
        .collect();
        assert_eq!(keys, expect);
        assert_eq!(log.aborted_transactions(0, 100).unwrap(), vec![(2, 1)]);
        assert_eq!(
            txnindex_bytes(dir.path(), 0).unwrap(),
            abort_entry(2, 1, 4, 5)
        );
        // past the horizon: the abort's data is gone, so its marker goes with
        // its index entry; commits whose data is still there stay
        clean(&mut log, 100_000);
        let keys: Vec<i64> = contents(&log).iter().map(|(o, _)| *o).collect();
        assert_eq!(keys, vec![0, 3, 5, 6, 7, 8, 9]);
        assert_eq!(log.aborted_transactions(0, 100).unwrap(), vec![]);
        assert_eq!(txnindex_bytes(dir.path(), 0).unwrap(), Vec::<u8>::new());
        // and the state rebuilt from the cleaned log agrees
        let before = state_of(&log);
        log.close().unwrap();
        for f in std::fs::read_dir(dir.path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().and_then(|e| e.to_str()) == Some("snapshot") {
                std::fs::remove_file(p).unwrap();
            }
        }
        let log = open(dir.path(), false, 1 << 30);
        assert_eq!(state_of(&log).0, before.0);
        assert_eq!(state_of(&log).1, before.1);
    }

    /// What a read_committed consumer gets (Kafka's consumer algorithm): the
    /// keys of data records, skipping the transactional batches of a producer
    /// from the first offset of one of its aborted transactions to its ABORT
    /// marker.
    fn committed_view(log: &Log) -> Vec<(i64, String)> {
        let mut aborted = log.aborted_transactions(0, i64::MAX).unwrap();
        aborted.sort_by_key(|(_, first)| *first);
        let mut pending: std::collections::VecDeque<(i64, i64)> = aborted.into();
        let mut active = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut at = log.log_start_offset();
        while let Some(slice) = log.read(at, u64::MAX, true, None).unwrap() {
            let bytes = slice.read().unwrap();
            let mut pos = 0;
            while pos < bytes.len() {
                let h = BatchHeader::parse(&bytes[pos..]);
                let raw = &bytes[pos..pos + h.size()];
                pos += h.size();
                at = h.next_offset();
                while pending.front().is_some_and(|(_, f)| *f <= h.last_offset()) {
                    active.insert(pending.pop_front().unwrap().0);
                }
                if h.is_control() {
                    if read_marker(raw).is_some_and(|m| !m.commit) {
                        active.remove(&h.producer_id);
                    }
                    continue;
                }
                if h.is_transactional() && active.contains(&h.producer_id) {
                    continue;
                }
                let (_, data) = codec::batch_records(raw, 1 << 20).unwrap();
                for r in RecordIter::new(h, &data) {
                    let r = r.unwrap();
                    out.push((
                        r.offset,
                        String::from_utf8_lossy(r.key.unwrap()).into_owned(),
                    ));
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        /// Random transactions on a compacted log with unique keys, cleaned
        /// twice (markers young, then old): read_committed consumers see the
        /// same records before and after, and after a reopen without
        /// snapshots or .txnindex files (rebuilt from the cleaned log).
        #[test]
        fn cleaning_keeps_the_committed_view(
            ops in prop::collection::vec((0u8..4, 0i64..3), 1..40)
        ) {
            use crate::cleaner::CleanConfig;
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig { compact: true, ..LogConfig::default() };
            let state = OpenState { now_ms: 1000, clean_shutdown: true, ..OpenState::default() };
            let mut log = Log::open(dir.path(), config, state).unwrap();
            let mut seq = [0i32; 3];
            let mut key = 0;
            for (op, pid) in ops {
                let p = pid as usize;
                match op {
                    0 => {
                        let k = format!("k{key}");
                        key += 1;
                        log.append(&keyed(pid, seq[p], &[(&k, "v")], true), 0, 1000).unwrap();
                        seq[p] += 1;
                    }
                    1 | 2 => {
                        log.append_end_txn_marker(pid, 0, marker(op == 1, 0), 0, 2000)
                            .unwrap();
                    }
                    _ => log.roll(1000).unwrap(),
                }
            }
            // end every transaction (the cleaner stops at an open one), then a
            // segment of its own so everything before it is cleanable
            for pid in 0..3 {
                log.append_end_txn_marker(pid, 0, marker(false, 0), 0, 2000).unwrap();
            }
            log.roll(1000).unwrap();
            log.append(&keyed(-1, -1, &[("last", "v")], false), 0, 1000).unwrap();
            log.roll(1000).unwrap();
            let before = committed_view(&log);
            for now_ms in [2500, 100_000] {
                let c = CleanConfig { now_ms, delete_retention_ms: 1000, ..CleanConfig::default() };
                log.clean(0, c).unwrap();
                prop_assert_eq!(&committed_view(&log), &before);
            }
            let state_before = state_of(&log);
            drop(log);
            remove_derived_state(dir.path());
            let log = open(dir.path(), false, 1 << 30);
            prop_assert_eq!(committed_view(&log), before);
            // (an aborted transaction's first offset may move up: its first
            // batches are gone, the replay starts it at the first one left)
            prop_assert_eq!(state_of(&log).0, state_before.0);
        }
    }
}
