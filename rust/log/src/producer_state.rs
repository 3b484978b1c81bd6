//! Idempotent producer state: per producer id, its epoch and the last
//! [`BATCHES_RETAINED`] batches it wrote, checked on every append; and the
//! `<20-digit offset>.snapshot` files that persist it.
//!
//! Rules (Kafka's `ProducerAppendInfo`, for batches with producerId >= 0):
//!
//! * epoch lower than the producer's -> [`LogError::InvalidProducerEpoch`] (47);
//! * epoch higher: the first sequence must be 0, unless the producer has no
//!   epoch yet -> else [`LogError::OutOfOrderSequence`] (45);
//! * same epoch: a batch whose (first, last) sequence equals one of the
//!   retained batches is a duplicate: it is not appended and the append
//!   reports the original offsets; otherwise the first sequence must follow
//!   the last one (`i32::MAX` wraps to 0) else OUT_OF_ORDER_SEQUENCE;
//! * a producer with no state accepts any sequence (its data may have been
//!   removed by retention);
//! * transactions: a transactional batch (attributes bit 4) from a producer
//!   with no open transaction opens one at its first offset
//!   (`current_txn_first_offset`); a non-transactional batch from a producer
//!   with an open transaction -> [`LogError::InvalidTxnState`] (48);
//! * an end-transaction marker (COMMIT/ABORT control batch, written by the
//!   broker for WriteTxnMarkers) with an epoch lower than the producer's ->
//!   INVALID_PRODUCER_EPOCH (47, Kafka >= 2.7 answers this rather than
//!   PRODUCER_FENCED); with a coordinator epoch lower than the one recorded
//!   -> [`LogError::TransactionCoordinatorFenced`] (52). It takes the
//!   marker's epoch and coordinator epoch and ends the open transaction, if
//!   any ([`CompletedTxn`]; a marker with no open transaction ends nothing).
//!   Replayed batches (followers, recovery) are applied without these checks.
//!
//! Transactions ended are remembered until the high watermark passes their
//! marker, so the last stable offset ([`ProducerStateManager::last_stable_offset`])
//! stays at their first offset until every replica in the ISR has the marker
//! (Kafka's `unreplicatedTxns`).
//!
//! Snapshot file layout (Kafka's `ProducerSnapshot` message, version 1, all
//! big-endian):
//!
//! ```text
//! off size field
//!   0    2 version               = 1
//!   2    4 crc                   CRC-32C (uint32) of bytes 6..end
//!   6    4 entry count           int32
//!  10   46 entry * count:
//!          producerId i64 | epoch i16 | lastSequence i32 | lastOffset i64 |
//!          offsetDelta i32 | timestamp i64 | coordinatorEpoch i32 |
//!          currentTxnFirstOffset i64
//! ```
//!
//! A snapshot named `N.snapshot` holds the state of every batch below offset
//! N. Only the last batch of each producer is stored (as Kafka does), so
//! after a restart a retry of one of the four older batches is checked
//! against the sequence rule instead of being found as a duplicate, unless
//! the batches after the snapshot are re-read from the log.
//!
//! Snapshots are written on segment roll (at the new base offset) and on
//! clean close (at the log end), at most [`SNAPSHOTS_RETAINED`] are kept.
//! Crash behaviour: a snapshot is written then fsynced; a partial or corrupt
//! one fails its CRC on load and is deleted, and the next older one (or the
//! log start) is used. Snapshots above the log end (after truncation or tail
//! recovery) are deleted. The state between the snapshot and the log end is
//! rebuilt from batch headers (`Log`), never from records.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::batch::BatchHeader;
use crate::error::{LogError, Result};
use crate::segment::file_name;

/// Batches remembered per producer for duplicate detection (Kafka: 5, the
/// client's max.in.flight.requests.per.connection for idempotence).
pub const BATCHES_RETAINED: usize = 5;
/// Snapshot files kept in a partition directory.
pub const SNAPSHOTS_RETAINED: usize = 3;
/// Snapshot file format version.
pub const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_ENTRY_SIZE: usize = 46;
const SNAPSHOT_HEADER_SIZE: usize = 10;
/// Producer epoch of a producer never seen (RecordBatch.NO_PRODUCER_EPOCH).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// `seq + delta` with Kafka's wrap-around at i32::MAX.
pub fn increment_sequence(seq: i32, delta: i32) -> i32 {
    if seq > i32::MAX - delta {
        (seq as i64 + delta as i64 - i32::MAX as i64 - 1) as i32
    } else {
        seq + delta
    }
}

/// `seq - delta`, the inverse of [`increment_sequence`].
pub fn decrement_sequence(seq: i32, delta: i32) -> i32 {
    if seq < delta {
        (i32::MAX as i64 - delta as i64 + seq as i64 + 1) as i32
    } else {
        seq - delta
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// One batch a producer wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    /// last offset - first offset (== last seq - first seq).
    pub offset_delta: i32,
    pub max_timestamp: i64,
}

impl BatchMetadata {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }
    pub fn first_offset(&self) -> i64 {
        self.last_offset - self.offset_delta as i64
    }
}

/// A transaction ended by a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub is_aborted: bool,
}

/// What an end-transaction marker says (its one control record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// What the log knows of one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// Oldest first, at most [`BATCHES_RETAINED`].
    pub batches: VecDeque<BatchMetadata>,
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    /// First offset of the producer's open transaction, -1 when none.
    pub current_txn_first_offset: i64,
}

impl ProducerEntry {
    fn empty(producer_id: i64) -> ProducerEntry {
        ProducerEntry {
            producer_id,
            epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: -1,
        }
    }
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }
    fn update_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }
    fn add_batch(&mut self, epoch: i16, b: BatchMetadata) {
        self.update_epoch(epoch);
        if self.batches.len() == BATCHES_RETAINED {
            self.batches.pop_front();
        }
        self.batches.push_back(b);
        self.last_timestamp = b.max_timestamp;
    }
    fn find_duplicate(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<BatchMetadata> {
        if epoch != self.epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|b| b.first_seq() == first_seq && b.last_seq == last_seq)
            .copied()
    }
}

/// A marker's effect on its producer (Kafka's `appendEndTxnMarker` after
/// the checks): new epoch and coordinator epoch, the open transaction ended.
fn end_txn(
    e: &mut ProducerEntry,
    epoch: i16,
    marker: EndTxnMarker,
    offset: i64,
    timestamp: i64,
) -> Option<CompletedTxn> {
    let completed = (e.current_txn_first_offset >= 0).then_some(CompletedTxn {
        producer_id: e.producer_id,
        first_offset: e.current_txn_first_offset,
        last_offset: offset,
        is_aborted: !marker.commit,
    });
    e.update_epoch(epoch);
    e.coordinator_epoch = marker.coordinator_epoch;
    e.current_txn_first_offset = -1;
    e.last_timestamp = timestamp;
    completed
}

fn last_sequence(h: &BatchHeader) -> i32 {
    increment_sequence(h.base_sequence, h.last_offset_delta)
}

/// Producer states being changed by one append; applied with
/// [`ProducerStateManager::commit`] once the bytes are written.
#[derive(Debug, Default)]
pub struct PendingUpdate {
    entries: HashMap<i64, ProducerEntry>,
}

/// The producer states of one partition and its snapshot files.
#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerEntry>,
    /// The state covers every batch below this offset.
    map_end_offset: i64,
    /// Offset of the newest snapshot written or loaded (-1: none).
    last_snapshot_offset: i64,
    /// (first offset, producer id) of every open transaction.
    ongoing: BTreeSet<(i64, i64)>,
    /// Ended transactions whose marker may not be replicated yet: marker
    /// offset -> (first offset, producer id).
    unreplicated: BTreeMap<i64, (i64, i64)>,
}

impl ProducerStateManager {
    /// An empty state for `dir` (nothing read yet: see [`Self::reload`]).
    pub fn new(dir: &Path) -> ProducerStateManager {
        ProducerStateManager {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            map_end_offset: 0,
            last_snapshot_offset: -1,
            ongoing: BTreeSet::new(),
            unreplicated: BTreeMap::new(),
        }
    }

    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }
    pub fn set_map_end_offset(&mut self, offset: i64) {
        self.map_end_offset = offset;
    }
    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }
    pub fn entries(&self) -> impl Iterator<Item = &ProducerEntry> {
        self.producers.values()
    }
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Checks one batch of a client append. `first_offset` is the offset it
    /// will get. Returns the original batch when it is a duplicate (then it
    /// must not be written); otherwise stages the batch in `pending`.
    pub fn check_append(
        &self,
        pending: &mut PendingUpdate,
        h: &BatchHeader,
        first_offset: i64,
        max_timestamp: i64,
    ) -> Result<Option<BatchMetadata>> {
        if h.producer_id < 0 {
            return Ok(None);
        }
        let pid = h.producer_id;
        let entry = pending.entries.entry(pid).or_insert_with(|| {
            self.producers
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| ProducerEntry::empty(pid))
        });
        let epoch = h.producer_epoch;
        if epoch < entry.epoch {
            return Err(LogError::InvalidProducerEpoch(format!(
                "producer {pid} epoch {epoch} is older than the current epoch {}",
                entry.epoch
            )));
        }
        if h.is_control() {
            entry.update_epoch(epoch);
            entry.last_timestamp = max_timestamp;
            return Ok(None);
        }
        let first_seq = h.base_sequence;
        let last_seq = last_sequence(h);
        if let Some(dup) = entry.find_duplicate(epoch, first_seq, last_seq) {
            return Ok(Some(dup));
        }
        if epoch != entry.epoch {
            if first_seq != 0 && entry.epoch != NO_PRODUCER_EPOCH {
                return Err(LogError::OutOfOrderSequence(format!(
                    "producer {pid} starts epoch {epoch} at sequence {first_seq}, not 0"
                )));
            }
        } else {
            let known = self
                .producers
                .get(&pid)
                .is_some_and(|e| e.epoch != NO_PRODUCER_EPOCH)
                || !entry.batches.is_empty();
            if known && !in_sequence(entry.last_seq(), first_seq) {
                return Err(LogError::OutOfOrderSequence(format!(
                    "producer {pid} sequence {first_seq} does not follow {}",
                    entry.last_seq()
                )));
            }
        }
        if entry.current_txn_first_offset >= 0 && !h.is_transactional() {
            return Err(LogError::InvalidTxnState(format!(
                "expected a transactional write from producer {pid} at offset {first_offset}"
            )));
        }
        entry.add_batch(
            epoch,
            BatchMetadata {
                last_seq,
                last_offset: first_offset + h.last_offset_delta as i64,
                offset_delta: h.last_offset_delta,
                max_timestamp,
            },
        );
        if h.is_transactional() && entry.current_txn_first_offset < 0 {
            entry.current_txn_first_offset = first_offset;
        }
        Ok(None)
    }

    /// Checks an end-transaction marker the leader is about to write at
    /// `offset` and stages its effect in `pending`; returns the transaction
    /// it ends (None when the producer has none open).
    pub fn check_end_txn(
        &self,
        pending: &mut PendingUpdate,
        producer_id: i64,
        epoch: i16,
        marker: EndTxnMarker,
        offset: i64,
        timestamp: i64,
    ) -> Result<Option<CompletedTxn>> {
        let pid = producer_id;
        let entry = pending.entries.entry(pid).or_insert_with(|| {
            self.producers
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| ProducerEntry::empty(pid))
        });
        if epoch < entry.epoch {
            return Err(LogError::InvalidProducerEpoch(format!(
                "marker of producer {pid} at epoch {epoch} is older than the current epoch {}",
                entry.epoch
            )));
        }
        if entry.coordinator_epoch > marker.coordinator_epoch {
            return Err(LogError::TransactionCoordinatorFenced(format!(
                "marker of producer {pid} has coordinator epoch {}, the partition has seen {}",
                marker.coordinator_epoch, entry.coordinator_epoch
            )));
        }
        Ok(end_txn(entry, epoch, marker, offset, timestamp))
    }

    /// Applies a checked append that was written; the state then covers
    /// everything below `end_offset`.
    pub fn commit(&mut self, pending: PendingUpdate, end_offset: i64) {
        for (pid, e) in pending.entries {
            if e.epoch != NO_PRODUCER_EPOCH || !e.batches.is_empty() {
                debug_assert_eq!(pid, e.producer_id);
                self.put(e);
            }
        }
        self.map_end_offset = end_offset;
    }

    /// Stores an entry, keeping the index of open transactions in step.
    fn put(&mut self, e: ProducerEntry) {
        if let Some(old) = self.producers.get(&e.producer_id) {
            if old.current_txn_first_offset >= 0 {
                self.ongoing
                    .remove(&(old.current_txn_first_offset, e.producer_id));
            }
        }
        if e.current_txn_first_offset >= 0 {
            self.ongoing
                .insert((e.current_txn_first_offset, e.producer_id));
        }
        self.producers.insert(e.producer_id, e);
    }

    /// Notes a transaction ended (by an appended or replayed marker): it
    /// keeps the last stable offset down until the high watermark passes
    /// its marker.
    pub fn complete_txn(&mut self, txn: &CompletedTxn) {
        self.unreplicated
            .insert(txn.last_offset, (txn.first_offset, txn.producer_id));
    }

    /// The LSO a transaction ended by `txn` leaves behind, as Kafka writes
    /// it in the `.txnindex`: the first offset of the oldest transaction
    /// still open of another producer, else the offset after the marker.
    pub fn last_stable_offset_after(&self, txn: &CompletedTxn) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, pid)| *pid != txn.producer_id)
            .map_or(txn.last_offset + 1, |(first, _)| *first)
    }

    /// First offset of the oldest open transaction.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.iter().next().map(|(first, _)| *first)
    }

    /// min(high watermark, first offset of every open transaction and of
    /// every ended one whose marker is at or above the high watermark).
    pub fn last_stable_offset(&mut self, high_watermark: i64) -> i64 {
        // markers below the high watermark are replicated: forgotten
        self.unreplicated = self.unreplicated.split_off(&high_watermark);
        let mut lso = high_watermark;
        if let Some(first) = self.first_unstable_offset() {
            lso = lso.min(first);
        }
        for (first, _) in self.unreplicated.values() {
            lso = lso.min(*first);
        }
        lso
    }

    /// Applies a batch read back from the log (no validation); `marker` is
    /// what a control batch's record says (None for data batches, and for
    /// a control batch without a readable end-transaction record). Returns
    /// the transaction a marker ended.
    pub fn apply_from_log(
        &mut self,
        h: &BatchHeader,
        marker: Option<EndTxnMarker>,
    ) -> Option<CompletedTxn> {
        if h.producer_id < 0 {
            return None;
        }
        let pid = h.producer_id;
        let mut e = self
            .producers
            .remove(&pid)
            .unwrap_or_else(|| ProducerEntry::empty(pid));
        if e.current_txn_first_offset >= 0 {
            self.ongoing.remove(&(e.current_txn_first_offset, pid));
        }
        let mut completed = None;
        if h.is_control() {
            match marker {
                Some(m) => {
                    completed =
                        end_txn(&mut e, h.producer_epoch, m, h.base_offset, h.max_timestamp);
                }
                None => {
                    e.update_epoch(h.producer_epoch);
                    e.last_timestamp = h.max_timestamp;
                }
            }
        } else {
            e.add_batch(
                h.producer_epoch,
                BatchMetadata {
                    last_seq: last_sequence(h),
                    last_offset: h.last_offset(),
                    offset_delta: h.last_offset_delta,
                    max_timestamp: h.max_timestamp,
                },
            );
            if h.is_transactional() && e.current_txn_first_offset < 0 {
                e.current_txn_first_offset = h.base_offset;
            }
        }
        self.put(e);
        if let Some(t) = &completed {
            self.complete_txn(t);
        }
        self.map_end_offset = h.next_offset();
        completed
    }

    /// Drops producers whose last write is older than `now_ms - max_age_ms`
    /// (Kafka's producer.id.expiration.ms). Returns how many were dropped.
    pub fn remove_expired(&mut self, now_ms: i64, max_age_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.current_txn_first_offset >= 0 || now_ms - e.last_timestamp < max_age_ms
        });
        before - self.producers.len()
    }

    /// Forgets everything and deletes every snapshot (log emptied).
    pub fn reset(&mut self, offset: i64) -> Result<()> {
        for (o, p) in list_snapshots(&self.dir)? {
            let _ = o;
            remove_file(&p)?;
        }
        self.producers.clear();
        self.ongoing.clear();
        self.unreplicated.clear();
        self.map_end_offset = offset;
        self.last_snapshot_offset = -1;
        Ok(())
    }

    /// Deletes snapshots above `log_end_offset`, then loads the newest valid
    /// one (corrupt ones are deleted). The state then covers the offsets
    /// below `map_end_offset()`; the caller replays the log from there (from
    /// `scan_from` when no snapshot was found).
    pub fn reload(&mut self, log_end_offset: i64, scan_from: i64) -> Result<()> {
        self.producers.clear();
        self.ongoing.clear();
        self.unreplicated.clear();
        self.map_end_offset = scan_from;
        self.last_snapshot_offset = -1;
        let mut snaps = list_snapshots(&self.dir)?;
        while let Some((offset, path)) = snaps.pop() {
            if offset > log_end_offset {
                remove_file(&path)?;
                continue;
            }
            match read_snapshot(&path) {
                Ok(entries) => {
                    for e in entries {
                        self.put(e);
                    }
                    self.map_end_offset = offset;
                    self.last_snapshot_offset = offset;
                    return Ok(());
                }
                Err(LogError::Io(e)) => return Err(LogError::Io(e)),
                Err(_) => remove_file(&path)?,
            }
        }
        Ok(())
    }

    /// No producer, no transaction, and no snapshot written or loaded since the
    /// last reload or reset (so none on disk): what a reload finds with no snapshot.
    pub fn is_empty_and_unsaved(&self) -> bool {
        self.producers.is_empty()
            && self.ongoing.is_empty()
            && self.unreplicated.is_empty()
            && self.last_snapshot_offset < 0
    }

    /// Writes `<map_end_offset>.snapshot` unless one exists at that offset,
    /// then keeps only the newest [`SNAPSHOTS_RETAINED`] snapshots.
    pub fn take_snapshot(&mut self) -> Result<()> {
        self.write_snapshot_file(true).map(|_| ())
    }

    /// As `take_snapshot`, but not fsynced: the file written (still open), if
    /// any, for the caller to fsync later (a roll's flush job, as Kafka's
    /// `takeSnapshot(false)` at roll, KAFKA-15046).
    pub fn take_snapshot_unsynced(&mut self) -> Result<Option<fs::File>> {
        self.write_snapshot_file(false)
    }

    fn write_snapshot_file(&mut self, sync: bool) -> Result<Option<fs::File>> {
        let offset = self.map_end_offset;
        if offset == self.last_snapshot_offset {
            return Ok(None);
        }
        let mut entries: Vec<&ProducerEntry> = self.producers.values().collect();
        entries.sort_by_key(|e| e.producer_id);
        let file = write_snapshot(&snapshot_path(&self.dir, offset), &entries, sync)?;
        self.last_snapshot_offset = offset;
        let snaps = list_snapshots(&self.dir)?;
        let excess = snaps.len().saturating_sub(SNAPSHOTS_RETAINED);
        for (_, p) in &snaps[..excess] {
            remove_file(p)?;
        }
        Ok(Some(file))
    }

    /// Deletes snapshots below `offset` (their segments are gone), keeping
    /// the newest one in any case.
    pub fn delete_snapshots_before(&mut self, offset: i64) -> Result<()> {
        let snaps = list_snapshots(&self.dir)?;
        let n = snaps.len();
        for (i, (o, p)) in snaps.iter().enumerate() {
            if *o < offset && i + 1 < n {
                remove_file(p)?;
            }
        }
        Ok(())
    }
}

fn remove_file(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// `<dir>/<20-digit offset>.snapshot`.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(file_name(offset, "snapshot"))
}

/// (offset, path) of every snapshot file in `dir`, oldest first.
pub fn list_snapshots(dir: &Path) -> Result<Vec<(i64, PathBuf)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".snapshot") else {
            continue;
        };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(o) = stem.parse() {
                out.push((o, e.path()));
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Encodes the snapshot bytes (layout in the module doc).
pub fn encode_snapshot(entries: &[&ProducerEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(SNAPSHOT_HEADER_SIZE + entries.len() * SNAPSHOT_ENTRY_SIZE);
    b.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for e in entries {
        let last = e.batches.back();
        b.extend_from_slice(&e.producer_id.to_be_bytes());
        b.extend_from_slice(&e.epoch.to_be_bytes());
        b.extend_from_slice(&last.map_or(-1, |l| l.last_seq).to_be_bytes());
        b.extend_from_slice(&last.map_or(-1, |l| l.last_offset).to_be_bytes());
        b.extend_from_slice(&last.map_or(0, |l| l.offset_delta).to_be_bytes());
        b.extend_from_slice(&e.last_timestamp.to_be_bytes());
        b.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        b.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&b[6..]);
    b[2..6].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Decodes snapshot bytes; any mismatch is [`LogError::Corrupt`].
pub fn decode_snapshot(b: &[u8]) -> Result<Vec<ProducerEntry>> {
    let corrupt = |m: &str| LogError::Corrupt(format!("producer snapshot: {m}"));
    if b.len() < SNAPSHOT_HEADER_SIZE {
        return Err(corrupt("too short"));
    }
    let version = i16::from_be_bytes([b[0], b[1]]);
    if version != SNAPSHOT_VERSION {
        return Err(corrupt(&format!("unknown version {version}")));
    }
    let crc = u32::from_be_bytes(b[2..6].try_into().unwrap());
    if crc != crc32c::crc32c(&b[6..]) {
        return Err(corrupt("crc mismatch"));
    }
    let n = i32::from_be_bytes(b[6..10].try_into().unwrap());
    if n < 0 || b.len() != SNAPSHOT_HEADER_SIZE + n as usize * SNAPSHOT_ENTRY_SIZE {
        return Err(corrupt("bad entry count"));
    }
    let mut out = Vec::with_capacity(n as usize);
    for chunk in b[SNAPSHOT_HEADER_SIZE..].chunks_exact(SNAPSHOT_ENTRY_SIZE) {
        let i64_at = |at: usize| i64::from_be_bytes(chunk[at..at + 8].try_into().unwrap());
        let i32_at = |at: usize| i32::from_be_bytes(chunk[at..at + 4].try_into().unwrap());
        let producer_id = i64_at(0);
        let epoch = i16::from_be_bytes([chunk[8], chunk[9]]);
        let last_seq = i32_at(10);
        let last_offset = i64_at(14);
        let offset_delta = i32_at(22);
        let timestamp = i64_at(26);
        let mut batches = VecDeque::new();
        if last_offset >= 0 {
            batches.push_back(BatchMetadata {
                last_seq,
                last_offset,
                offset_delta,
                max_timestamp: timestamp,
            });
        }
        out.push(ProducerEntry {
            producer_id,
            epoch,
            batches,
            coordinator_epoch: i32_at(34),
            last_timestamp: timestamp,
            current_txn_first_offset: i64_at(38),
        });
    }
    Ok(out)
}

fn read_snapshot(path: &Path) -> Result<Vec<ProducerEntry>> {
    decode_snapshot(&fs::read(path)?)
}

fn write_snapshot(path: &Path, entries: &[&ProducerEntry], sync: bool) -> Result<fs::File> {
    let bytes = encode_snapshot(entries);
    let mut f = fs::File::create(path)?;
    f.write_all(&bytes)?;
    if sync {
        f.sync_all()?;
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Record};
    use proptest::prelude::*;

    fn header(pid: i64, epoch: i16, seq: i32, n: usize) -> BatchHeader {
        let mut b = BatchBuilder::new(0, 1000).producer(pid, epoch, seq);
        for _ in 0..n {
            b.push(Record::new(1000, None, Some(b"v")));
        }
        BatchHeader::parse(&b.build())
    }

    /// Checks and commits one batch at `offset`; Ok(Some(dup)) for duplicates.
    fn append(
        m: &mut ProducerStateManager,
        h: &BatchHeader,
        offset: i64,
    ) -> Result<Option<BatchMetadata>> {
        let mut p = PendingUpdate::default();
        let dup = m.check_append(&mut p, h, offset, 1000)?;
        if dup.is_none() {
            m.commit(p, offset + h.record_count as i64);
        }
        Ok(dup)
    }

    #[test]
    fn sequence_arithmetic_wraps() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        assert_eq!(decrement_sequence(5, 2), 3);
        assert!(in_sequence(i32::MAX, 0));
        assert!(in_sequence(4, 5));
        assert!(!in_sequence(4, 6));
    }

    #[test]
    fn duplicates_gaps_and_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path());
        // unknown producer: any sequence
        assert_eq!(append(&mut m, &header(7, 0, 10, 3), 0).unwrap(), None);
        assert_eq!(append(&mut m, &header(7, 0, 13, 2), 3).unwrap(), None);
        let dup = append(&mut m, &header(7, 0, 10, 3), 5).unwrap().unwrap();
        assert_eq!((dup.first_offset(), dup.last_offset), (0, 2));
        assert!(matches!(
            append(&mut m, &header(7, 0, 16, 1), 5),
            Err(LogError::OutOfOrderSequence(_))
        ));
        assert!(matches!(
            append(&mut m, &header(7, 0, 14, 1), 5),
            Err(LogError::OutOfOrderSequence(_))
        ));
        assert!(matches!(
            append(&mut m, &header(7, -1, 15, 1), 5),
            Err(LogError::InvalidProducerEpoch(_))
        ));
        assert!(matches!(
            append(&mut m, &header(7, 1, 15, 1), 5),
            Err(LogError::OutOfOrderSequence(_))
        ));
        assert_eq!(append(&mut m, &header(7, 1, 0, 1), 5).unwrap(), None);
        assert_eq!(m.entry(7).unwrap().epoch, 1);
        assert_eq!(m.entry(7).unwrap().batches.len(), 1);
        // an old-epoch retry is fenced, not a duplicate
        assert!(matches!(
            append(&mut m, &header(7, 0, 13, 2), 6),
            Err(LogError::InvalidProducerEpoch(_))
        ));
        // non-idempotent batches are never checked
        assert_eq!(append(&mut m, &header(-1, -1, -1, 2), 6).unwrap(), None);
    }

    #[test]
    fn only_five_batches_are_retained_and_duplicates_within_a_request() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path());
        for i in 0..7 {
            append(&mut m, &header(1, 0, i, 1), i as i64).unwrap();
        }
        assert_eq!(m.entry(1).unwrap().batches.len(), BATCHES_RETAINED);
        assert!(append(&mut m, &header(1, 0, 2, 1), 7).unwrap().is_some());
        assert!(append(&mut m, &header(1, 0, 1, 1), 7).is_err());
        let mut p = PendingUpdate::default();
        let h = header(1, 0, 7, 2);
        assert!(m.check_append(&mut p, &h, 7, 1).unwrap().is_none());
        let dup = m.check_append(&mut p, &h, 9, 1).unwrap().unwrap();
        assert_eq!(dup.first_offset(), 7);
        assert!(m.entry(1).unwrap().last_seq() == 6, "not committed yet");
        m.commit(p, 9);
        assert_eq!(m.entry(1).unwrap().last_seq(), 8);
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path());
        append(&mut m, &header(3, 0, i32::MAX - 1, 2), 0).unwrap();
        assert_eq!(m.entry(3).unwrap().last_seq(), i32::MAX);
        assert_eq!(append(&mut m, &header(3, 0, 0, 1), 2).unwrap(), None);
        // a batch straddling the wrap
        append(&mut m, &header(4, 0, i32::MAX, 3), 3).unwrap();
        assert_eq!(m.entry(4).unwrap().last_seq(), 1);
        assert!(append(&mut m, &header(4, 0, i32::MAX, 3), 6)
            .unwrap()
            .is_some());
        assert_eq!(append(&mut m, &header(4, 0, 2, 1), 6).unwrap(), None);
    }

    #[test]
    fn snapshot_round_trip_exact_bytes_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path());
        append(&mut m, &header(9, 2, 0, 4), 100).unwrap();
        append(&mut m, &header(5, 0, 0, 1), 104).unwrap();
        m.take_snapshot().unwrap();
        let path = snapshot_path(dir.path(), 105);
        assert!(path.ends_with("00000000000000000105.snapshot"));
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 10 + 2 * 46);
        assert_eq!(&bytes[0..2], &[0, 1]);
        assert_eq!(&bytes[6..10], &[0, 0, 0, 2]);
        // first entry: producer 5 (sorted)
        assert_eq!(&bytes[10..18], &5i64.to_be_bytes());
        // second entry: producer 9, epoch 2, last seq 3, last offset 103, delta 3
        let e = &bytes[56..];
        assert_eq!(&e[0..8], &9i64.to_be_bytes());
        assert_eq!(&e[8..10], &2i16.to_be_bytes());
        assert_eq!(&e[10..14], &3i32.to_be_bytes());
        assert_eq!(&e[14..22], &103i64.to_be_bytes());
        assert_eq!(&e[22..26], &3i32.to_be_bytes());
        assert_eq!(&e[26..34], &1000i64.to_be_bytes());
        assert_eq!(&e[34..38], &(-1i32).to_be_bytes());
        assert_eq!(&e[38..46], &(-1i64).to_be_bytes());

        let mut m2 = ProducerStateManager::new(dir.path());
        m2.reload(105, 0).unwrap();
        assert_eq!(m2.map_end_offset(), 105);
        let e9 = m2.entry(9).unwrap();
        assert_eq!(
            (e9.epoch, e9.last_seq(), e9.batches[0].first_offset()),
            (2, 3, 100)
        );
        // a retry of the last batch is still a duplicate after reload
        assert!(append(&mut m2, &header(9, 2, 0, 4), 105).unwrap().is_some());

        // corrupt newest -> deleted, older used; above log end -> deleted
        m.set_map_end_offset(200);
        m.take_snapshot().unwrap();
        let p200 = snapshot_path(dir.path(), 200);
        let mut b = fs::read(&p200).unwrap();
        b[12] ^= 1;
        fs::write(&p200, b).unwrap();
        m.set_map_end_offset(300);
        m.take_snapshot().unwrap();
        let mut m3 = ProducerStateManager::new(dir.path());
        m3.reload(250, 0).unwrap();
        assert_eq!(m3.map_end_offset(), 105);
        assert!(!p200.exists());
        assert!(!snapshot_path(dir.path(), 300).exists());
    }

    #[test]
    fn snapshots_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path());
        for o in 1..10 {
            m.set_map_end_offset(o * 10);
            m.take_snapshot().unwrap();
        }
        let offsets: Vec<i64> = list_snapshots(dir.path())
            .unwrap()
            .into_iter()
            .map(|(o, _)| o)
            .collect();
        assert_eq!(offsets, vec![70, 80, 90]);
        m.delete_snapshots_before(1000).unwrap();
        assert_eq!(list_snapshots(dir.path()).unwrap().len(), 1);
    }

    /// A reference model: the whole history of (epoch, first seq, last seq).
    fn model_ok(history: &[(i16, i32, i32)], epoch: i16, first: i32, last: i32) -> &'static str {
        let Some(&(e, _, l)) = history.last() else {
            return "ok";
        };
        let same_epoch: Vec<_> = history.iter().filter(|h| h.0 == epoch).collect();
        if epoch < e {
            return "epoch";
        }
        if epoch == e
            && same_epoch
                .iter()
                .rev()
                .take(BATCHES_RETAINED)
                .any(|h| h.1 == first && h.2 == last)
        {
            return "dup";
        }
        if epoch > e {
            return if first == 0 { "ok" } else { "seq" };
        }
        if in_sequence(l, first) {
            "ok"
        } else {
            "seq"
        }
    }

    proptest! {
        #[test]
        fn matches_model(ops in prop::collection::vec((0i16..3, 0i32..12, 1usize..4), 1..60)) {
            let dir = tempfile::tempdir().unwrap();
            let mut m = ProducerStateManager::new(dir.path());
            let mut history: Vec<(i16, i32, i32)> = Vec::new();
            let mut offset = 0i64;
            for (epoch, seq, n) in ops {
                let h = header(1, epoch, seq, n);
                let last = increment_sequence(seq, n as i32 - 1);
                let expect = model_ok(&history, epoch, seq, last);
                let got = match append(&mut m, &h, offset) {
                    Ok(None) => "ok",
                    Ok(Some(_)) => "dup",
                    Err(LogError::InvalidProducerEpoch(_)) => "epoch",
                    Err(LogError::OutOfOrderSequence(_)) => "seq",
                    Err(e) => panic!("{e}"),
                };
                prop_assert_eq!(got, expect);
                if got == "ok" {
                    history.push((epoch, seq, last));
                    offset += n as i64;
                }
            }
        }
    }
}
