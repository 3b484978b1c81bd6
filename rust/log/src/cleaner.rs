//! Log compaction (Kafka's `Cleaner`): keep only the newest record of each
//! key, offsets unchanged. Mechanism only: Python decides when and which
//! partition to clean and keeps the cleaner checkpoint.
//!
//! One clean, in three steps so appends are blocked only for the swap:
//!
//! 1. [`Log::plan_clean`] (log locked): the dirty range is
//!    `[first_dirty, end)` where `end` is the base offset of the active
//!    segment, or of the first segment holding a record newer than
//!    `now - min_compaction_lag_ms` (by its max timestamp), whichever is
//!    lower. The plan holds open handles of the segments below `end`
//!    (immutable: only the active segment is written).
//! 2. [`run`] (no lock, throttled): build the offset map `hash(key) ->
//!    latest offset` over the dirty range, then rewrite the segments below
//!    `end` in groups (consecutive segments whose total size fits in
//!    `segment_bytes`, whose indexes fit in `segment_index_bytes` and whose
//!    offsets fit an i32 above the group base) into `<group base>.log.cleaned`.
//! 3. [`Log::commit_clean`] (log locked): for each group whose input segments
//!    are unchanged, `X.log.cleaned` -> `X.log.swap` (dir fsynced), the inputs
//!    deleted (`.deleted` renames), `X.log.swap` -> `X.log`, indexes rebuilt.
//!
//! What is kept of a batch: the last batch of each producer with state
//! whole (Kafka keeps it so sequence checks survive); a batch of an aborted
//! transaction (known from the `.txnindex` files) is dropped whole and its
//! keys never enter the offset map; otherwise a record is kept when it has a
//! key, no newer offset of the key is in the map, and, for a tombstone (null
//! value), the batch's max timestamp is within `delete_retention_ms` of now
//! (the delete horizon is taken from the batch timestamp, not from attribute
//! bit 6 nor from segment mtimes).
//!
//! Transaction markers (Kafka's `CleanedTransactionMetadata`): a control
//! batch is kept whole unless it may go: an ABORT marker when this pass
//! saw no batch of its transaction, a COMMIT marker likewise, and in both
//! cases only once its timestamp is older than `delete_retention_ms`. An
//! ABORT marker kept because its transaction still had data keeps its
//! `.txnindex` entry in the cleaned segment (the data goes now; the marker
//! at a later clean). The dirty range never reaches the first unstable
//! offset: a transaction still open is not cleaned.
//!
//! Simplification: Kafka empties a producer's last batch (keeps its header,
//! RETAIN_EMPTY) when its records may go; pybroker keeps that batch whole,
//! so an aborted batch that is its producer's last stays, with its ABORT
//! marker and `.txnindex` entry (read_committed readers still skip it),
//! until the producer writes again or its state expires. A batch losing some records is rewritten with the same base
//! offset, lastOffsetDelta, base timestamp and producer fields, the kept
//! record bytes, the max timestamp of its kept records (CreateTime), and
//! its records recompressed with its own codec; a batch losing all records
//! is dropped. Offsets never change; gaps appear.
//!
//! Memory bound: the offset map holds at most `offset_map_bytes /
//! OFFSET_MAP_ENTRY_BYTES` keys (16-byte hash + 8-byte offset + table
//! overhead), except that the first dirty segment is always indexed whole.
//! When the map fills in a later segment, the dirty range stops at that
//! segment's base (the next clean continues there). One batch is decoded at
//! a time (bounded by `DECOMPRESSED_BYTES_MAX`).
//!
//! Crash behaviour: before the `.swap` rename a crash leaves `.cleaned`
//! files that recovery deletes (inputs untouched). After it, recovery renames
//! `X.log.swap` over `X.log` and deletes the live segments whose base lies
//! inside the swapped segment's offsets, so nothing is lost or doubled;
//! an input segment all of whose records were superseded may survive such
//! a crash (stale records come back, offsets stay unique) until the next
//! clean. Only one clean may run on a log at a time.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::batch::{self, BatchHeader, HEADER_SIZE};
use crate::codec::{self, RecordIter, DECOMPRESSED_BYTES_MAX};
use crate::error::{LogError, Result};
use crate::log::Log;
use crate::producer_state::EndTxnMarker;
use crate::recovery;
use crate::segment::{file_name, Segment};
use crate::txn::read_marker;
use crate::txn_index::AbortedTxn;

/// Bytes of offset-map memory counted per key.
pub const OFFSET_MAP_ENTRY_BYTES: u64 = 32;

/// Settings of one clean (Kafka topic / broker config names in snake case).
#[derive(Debug, Clone)]
pub struct CleanConfig {
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    /// log.cleaner.io.max.bytes.per.second; <= 0 means unthrottled.
    pub max_bytes_per_second: f64,
    /// log.cleaner.dedupe.buffer.size share of this clean.
    pub offset_map_bytes: u64,
}

impl Default for CleanConfig {
    fn default() -> Self {
        CleanConfig {
            now_ms: 0,
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_bytes_per_second: 0.0,
            offset_map_bytes: 128 << 20,
        }
    }
}

/// What one clean did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_removed: u64,
    /// Input segments replaced by cleaned ones.
    pub segments_cleaned: u64,
    /// The new cleaner checkpoint: where the next clean's dirty range starts.
    pub first_dirty_offset: i64,
}

#[derive(Debug)]
struct Source {
    base: i64,
    /// Base of the next segment (bounds the offsets of this one).
    next_base: i64,
    size: u64,
    file: Arc<File>,
}

/// Inputs of [`run`], taken under the log lock by [`Log::plan_clean`].
#[derive(Debug)]
pub struct CleanPlan {
    dir: PathBuf,
    sources: Vec<Source>,
    first_dirty: i64,
    end: i64,
    segment_bytes: u64,
    segment_index_bytes: u64,
    index_interval_bytes: u64,
    /// Producer id -> last offset of its last batch.
    producer_last: HashMap<i64, i64>,
    /// Every aborted transaction of the `.txnindex` files, by first offset.
    aborted: Vec<AbortedTxn>,
    config: CleanConfig,
}

/// Which transactions the batches read so far belong to (Kafka's
/// `CleanedTransactionMetadata`), fed batches in offset order.
struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// Aborted transactions reached and not ended: producer -> (txn, a
    /// batch of it was seen).
    aborted: HashMap<i64, (AbortedTxn, bool)>,
    /// Producers with a transactional batch seen whose marker is not read yet.
    committed: HashSet<i64>,
}

impl TxnTracker {
    /// For a pass over batches from offset `start` on.
    fn new(aborted: &[AbortedTxn], start: i64) -> TxnTracker {
        TxnTracker {
            pending: aborted
                .iter()
                .filter(|a| a.last_offset >= start)
                .copied()
                .collect(),
            aborted: HashMap::new(),
            committed: HashSet::new(),
        }
    }

    fn reach(&mut self, offset: i64) {
        while self
            .pending
            .front()
            .is_some_and(|a| a.first_offset <= offset)
        {
            let a = self.pending.pop_front().expect("checked");
            self.aborted.insert(a.producer_id, (a, false));
        }
    }

    /// A data batch: true when it belongs to an aborted transaction.
    fn on_data(&mut self, h: &BatchHeader) -> bool {
        self.reach(h.last_offset());
        if !h.is_transactional() {
            return false;
        }
        if let Some((_, seen)) = self.aborted.get_mut(&h.producer_id) {
            *seen = true;
            return true;
        }
        self.committed.insert(h.producer_id);
        false
    }

    /// A control batch: (whether it may be dropped, the `.txnindex` entry it
    /// keeps when it is an ABORT marker whose transaction still had data).
    fn on_control(
        &mut self,
        h: &BatchHeader,
        marker: Option<EndTxnMarker>,
    ) -> (bool, Option<AbortedTxn>) {
        self.reach(h.last_offset());
        match marker {
            Some(m) if !m.commit => match self.aborted.remove(&h.producer_id) {
                Some((a, true)) => (false, Some(a)),
                _ => (true, None),
            },
            Some(_) => (!self.committed.remove(&h.producer_id), None),
            None => (false, None),
        }
    }
}

#[derive(Debug)]
struct Group {
    base: i64,
    /// (base offset, size) of the input segments.
    inputs: Vec<(i64, u64)>,
    cleaned: PathBuf,
    /// The cleaned segment's `.txnindex` (always written, maybe empty).
    cleaned_txn: PathBuf,
}

/// Output of [`run`], applied by [`Log::commit_clean`].
#[derive(Debug)]
pub struct CleanOutput {
    groups: Vec<Group>,
    stats: CleanStats,
    first_dirty: i64,
    now_ms: i64,
}

/// `hash(key) -> offset`, bounded.
#[derive(Debug)]
pub struct OffsetMap {
    map: HashMap<u128, i64>,
    max_entries: usize,
}

fn key_hash(key: &[u8]) -> u128 {
    let half = |seed: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut h);
        key.hash(&mut h);
        h.finish() as u128
    };
    (half(0) << 64) | half(1)
}

impl OffsetMap {
    pub fn new(max_entries: usize) -> OffsetMap {
        OffsetMap {
            map: HashMap::new(),
            max_entries: max_entries.max(1),
        }
    }
    /// Records `offset` for `key`; false (nothing stored) when the key is
    /// new and the map is full, unless `force`.
    pub fn put(&mut self, key: &[u8], offset: i64, force: bool) -> bool {
        let h = key_hash(key);
        if let Some(o) = self.map.get_mut(&h) {
            *o = (*o).max(offset);
            return true;
        }
        if self.map.len() >= self.max_entries && !force {
            return false;
        }
        self.map.insert(h, offset);
        true
    }
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.map.get(&key_hash(key)).copied()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// One record inside a (decompressed) records section.
struct RawRecord<'a> {
    bytes: &'a [u8],
    offset: i64,
    timestamp: i64,
    key: Option<&'a [u8]>,
    null_value: bool,
}

fn raw_records<'a>(h: &BatchHeader, data: &'a [u8]) -> Result<Vec<RawRecord<'a>>> {
    RecordIter::new(*h, data)
        .map(|r| {
            r.map(|r| RawRecord {
                bytes: r.raw,
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key,
                null_value: r.value.is_none(),
            })
        })
        .collect()
}

/// Sleeps so that `bytes` over the elapsed time stays under the rate.
struct Throttler {
    rate: f64,
    start: Instant,
    bytes: u64,
}

impl Throttler {
    fn add(&mut self, bytes: u64) {
        self.bytes += bytes;
        if self.rate > 0.0 {
            let due = Duration::from_secs_f64(self.bytes as f64 / self.rate);
            if let Some(wait) = due.checked_sub(self.start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
}

/// Calls `f` with the header and bytes of every batch of `src` whose last
/// offset is >= `from`.
fn for_each_batch(
    src: &Source,
    from: i64,
    mut f: impl FnMut(&BatchHeader, &[u8]) -> Result<bool>,
) -> Result<()> {
    let mut pos = 0u64;
    let mut head = [0u8; HEADER_SIZE];
    while pos + HEADER_SIZE as u64 <= src.size {
        src.file.read_exact_at(&mut head, pos)?;
        let len = batch::be_i32(&head, batch::LENGTH_AT);
        if len < batch::MIN_BATCH_LENGTH || pos + len as u64 + batch::LOG_OVERHEAD as u64 > src.size
        {
            return Err(LogError::Corrupt(format!("bad batch framing at {pos}")));
        }
        let h = BatchHeader::parse(&head);
        if h.last_offset() >= from {
            let mut buf = vec![0u8; h.size()];
            src.file.read_exact_at(&mut buf, pos)?;
            if !f(&h, &buf)? {
                return Ok(());
            }
        }
        pos += h.size() as u64;
    }
    Ok(())
}

/// Builds the offset map over `[first_dirty, end)`; returns the (possibly
/// lowered) end.
fn build_map(plan: &CleanPlan, map: &mut OffsetMap, t: &mut Throttler) -> Result<i64> {
    let mut first_segment = true;
    let mut txns = TxnTracker::new(&plan.aborted, plan.first_dirty);
    for src in plan
        .sources
        .iter()
        .filter(|s| s.next_base > plan.first_dirty)
    {
        let mut full = false;
        for_each_batch(src, plan.first_dirty, |h, raw| {
            t.add(raw.len() as u64);
            if h.is_control() {
                txns.on_control(h, read_marker(raw));
                return Ok(true);
            }
            if txns.on_data(h) {
                return Ok(true); // aborted: its keys shadow nothing
            }
            let (_, data) = codec::batch_records(raw, DECOMPRESSED_BYTES_MAX)?;
            for r in raw_records(h, &data)? {
                if r.offset < plan.first_dirty {
                    continue;
                }
                if let Some(k) = r.key {
                    if !map.put(k, r.offset, first_segment) {
                        full = true;
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        })?;
        if full {
            return Ok(src.base);
        }
        first_segment = false;
    }
    Ok(plan.end)
}

/// Groups the sources below `end` (Kafka's groupSegmentsBySize).
fn group_sources(plan: &CleanPlan, end: i64) -> Vec<Vec<&Source>> {
    let index_bytes = |s: &Source| (s.size / plan.index_interval_bytes.max(1) + 1) * 12;
    let mut groups: Vec<Vec<&Source>> = Vec::new();
    for s in plan.sources.iter().filter(|s| s.base < end) {
        if let Some(g) = groups.last_mut() {
            let size: u64 = g.iter().map(|x| x.size).sum::<u64>() + s.size;
            let idx: u64 = g.iter().map(|x| index_bytes(x)).sum::<u64>() + index_bytes(s);
            let span = s.next_base - 1 - g[0].base;
            if size <= plan.segment_bytes
                && idx <= plan.segment_index_bytes
                && span <= i32::MAX as i64
            {
                g.push(s);
                continue;
            }
        }
        groups.push(vec![s]);
    }
    groups
}

/// Decides which records of one batch stay; returns the bytes to write
/// (None: drop the batch) and how many records were removed.
fn clean_batch(
    plan: &CleanPlan,
    map: &OffsetMap,
    h: &BatchHeader,
    raw: &[u8],
    aborted: bool,
) -> Result<(Option<Vec<u8>>, u64)> {
    if h.is_control()
        || (h.producer_id >= 0 && plan.producer_last.get(&h.producer_id) == Some(&h.last_offset()))
    {
        return Ok((Some(raw.to_vec()), 0));
    }
    if aborted {
        return Ok((None, h.record_count.max(0) as u64));
    }
    let (_, data) = codec::batch_records(raw, DECOMPRESSED_BYTES_MAX)?;
    let records = raw_records(h, &data)?;
    let horizon = plan.config.now_ms - plan.config.delete_retention_ms;
    let keep: Vec<&RawRecord<'_>> = records
        .iter()
        .filter(|r| {
            let Some(k) = r.key else { return false };
            if map.get(k).is_some_and(|latest| r.offset < latest) {
                return false;
            }
            !r.null_value || h.max_timestamp >= horizon
        })
        .collect();
    let removed = (records.len() - keep.len()) as u64;
    if keep.len() == records.len() {
        return Ok((Some(raw.to_vec()), 0));
    }
    if keep.is_empty() {
        return Ok((None, removed));
    }
    let mut section = Vec::with_capacity(data.len());
    for r in &keep {
        section.extend_from_slice(r.bytes);
    }
    let body = codec::compress(h.codec(), &section)?;
    let mut out = Vec::with_capacity(HEADER_SIZE + body.len());
    out.extend_from_slice(&raw[..HEADER_SIZE]);
    out.extend_from_slice(&body);
    let length = (HEADER_SIZE - batch::LOG_OVERHEAD + body.len()) as i32;
    out[batch::LENGTH_AT..batch::LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    out[batch::RECORD_COUNT_AT..batch::RECORD_COUNT_AT + 4]
        .copy_from_slice(&(keep.len() as i32).to_be_bytes());
    if !h.is_log_append_time() {
        let max_ts = keep
            .iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(h.max_timestamp);
        out[batch::MAX_TIMESTAMP_AT..batch::MAX_TIMESTAMP_AT + 8]
            .copy_from_slice(&max_ts.to_be_bytes());
    }
    let crc = batch::compute_crc(&out);
    out[batch::CRC_AT..batch::CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok((Some(out), removed))
}

fn cleaned_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{}.cleaned", file_name(base, "log")))
}

fn cleaned_txn_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{}.cleaned", file_name(base, "txnindex")))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// Step 2: builds the offset map and writes the `.cleaned` files. On error
/// the `.cleaned` files written so far are removed.
pub fn run(plan: CleanPlan) -> Result<CleanOutput> {
    let mut groups = Vec::new();
    let r = run_inner(&plan, &mut groups);
    if r.is_err() {
        for g in &groups {
            let _ = std::fs::remove_file(&g.cleaned);
            let _ = std::fs::remove_file(&g.cleaned_txn);
        }
    }
    let stats = r?;
    Ok(CleanOutput {
        groups,
        stats,
        first_dirty: plan.first_dirty,
        now_ms: plan.config.now_ms,
    })
}

fn run_inner(plan: &CleanPlan, groups: &mut Vec<Group>) -> Result<CleanStats> {
    let mut t = Throttler {
        rate: plan.config.max_bytes_per_second,
        start: Instant::now(),
        bytes: 0,
    };
    let max_entries = (plan.config.offset_map_bytes / OFFSET_MAP_ENTRY_BYTES) as usize;
    let mut map = OffsetMap::new(max_entries);
    let end = build_map(plan, &mut map, &mut t)?;
    let mut stats = CleanStats {
        first_dirty_offset: plan.first_dirty,
        ..CleanStats::default()
    };
    if end <= plan.first_dirty {
        stats.bytes_read = t.bytes;
        return Ok(stats);
    }
    let horizon = plan.config.now_ms - plan.config.delete_retention_ms;
    let start = plan.sources.first().map_or(i64::MIN, |s| s.base);
    let mut txns = TxnTracker::new(&plan.aborted, start);
    for group in group_sources(plan, end) {
        let base = group[0].base;
        let path = cleaned_path(&plan.dir, base);
        let txn_path = cleaned_txn_path(&plan.dir, base);
        let mut out = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        groups.push(Group {
            base,
            inputs: group.iter().map(|s| (s.base, s.size)).collect(),
            cleaned: path,
            cleaned_txn: txn_path.clone(),
        });
        let mut kept_aborts: Vec<AbortedTxn> = Vec::new();
        for src in &group {
            for_each_batch(src, i64::MIN, |h, raw| {
                let aborted = if h.is_control() {
                    let (droppable, keep) = txns.on_control(h, read_marker(raw));
                    kept_aborts.extend(keep);
                    if droppable && h.max_timestamp < horizon {
                        t.add(raw.len() as u64);
                        return Ok(true); // the marker goes
                    }
                    false
                } else {
                    txns.on_data(h)
                };
                let (bytes, removed) = clean_batch(plan, &map, h, raw, aborted)?;
                stats.records_removed += removed;
                if let Some(b) = bytes {
                    out.write_all(&b)?;
                    stats.bytes_written += b.len() as u64;
                    t.add(b.len() as u64);
                }
                t.add(raw.len() as u64);
                Ok(true)
            })?;
        }
        out.sync_all()?;
        let index: Vec<u8> = kept_aborts.iter().flat_map(|a| a.encode()).collect();
        let mut f = File::create(&txn_path)?;
        f.write_all(&index)?;
        f.sync_all()?;
    }
    stats.bytes_read = t.bytes - stats.bytes_written;
    stats.first_dirty_offset = end;
    Ok(stats)
}

impl Log {
    /// Plans, runs and commits one clean with `&mut self` held throughout
    /// (tests, tools); the binding runs the steps with the lock released
    /// during [`run`].
    pub fn clean(&mut self, first_dirty_offset: i64, config: CleanConfig) -> Result<CleanStats> {
        match self.plan_clean(first_dirty_offset, config)? {
            None => Ok(CleanStats {
                first_dirty_offset: first_dirty_offset.max(self.log_start_offset),
                ..CleanStats::default()
            }),
            Some(plan) => {
                let out = run(plan)?;
                self.commit_clean(out)
            }
        }
    }

    /// Step 1: the dirty range and the segments below its end. None when
    /// there is nothing to clean (checkpoint at or past the cleanable end).
    pub fn plan_clean(
        &self,
        first_dirty_offset: i64,
        config: CleanConfig,
    ) -> Result<Option<CleanPlan>> {
        self.check_open()?;
        let first_dirty = first_dirty_offset.max(self.log_start_offset);
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let active_base = *bases.last().expect("a log has a segment");
        let lag_limit = config.now_ms - config.min_compaction_lag_ms;
        let mut end = active_base;
        let mut sources = Vec::new();
        for (i, seg) in self.segments.values().enumerate() {
            if seg.base_offset() >= active_base {
                break;
            }
            let next_base = bases[i + 1];
            if next_base > first_dirty
                && config.min_compaction_lag_ms > 0
                && seg.max_timestamp() > lag_limit
            {
                end = seg.base_offset();
                break;
            }
            sources.push(Source {
                base: seg.base_offset(),
                next_base,
                size: seg.size(),
                file: seg.file()?,
            });
        }
        if let Some(fuo) = self.first_unstable_offset() {
            // an open transaction's data is not cleaned (Kafka: the LSO bounds it)
            if let Some((b, _)) = self.segments.range(..=fuo).next_back() {
                end = end.min(*b);
            }
            sources.retain(|s| s.base < end);
        }
        if end <= first_dirty {
            return Ok(None);
        }
        let mut aborted: Vec<AbortedTxn> = self
            .segments
            .values()
            .flat_map(|s| s.txn_index().entries().iter().copied())
            .collect();
        aborted.sort_by_key(|a| (a.first_offset, a.last_offset));
        let producer_last = self
            .producers
            .entries()
            .filter_map(|e| e.batches.back().map(|b| (e.producer_id, b.last_offset)))
            .collect();
        Ok(Some(CleanPlan {
            dir: self.dir.clone(),
            sources,
            first_dirty,
            end,
            segment_bytes: self.config.segment_bytes,
            segment_index_bytes: self.config.segment_index_bytes,
            index_interval_bytes: self.config.index_interval_bytes,
            producer_last,
            aborted,
            config,
        }))
    }

    /// Step 3: swaps in every group whose inputs are unchanged (others are
    /// discarded) and returns the stats. A group not swapped keeps the
    /// checkpoint where it was.
    pub fn commit_clean(&mut self, out: CleanOutput) -> Result<CleanStats> {
        let mut stats = out.stats;
        let mut result = Ok(());
        for g in &out.groups {
            let unchanged = !self.closed_for_clean()
                && g.inputs.iter().all(|(b, size)| {
                    self.segments.get(b).is_some_and(|s| s.size() == *size)
                        && self.segments.keys().next_back() != Some(b)
                });
            if !unchanged || result.is_err() {
                let _ = std::fs::remove_file(&g.cleaned);
                let _ = std::fs::remove_file(&g.cleaned_txn);
                stats.first_dirty_offset = out.first_dirty;
                continue;
            }
            result = self.swap_group(g, out.now_ms);
            if result.is_ok() {
                stats.segments_cleaned += g.inputs.len() as u64;
            }
        }
        result.map(|()| stats)
    }

    fn closed_for_clean(&self) -> bool {
        self.check_open().is_err()
    }

    fn swap_group(&mut self, g: &Group, now_ms: i64) -> Result<()> {
        // `.txnindex.swap` first, live before the log: see recovery.rs
        let txn_swap = self
            .dir
            .join(format!("{}.swap", file_name(g.base, "txnindex")));
        std::fs::rename(&g.cleaned_txn, &txn_swap)?;
        let swap = self.dir.join(format!("{}.swap", file_name(g.base, "log")));
        std::fs::rename(&g.cleaned, &swap)?;
        sync_dir(&self.dir)?;
        for (b, _) in &g.inputs {
            if let Some(s) = self.segments.remove(b) {
                s.delete_files()?;
            }
        }
        std::fs::rename(&txn_swap, self.dir.join(file_name(g.base, "txnindex")))?;
        std::fs::rename(&swap, self.dir.join(file_name(g.base, "log")))?;
        sync_dir(&self.dir)?;
        let mut seg = Segment::open(
            &self.dir,
            g.base,
            self.config.index_interval_bytes,
            now_ms,
            &self.files,
        )?;
        seg.activate(self.config.segment_index_bytes)?;
        recovery::recover_segment(&mut seg)?;
        seg.deactivate()?;
        seg.flush()?;
        self.segments.insert(g.base, seg);
        Ok(())
    }
}
