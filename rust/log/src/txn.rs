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
        let completed =
            self.producers
                .check_end_txn(&mut pending, producer_id, epoch, marker, offset, now_ms)?;
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
    pub fn last_stable_offset(&mut self, high_watermark: i64) -> i64 {
        self.producers.last_stable_offset(high_watermark)
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

    #[test]
    fn marker_round_trip() {
        let m = EndTxnMarker {
            commit: true,
            coordinator_epoch: 7,
        };
        let raw = marker_batch(42, 3, m, 1000);
        let h = BatchHeader::parse(&raw);
        assert!(h.is_control() && h.is_transactional());
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (42, 3, -1));
        assert_eq!(read_marker(&raw), Some(m));
        assert!(batch::check_stored_batch(&raw).is_ok());
        let abort = EndTxnMarker {
            commit: false,
            coordinator_epoch: 0,
        };
        assert_eq!(read_marker(&marker_batch(1, 0, abort, 5)), Some(abort));
        // the record bytes are Kafka's: key 00 00 00 01, value 00 00 00 00 00 07
        let (_, data) = codec::batch_records(&raw, 1 << 20).unwrap();
        let r = RecordIter::new(h, &data).next().unwrap().unwrap();
        assert_eq!(r.key.unwrap(), &[0, 0, 0, 1]);
        assert_eq!(r.value.unwrap(), &[0, 0, 0, 0, 0, 7]);
    }
}
