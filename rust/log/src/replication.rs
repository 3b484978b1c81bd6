//! What a replica needs from its log (Kafka's `UnifiedLog` replication
//! paths): appending batches copied from the leader with the leader's
//! offsets, the leader-epoch cache (`leader_epoch.rs`) kept in step with the
//! log, and its OffsetForLeaderEpoch answer.
//!
//! Follower append (Kafka's `appendAsFollower`): the batches are validated as
//! stored batches are (length, magic, CRC-32C, record count; a compacted
//! batch's lastOffsetDelta may exceed its record count), not against
//! max.message.bytes (the leader accepted them under its own config) and
//! without record-level validation (the leader did that). A trailing partial
//! batch is ignored, as Kafka's batch iterator ignores it (a fetch response
//! may end with one); nothing else about the bytes changes: offsets, leader
//! epochs, timestamps and CRCs are written as they came, so a follower's
//! segments hold the leader's bytes.
//!
//! Offsets: every batch must start after the previous one ends, and the first
//! at or after the log end offset; otherwise [`LogError::UnexpectedAppendOffset`].
//! A gap is accepted, as Kafka accepts it: compaction removes whole batches
//! on the leader, so the batches a follower copies need not be contiguous.
//! One overlap is repaired, as Kafka's `Partition` repairs it: an empty log
//! (log start == log end) receiving the batch that holds its start offset
//! (the leader's log start fell inside a batch after DeleteRecords) restarts
//! at that batch's base offset.
//!
//! Producer state: each appended batch is applied as the state rebuild after
//! a restart applies it (`Log::replay_batch`: transaction markers end their
//! transaction and an abort goes into the `.txnindex`; the same
//! per-producer update the leader's check commits), without the checks a
//! client append gets: no duplicate or sequence rejection (Kafka skips them
//! for replication). A follower thus knows each producer's last 5 batches
//! and, once leader, recognises a retried batch with its original offsets.
//!
//! Leader epochs: the cache gets (epoch, base offset) of every batch whose
//! epoch is new (leader and follower appends alike), and
//! [`Log::assign_leader_epoch`] when the broker becomes leader. Truncation
//! drops entries at or after the new log end, advancing the log start
//! rewrites the first entry, emptying the log clears it. On open the file is
//! read and cut to [log start, log end]; when it is missing, unreadable, or
//! does not know the epoch of the last batch, it is rebuilt from the batch
//! headers of the whole log (no records are decoded).
//!
//! Crash behaviour: the epoch file is written before the batches (so it may
//! be ahead of the log, never behind for what was fsynced) and cut to the
//! recovered log end on open; the segment write and its rollback are those
//! of the leader append (`segment.rs`).

use crate::batch::{self, BatchHeader, BatchRef, HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH};
use crate::error::{LogError, Result};
use crate::leader_epoch::LeaderEpochCache;
use crate::log::{AppendInfo, Log};
use crate::segment::PreparedBatch;

/// The whole batches at the start of `buf` (a fetch response's records),
/// each checked as a stored batch; a trailing partial batch is left out.
fn fetched_batches(buf: &[u8]) -> Result<Vec<BatchRef>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while buf.len() - pos >= LOG_OVERHEAD {
        let length = batch::be_i32(buf, pos + batch::LENGTH_AT);
        if length < MIN_BATCH_LENGTH {
            return Err(LogError::Corrupt(format!(
                "batch length {length} < {MIN_BATCH_LENGTH} at byte {pos}"
            )));
        }
        let size = length as usize + LOG_OVERHEAD;
        if buf.len() - pos < size {
            break;
        }
        let header = batch::check_stored_batch(&buf[pos..pos + size])?;
        out.push(BatchRef {
            position: pos,
            header,
        });
        pos += size;
    }
    Ok(out)
}

impl Log {
    /// Appends batches copied from the leader, keeping their offsets, epochs
    /// and bytes; all of them or none (see the module doc for the rules).
    /// With no whole batch in `records` nothing is written and the result
    /// has offsets -1 and zero counts.
    pub fn append_as_follower(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo> {
        self.check_open()?;
        let refs = fetched_batches(records)?;
        let (Some(first), Some(last)) = (refs.first(), refs.last()) else {
            return Ok(AppendInfo {
                base_offset: -1,
                last_offset: -1,
                log_append_time_ms: -1,
                record_count: 0,
                batch_count: 0,
                duplicate_count: 0,
            });
        };
        let (first, last) = (first.header, last.header);
        let empty = self.log_start_offset == self.log_end_offset;
        let restart = first.base_offset < self.log_end_offset
            && empty
            && first.last_offset() >= self.log_end_offset;
        let mut next = if restart {
            first.base_offset
        } else {
            self.log_end_offset
        };
        let mut record_count = 0i64;
        let mut max_ts = -1i64;
        let mut size = 0u64;
        let mut prepared = Vec::with_capacity(refs.len());
        for r in &refs {
            let h = r.header;
            if h.base_offset < next {
                return Err(LogError::UnexpectedAppendOffset {
                    offset: h.base_offset,
                    next_offset: next,
                });
            }
            next = h.next_offset();
            record_count += h.record_count as i64;
            max_ts = max_ts.max(h.max_timestamp);
            size += h.size() as u64;
            let raw = &records[r.position..r.position + h.size()];
            let mut header = [0u8; HEADER_SIZE];
            header.copy_from_slice(&raw[..HEADER_SIZE]);
            prepared.push(PreparedBatch {
                header,
                records: &raw[HEADER_SIZE..],
            });
        }
        if restart {
            self.truncate_fully_and_start_at(first.base_offset, now_ms)?;
        }
        let mut epochs_changed = false;
        for r in &refs {
            let h = &r.header;
            epochs_changed |= self.epochs.assign(h.partition_leader_epoch, h.base_offset);
        }
        if epochs_changed {
            self.epochs.flush()?;
        }
        if self.should_roll(size, max_ts, last.last_offset(), now_ms) {
            self.roll_at(now_ms)?;
        }
        self.fit_active_segment(first.base_offset, last.last_offset(), now_ms)?;
        self.active().append(&prepared)?;
        self.log_end_offset = next;
        for r in &refs {
            let raw = &records[r.position..r.position + r.header.size()];
            if let Some(a) = self.replay_batch(&r.header, Some(raw)) {
                self.active().txn_index.append(a)?;
            }
        }
        self.producers.set_map_end_offset(next);
        Ok(AppendInfo {
            base_offset: first.base_offset,
            last_offset: last.last_offset(),
            log_append_time_ms: -1,
            record_count,
            batch_count: refs.len() as i64,
            duplicate_count: 0,
        })
    }

    /// After a gap of more than i32::MAX offsets the empty active segment
    /// (based at the old log end) cannot index the batches: it is replaced
    /// by one based at the first batch, as Kafka rolls a follower's segment
    /// at the first appended offset.
    fn fit_active_segment(&mut self, first: i64, last: i64, now_ms: i64) -> Result<()> {
        let seg = self.active();
        if seg.size() > 0 || last - seg.base_offset() <= i32::MAX as i64 {
            return Ok(());
        }
        let base = seg.base_offset();
        if let Some(s) = self.segments.remove(&base) {
            s.delete_files()?;
        }
        self.add_segment(first, now_ms)
    }

    /// Records that `epoch` starts at `start_offset`, as a new leader does
    /// with its log end offset (Kafka's `maybeAssignEpochStartOffset`), and
    /// writes the file if that changed the cache. Negative values are
    /// ignored.
    pub fn assign_leader_epoch(&mut self, epoch: i32, start_offset: i64) -> Result<()> {
        self.check_open()?;
        if self.epochs.assign(epoch, start_offset) {
            self.epochs.flush()?;
        }
        Ok(())
    }

    /// The newest leader epoch of the cache, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }

    /// The leader-epoch cache (tests, tools).
    pub fn leader_epochs(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    /// (epoch, end offset) for an OffsetForLeaderEpoch request; see
    /// [`LeaderEpochCache::end_offset_for`].
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64)> {
        self.check_open()?;
        Ok(self.epochs.end_offset_for(epoch, self.log_end_offset))
    }

    /// Loads the cache on open (see the module doc); when it was rebuilt or
    /// cut, the file is written with the log's next flush, not here.
    pub(crate) fn load_leader_epochs(&mut self) -> Result<()> {
        let last_epoch = self.last_batch()?.map(|h| h.partition_leader_epoch);
        let (loaded, missing) = match LeaderEpochCache::load(&self.dir) {
            Ok(c) => {
                let missing = c.is_none();
                (c, missing)
            }
            Err(LogError::Corrupt(_)) => (None, false),
            Err(e) => return Err(e),
        };
        let (mut cache, rebuilt) = match loaded {
            Some(c) if last_epoch.is_none_or(|e| e < 0 || c.latest_epoch() >= Some(e)) => {
                (c, false)
            }
            _ => (self.epochs_from_log()?, true),
        };
        let cut = cache.truncate_from_end(self.log_end_offset);
        let moved = cache.truncate_from_start(self.log_start_offset);
        // no file and nothing in the log to rebuild from (a new log, a follower of a
        // partition never written to): the next open finds the same, so there is
        // nothing to write. Written, it cost every such log two fsyncs at its first
        // flush or close: 20,000 of a clean stop's ~30,000 with 10,000 empty logs
        let same_without_a_file = missing && cache.entries().is_empty();
        if (rebuilt && !same_without_a_file) || cut || moved {
            // what the next open would rebuild or cut again from the same files:
            // written with the log's next flush (or the next new entry)
            cache.defer_flush();
        }
        self.epochs = cache;
        Ok(())
    }

    /// The cache as the batch headers of the log define it.
    fn epochs_from_log(&self) -> Result<LeaderEpochCache> {
        let mut cache = LeaderEpochCache::new(&self.dir);
        for seg in self.segments.values() {
            let mut pos = 0u64;
            while let Some(h) = seg.header_at(pos)? {
                cache.assign(h.partition_leader_epoch, h.base_offset);
                pos += h.size() as u64;
            }
        }
        Ok(cache)
    }

    /// Header of the batch holding the last offset, if the log has one.
    fn last_batch(&self) -> Result<Option<BatchHeader>> {
        let last = self.log_end_offset - 1;
        let Some((_, seg)) = self.segments.range(..=last).next_back() else {
            return Ok(None);
        };
        Ok(seg.find_batch(last)?.map(|(_, h)| h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Record};

    fn batch(n: usize, base: i64, epoch: i32) -> Vec<u8> {
        let mut b = BatchBuilder::new(0, 1000);
        for i in 0..n {
            b.push(Record::new(1000 + i as i64, None, Some(b"v")));
        }
        let mut raw = b.build();
        batch::set_base_offset(&mut raw, base);
        batch::set_partition_leader_epoch(&mut raw, epoch);
        raw
    }

    #[test]
    fn fetched_batches_ignore_a_partial_tail_only() {
        let mut buf = batch(2, 0, 0);
        buf.extend_from_slice(&batch(1, 2, 0));
        let whole = buf.len();
        assert_eq!(fetched_batches(&buf).unwrap().len(), 2);
        let third = batch(3, 3, 0);
        for cut in [1, LOG_OVERHEAD, HEADER_SIZE, third.len() - 1] {
            let mut b = buf.clone();
            b.extend_from_slice(&third[..cut]);
            assert_eq!(fetched_batches(&b).unwrap().len(), 2, "cut {cut}");
        }
        assert!(fetched_batches(&[]).unwrap().is_empty());
        // a whole batch with a bad CRC, or an impossible length, is corrupt
        let mut bad = buf.clone();
        bad[whole - 1] ^= 1;
        assert!(matches!(fetched_batches(&bad), Err(LogError::Corrupt(_))));
        let mut bad = buf.clone();
        bad[batch::LENGTH_AT..batch::LENGTH_AT + 4].copy_from_slice(&3i32.to_be_bytes());
        assert!(matches!(fetched_batches(&bad), Err(LogError::Corrupt(_))));
    }
}
