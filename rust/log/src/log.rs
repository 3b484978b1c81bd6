//! The partition log: ordered segments of one `<topic>-<partition>/` dir.
//!
//! State: segments by base offset (the last one is active and the only one
//! written), `log_start_offset` (first readable offset), `log_end_offset`
//! (next offset to assign) and `recovery_point` (everything below it was
//! fsynced; recovery scans from the segment holding it).
//!
//! Invariants: segment base offsets ascend; each segment holds offsets in
//! [its base, next segment's base); `log_start_offset <= log_end_offset`.
//!
//! Mechanism only: Python decides when to flush, roll by time, delete.
//! Append rolls by itself when the active segment would exceed
//! `segment_bytes`, when `segment_ms` passed since its first batch's
//! timestamp, when an index is full, or when a relative offset would
//! overflow an i32 (Kafka's `shouldRoll`).
//!
//! Idempotent producers: every append is checked against the producer
//! state (`producer_state.rs`) before anything is written; duplicates of one
//! of a producer's last 5 batches are skipped and reported with their
//! original offsets. The state is snapshotted on roll and close, and rebuilt
//! on open / truncation from the newest snapshot <= the log end plus a scan
//! of batch headers after it (and of the records of control batches, the
//! transaction markers: see `txn.rs`).
//!
//! Crash behaviour: see `segment.rs` (partial appends) and `recovery.rs`.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, HEADER_SIZE};
use crate::codec::{self, RecordIter, DECOMPRESSED_BYTES_MAX};
use crate::error::{LogError, Result};
use crate::file_cache::{FileCache, Pin};
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{PendingUpdate, ProducerStateManager};
use crate::recovery;
use crate::segment::{PreparedBatch, Segment};
use crate::validate;

/// Per-partition settings (Kafka topic config names in snake case).
#[derive(Debug, Clone)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub index_interval_bytes: u64,
    pub segment_index_bytes: u64,
    pub max_message_bytes: u64,
    pub log_append_time: bool,
    /// message.timestamp.before.max.ms / after.max.ms (CreateTime topics).
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    /// cleanup.policy includes compact (records must have keys).
    pub compact: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 << 20,
            max_message_bytes: 1_048_588,
            log_append_time: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            compact: false,
        }
    }
}

/// Where to start after a restart.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenState {
    pub recovery_point: i64,
    pub clean_shutdown: bool,
    pub log_start_offset: i64,
    pub now_ms: i64,
}

/// What one append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker time stamped on the batches with LogAppendTime, else -1.
    pub log_append_time_ms: i64,
    pub record_count: i64,
    pub batch_count: i64,
    /// Batches not written because they repeat one of their producer's last
    /// batches; their original offsets are reported in base/last offset.
    pub duplicate_count: i64,
}

/// Slices up to this size are read into memory when made rather than
/// holding the segment's descriptor until sent: the broker sends them with
/// one pread and a shared sendmsg anyway (`SMALL_SLICE_BYTES` in
/// `server/connection.py`), and a fetch over thousands of partitions would
/// otherwise hold thousands of descriptors at once.
pub const COPY_SLICE_BYTES: u64 = 16384;

/// Whole batches of one segment file: bytes [position, position + length).
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub position: u64,
    pub length: u64,
    source: SliceSource,
}

#[derive(Debug, Clone)]
enum SliceSource {
    /// The segment file, held open (and counted as a pin of the file
    /// budget, see `file_cache.rs`) until the slice is dropped.
    File { file: Arc<File>, _pin: Pin },
    /// The bytes themselves: small slices, and any slice once the pins run
    /// out.
    Bytes(Arc<[u8]>),
}

impl FileSlice {
    /// The file when the slice refers to it (None when its bytes were read).
    pub fn file(&self) -> Option<&Arc<File>> {
        match &self.source {
            SliceSource::File { file: f, .. } => Some(f),
            SliceSource::Bytes(_) => None,
        }
    }

    /// Copies the slice's bytes.
    pub fn read(&self) -> Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        match &self.source {
            SliceSource::File { file: f, .. } => {
                let mut buf = vec![0u8; self.length as usize];
                f.read_exact_at(&mut buf, self.position)?;
                Ok(buf)
            }
            SliceSource::Bytes(b) => Ok(b.to_vec()),
        }
    }

    /// Sends bytes [sent, length) to a non-blocking socket: sendfile(2) from
    /// the file, send(2) of the bytes. Returns the bytes written.
    pub fn send(&self, sock_fd: std::os::fd::RawFd, sent: u64) -> Result<u64> {
        let sent = sent.min(self.length);
        match &self.source {
            SliceSource::File { file: f, .. } => {
                crate::sendfile::sendfile(sock_fd, f, self.position + sent, self.length - sent)
            }
            SliceSource::Bytes(b) => crate::sendfile::send_bytes(sock_fd, &b[sent as usize..]),
        }
    }
}

/// The fsyncs a roll leaves for later, off the append path: the producer
/// snapshots written at rolls (still open: the handles that wrote them, so a
/// failed writeback is reported) and the directory. Kafka writes the roll's
/// snapshot unsynced too and fsyncs it in its "flush-log" job (KAFKA-15046).
/// Taken with [`Log::take_roll_flush`], run with [`RollFlush::sync`] without
/// the log.
#[derive(Debug)]
pub struct RollFlush {
    files: Vec<File>,
}

impl RollFlush {
    /// fsync of every file the roll left.
    pub fn sync(&self) -> Result<()> {
        for f in &self.files {
            f.sync_all()?;
        }
        Ok(())
    }
}

/// The partition log.
#[derive(Debug)]
pub struct Log {
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) segments: BTreeMap<i64, Segment>,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    recovery_point: i64,
    closed: bool,
    /// (size_bytes, segment_count) frozen at close, once the files are released.
    closed_stats: (u64, usize),
    /// Bytes the open's recovery cut off (see `recovery::Loaded`): 0 after a
    /// clean shutdown or when every batch was whole.
    truncated_at_open: u64,
    pub(crate) producers: ProducerStateManager,
    /// Leader epoch -> start offset (`leader-epoch-checkpoint`); see `replication.rs`.
    pub(crate) epochs: LeaderEpochCache,
    /// The open-file budget the segment files count against.
    pub(crate) files: Arc<FileCache>,
    /// Producer snapshots written at rolls and not yet fsynced (see `RollFlush`).
    unsynced_snapshots: Vec<File>,
}

impl Log {
    /// Opens (creating if needed) the partition directory; see `recovery.rs`.
    /// The segment files count against the process-wide open-file budget.
    pub fn open(dir: &Path, config: LogConfig, state: OpenState) -> Result<Log> {
        Log::open_with_files(dir, config, state, FileCache::global().clone())
    }

    /// [`Log::open`] with the open-file budget given (tests use small ones).
    pub fn open_with_files(
        dir: &Path,
        config: LogConfig,
        state: OpenState,
        files: Arc<FileCache>,
    ) -> Result<Log> {
        let loaded = recovery::load(
            dir,
            config.index_interval_bytes,
            config.segment_index_bytes,
            state.recovery_point,
            state.clean_shutdown,
            state.now_ms,
            &files,
        )?;
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments: loaded.segments,
            log_start_offset: state.log_start_offset.max(0),
            log_end_offset: loaded.log_end_offset,
            recovery_point: 0,
            closed: false,
            closed_stats: (0, 0),
            truncated_at_open: loaded.truncated_bytes,
            producers: ProducerStateManager::new(dir),
            epochs: LeaderEpochCache::new(dir),
            files,
            unsynced_snapshots: Vec::new(),
        };
        if log.segments.is_empty() || log.log_end_offset < log.log_start_offset {
            for s in std::mem::take(&mut log.segments).into_values() {
                s.delete_files()?;
            }
            let start = log.log_start_offset;
            log.add_segment(start, state.now_ms)?;
            log.log_end_offset = start;
        }
        let first_base = *log.segments.keys().next().unwrap();
        log.log_start_offset = log.log_start_offset.max(first_base);
        log.recovery_point = state
            .recovery_point
            .clamp(log.log_start_offset, log.log_end_offset);
        log.rebuild_producer_state()?;
        log.load_leader_epochs()?;
        Ok(log)
    }

    /// Loads the newest producer snapshot <= log end (deleting those above
    /// it) and replays the batch headers after it.
    fn rebuild_producer_state(&mut self) -> Result<()> {
        let first_base = *self.segments.keys().next().expect("a log has a segment");
        self.producers.reload(self.log_end_offset, first_base)?;
        let from = self.producers.map_end_offset().max(first_base);
        let floor = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let bases: Vec<i64> = self.segments.range(floor..).map(|(b, _)| *b).collect();
        for base in bases {
            // the .txnindex entries from `from` on are rebuilt from the markers
            let seg = self.segments.get_mut(&base).expect("listed above");
            seg.txn_index.truncate_to(from)?;
            let Some((mut pos, mut h)) = seg.find_batch(from)? else {
                continue;
            };
            let mut aborted = Vec::new();
            loop {
                let seg = &self.segments[&base];
                let raw = if h.is_control() {
                    Some(seg.read_bytes(pos, h.size())?)
                } else {
                    None
                };
                aborted.extend(self.replay_batch(&h, raw.as_deref()));
                let seg = &self.segments[&base];
                pos += h.size() as u64;
                match seg.header_at(pos)? {
                    Some(next) => h = next,
                    None => break,
                }
            }
            let seg = self.segments.get_mut(&base).expect("listed above");
            for a in aborted {
                seg.txn_index.append(a)?;
            }
        }
        self.producers.set_map_end_offset(self.log_end_offset);
        Ok(())
    }

    /// The producer state (idempotence) of this partition.
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// Drops producers idle for `max_age_ms` (producer.id.expiration.ms).
    pub fn remove_expired_producers(&mut self, now_ms: i64, max_age_ms: i64) -> usize {
        self.producers.remove_expired(now_ms, max_age_ms)
    }

    pub(crate) fn add_segment(&mut self, base_offset: i64, now_ms: i64) -> Result<()> {
        let mut s = Segment::open(
            &self.dir,
            base_offset,
            self.config.index_interval_bytes,
            now_ms,
            &self.files,
        )?;
        s.activate(self.config.segment_index_bytes)?;
        self.segments.insert(base_offset, s);
        Ok(())
    }

    pub(crate) fn active(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log has a segment")
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(LogError::Closed)
        } else {
            Ok(())
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Replaces the settings (a topic config change). Takes effect on the
    /// next append (roll checks, size limit) and the next roll (index size).
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    /// Bytes the open's recovery cut off (a torn tail after an unclean shutdown).
    pub fn truncated_at_open(&self) -> u64 {
        self.truncated_at_open
    }
    pub fn size_bytes(&self) -> u64 {
        if self.closed {
            return self.closed_stats.0;
        }
        self.segments.values().map(Segment::size).sum()
    }
    pub fn segment_count(&self) -> usize {
        if self.closed {
            return self.closed_stats.1;
        }
        self.segments.len()
    }
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.values()
    }

    /// Validates every batch of `records` (header and CRC in `batch.rs`,
    /// records in `validate.rs`), then appends all of them or none.
    pub fn append(&mut self, records: &[u8], leader_epoch: i32, now_ms: i64) -> Result<AppendInfo> {
        self.check_open()?;
        let refs = batch::validate_batches(records, self.config.max_message_bytes as usize)?;
        validate::check_produced(records, &refs, &self.validation_rules(now_ms))?;
        let lat = self.config.log_append_time;
        let mut next = self.log_end_offset;
        let mut record_count = 0i64;
        let mut max_ts = -1i64;
        let mut size = 0u64;
        // (first, last) offsets reported: of the first and the last batch,
        // written or duplicate.
        let mut reported: Option<(i64, i64)> = None;
        let mut duplicate_count = 0i64;
        let mut duplicate_ts = -1i64;
        let mut pending = PendingUpdate::default();
        let mut prepared = Vec::with_capacity(refs.len());
        for r in &refs {
            let batch_ts = if lat { now_ms } else { r.header.max_timestamp };
            if let Some(dup) =
                self.producers
                    .check_append(&mut pending, &r.header, next, batch_ts)?
            {
                duplicate_count += 1;
                duplicate_ts = dup.max_timestamp;
                let first = reported.map_or(dup.first_offset(), |(f, _)| f);
                reported = Some((first, dup.last_offset));
                continue;
            }
            let raw = &records[r.position..r.position + r.header.size()];
            let mut header = [0u8; HEADER_SIZE];
            header.copy_from_slice(&raw[..HEADER_SIZE]);
            batch::set_base_offset(&mut header, next);
            batch::set_partition_leader_epoch(&mut header, leader_epoch);
            if lat {
                batch::set_log_append_time(&mut header, &raw[HEADER_SIZE..], now_ms);
            }
            max_ts = max_ts.max(batch_ts);
            let first = reported.map_or(next, |(f, _)| f);
            next += r.header.last_offset_delta as i64 + 1;
            reported = Some((first, next - 1));
            record_count += r.header.record_count as i64;
            size += raw.len() as u64;
            prepared.push(PreparedBatch {
                header,
                records: &raw[HEADER_SIZE..],
            });
        }
        let (base_offset, last_offset) = reported.expect("at least one batch");
        if let Some(first) = prepared.first() {
            // Kafka assigns the epoch before writing: the cache is never behind the log.
            if self.epochs.assign(leader_epoch, first.parsed().base_offset) {
                self.epochs.flush()?;
            }
            if self.should_roll(size, max_ts, next - 1, now_ms) {
                self.roll_at(now_ms)?;
            }
            self.active().append(&prepared)?;
            self.log_end_offset = next;
            self.producers.commit(pending, next);
        }
        let log_append_time_ms = match (lat, prepared.is_empty()) {
            (false, _) => -1,
            (true, false) => now_ms,
            (true, true) => duplicate_ts,
        };
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_append_time_ms,
            record_count,
            batch_count: prepared.len() as i64,
            duplicate_count,
        })
    }

    /// What `append` checks records against (see `validate.rs`).
    fn validation_rules(&self, now_ms: i64) -> validate::Rules {
        validate::Rules {
            now_ms,
            log_append_time: self.config.log_append_time,
            timestamp_before_max_ms: self.config.timestamp_before_max_ms,
            timestamp_after_max_ms: self.config.timestamp_after_max_ms,
            compact: self.config.compact,
            ..validate::Rules::default()
        }
    }

    /// Kafka's `LogSegment.shouldRoll` for an append of `size` bytes.
    pub(crate) fn should_roll(
        &mut self,
        size: u64,
        max_ts: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> bool {
        let segment_bytes = self.config.segment_bytes;
        let segment_ms = self.config.segment_ms;
        let s = self.active();
        if s.size() == 0 {
            return false;
        }
        let waited = match s.first_batch_timestamp {
            Some(t) if t >= 0 => max_ts - t,
            _ => now_ms - s.created_ms,
        };
        s.size() + size > segment_bytes
            || waited > segment_ms
            || s.is_index_full()
            || last_offset - s.base_offset() > i32::MAX as i64
    }

    /// Starts a new segment at log_end_offset unless the active one is empty.
    pub fn roll(&mut self, now_ms: i64) -> Result<()> {
        self.check_open()?;
        self.roll_at(now_ms)
    }

    pub(crate) fn roll_at(&mut self, now_ms: i64) -> Result<()> {
        if self.active().size() == 0 {
            return Ok(());
        }
        self.active().deactivate()?;
        let leo = self.log_end_offset;
        self.producers.set_map_end_offset(leo);
        // not fsynced here (this is the append path): see `RollFlush`
        if let Some(file) = self.producers.take_snapshot_unsynced()? {
            self.unsynced_snapshots.push(file);
        }
        self.add_segment(leo, now_ms)
    }

    /// A roll left fsyncs to do (see `take_roll_flush`).
    pub fn roll_flush_pending(&self) -> bool {
        !self.unsynced_snapshots.is_empty()
    }

    /// The fsyncs the rolls so far left (None: nothing to do), for
    /// `RollFlush::sync` to run without the log.
    pub fn take_roll_flush(&mut self) -> Result<Option<RollFlush>> {
        if self.unsynced_snapshots.is_empty() {
            return Ok(None);
        }
        let mut files = std::mem::take(&mut self.unsynced_snapshots);
        files.push(File::open(&self.dir)?);
        Ok(Some(RollFlush { files }))
    }

    /// Whole batches from the one holding `offset`; see the .pyi for details.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u64,
        min_one: bool,
        max_offset: Option<i64>,
    ) -> Result<Option<FileSlice>> {
        self.check_open()?;
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start: self.log_start_offset,
                end: self.log_end_offset,
            });
        }
        let upper = max_offset.map_or(self.log_end_offset, |m| m.min(self.log_end_offset));
        if offset >= upper {
            return Ok(None);
        }
        let floor = self.segments.range(..=offset).next_back().map(|(b, _)| *b);
        let start = floor.unwrap_or(i64::MIN);
        for seg in self.segments.range(start..).map(|(_, s)| s) {
            let Some((pos, first)) = seg.find_batch(offset)? else {
                continue;
            };
            let file = seg.file()?;
            let mut length = 0u64;
            let mut h = first;
            let mut at = pos;
            loop {
                if h.last_offset() >= upper {
                    break;
                }
                let size = h.size() as u64;
                if length + size > max_bytes && !(min_one && length == 0) {
                    break;
                }
                length += size;
                at += size;
                match seg.header_in(&file, at)? {
                    Some(next) => h = next,
                    None => break,
                }
            }
            if length == 0 {
                return Ok(None);
            }
            let pin = if length > COPY_SLICE_BYTES {
                self.files.try_pin()
            } else {
                None
            };
            let source = match pin {
                Some(pin) => SliceSource::File { file, _pin: pin },
                None => {
                    use std::os::unix::fs::FileExt;
                    let mut buf = vec![0u8; length as usize];
                    file.read_exact_at(&mut buf, pos)?;
                    SliceSource::Bytes(buf.into())
                }
            };
            return Ok(Some(FileSlice {
                position: pos,
                length,
                source,
            }));
        }
        Ok(None)
    }

    /// (offset, timestamp) of the first record with timestamp >= target.
    pub fn offset_for_timestamp(&self, target: i64) -> Result<Option<(i64, i64)>> {
        self.check_open()?;
        for seg in self.segments.values() {
            if seg.max_timestamp() < target || seg.size() == 0 {
                continue;
            }
            let (_, ts_offset) = seg.time_index.lookup(target);
            let from = ts_offset.max(self.log_start_offset);
            let Some((mut pos, mut h)) = seg.find_batch(from)? else {
                continue;
            };
            loop {
                if h.max_timestamp >= target && h.last_offset() >= self.log_start_offset {
                    let raw = seg.read_bytes(pos, h.size())?;
                    let (h, data) = codec::batch_records(&raw, DECOMPRESSED_BYTES_MAX)?;
                    for r in RecordIter::new(h, &data) {
                        let r = r?;
                        if r.timestamp >= target && r.offset >= self.log_start_offset {
                            return Ok(Some((r.offset, r.timestamp)));
                        }
                    }
                }
                pos += h.size() as u64;
                match seg.header_at(pos)? {
                    Some(next) => h = next,
                    None => break,
                }
            }
        }
        Ok(None)
    }

    /// fsync of every segment from the recovery point on; advances it.
    pub fn flush(&mut self) -> Result<()> {
        self.check_open()?;
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        for s in self.segments.range(from..).map(|(_, s)| s) {
            s.flush()?;
        }
        // the snapshots of rolls whose flush job has not run yet
        for f in std::mem::take(&mut self.unsynced_snapshots) {
            f.sync_all()?;
        }
        // the leader-epoch cache cut or rebuilt at open
        self.epochs.flush_if_deferred()?;
        self.recovery_point = self.log_end_offset;
        Ok(())
    }

    /// Flushes, trims the active segment's indexes and releases the files.
    /// Idempotent.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.active().deactivate()?;
        // the reserved blocks given back (a cleanly closed log holds none past its data)
        crate::reserver::settle();
        self.flush()?;
        for s in self.segments.values() {
            // entries a replay wrote below the recovery point
            s.txn_index().flush()?;
        }
        self.producers.set_map_end_offset(self.log_end_offset);
        // a log holding no batch, with no producer state and no snapshot: the next
        // open rebuilds exactly that without one (nothing to replay), so none is
        // written (nor does Kafka's takeSnapshot write one at offset 0): a write and
        // an fsync per empty log were a third of a clean stop's fsyncs (issue 25)
        let first_base = self.segments.keys().next().copied();
        if !(first_base == Some(self.log_end_offset) && self.producers.is_empty_and_unsaved()) {
            self.producers.take_snapshot()?;
        }
        self.closed_stats = (self.size_bytes(), self.segment_count());
        self.closed = true;
        self.segments.clear();
        Ok(())
    }

    /// Stops using the log of a deleted topic at once, writing nothing: every
    /// later call fails as after `close`, and its segment files leave the
    /// open-file cache. The cache reopens an evicted file by its path, so a
    /// late append, flush or truncation of this log would otherwise land in
    /// whatever log a topic created again under the name keeps at that path.
    /// Idempotent.
    pub fn abandon(&mut self) {
        if self.closed {
            return;
        }
        self.closed_stats = (self.size_bytes(), self.segment_count());
        self.closed = true;
        self.segments.clear();
        self.unsynced_snapshots.clear();
    }

    /// Removes every record at or after `offset` (replica truncation). The
    /// cut is at the start of the batch holding `offset`, so the new log end
    /// offset is that batch's base offset (== `offset` on batch boundaries).
    /// Below the log start the log is emptied and restarts at `offset`.
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<()> {
        self.check_open()?;
        if offset >= self.log_end_offset {
            // No record there, but an epoch assigned at the log end by a
            // leader that wrote nothing goes, so a follower's epoch-based
            // truncation (replication.rs) always makes progress.
            if self.epochs.truncate_from_end(offset) {
                self.epochs.flush()?;
            }
            return Ok(());
        }
        if offset < self.log_start_offset {
            return self.truncate_fully_and_start_at(offset, now_ms);
        }
        let floor = *self
            .segments
            .range(..=offset)
            .next_back()
            .expect("offset >= first base")
            .0;
        let later: Vec<i64> = self.segments.range(floor + 1..).map(|(b, _)| *b).collect();
        for b in later {
            if let Some(s) = self.segments.remove(&b) {
                s.delete_files()?;
            }
        }
        let index_bytes = self.config.segment_index_bytes;
        let seg = self.active();
        let cut = seg.find_batch(offset)?.map_or(seg.size(), |(pos, _)| pos);
        seg.truncate_log(cut)?;
        seg.activate(index_bytes)?;
        recovery::recover_segment(seg)?;
        self.log_end_offset = self.active().next_offset();
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        if self.epochs.truncate_from_end(self.log_end_offset) {
            self.epochs.flush()?;
        }
        self.rebuild_producer_state()
    }

    /// Deletes every segment and restarts the empty log at `offset` (log
    /// start = log end = `offset`, any value >= 0): Kafka's
    /// `truncateFullyAndStartAt`, for a follower whose leader's log starts
    /// past its end. Producer state and leader-epoch cache are cleared.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<()> {
        self.check_open()?;
        for s in std::mem::take(&mut self.segments).into_values() {
            s.delete_files()?;
        }
        self.add_segment(offset, now_ms)?;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        self.producers.reset(offset)?;
        if self.epochs.clear() {
            self.epochs.flush()?;
        }
        Ok(())
    }

    /// Raises the log start offset (DeleteRecords, retention) and deletes the
    /// segments whose offsets all lie below it (never the active one).
    /// Returns how many segments were deleted.
    pub fn advance_log_start_offset(&mut self, offset: i64) -> Result<usize> {
        self.check_open()?;
        if offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start: self.log_start_offset,
                end: self.log_end_offset,
            });
        }
        self.log_start_offset = self.log_start_offset.max(offset);
        if self.epochs.truncate_from_start(self.log_start_offset) {
            self.epochs.flush()?;
        }
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let mut deleted = 0;
        for pair in bases.windows(2) {
            if pair[1] > self.log_start_offset {
                break;
            }
            if let Some(s) = self.segments.remove(&pair[0]) {
                s.delete_files()?;
                deleted += 1;
            }
        }
        if deleted > 0 {
            let first_base = *self.segments.keys().next().expect("a log has a segment");
            self.producers.delete_snapshots_before(first_base)?;
        }
        Ok(deleted)
    }

    /// (base offset, size in bytes, max timestamp) of every segment, oldest
    /// first: what retention decides on.
    pub fn segment_infos(&self) -> Vec<(i64, u64, i64)> {
        self.segments
            .values()
            .map(|s| (s.base_offset(), s.size(), s.max_timestamp()))
            .collect()
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }
}
