//! One log segment: `<base offset, 20 digits>.log` + `.index` + `.timeindex`
//! (+ `.txnindex` once a transaction aborted in it, see `txn_index.rs`).
//!
//! The `.log` file is a plain concatenation of v2 record batches exactly as
//! produced, except for baseOffset and partitionLeaderEpoch (and, with
//! LogAppendTime, attributes bit 3 + maxTimestamp + CRC) which the broker
//! sets. There is no file header. Every batch's offsets are >= the segment
//! base offset and its last offset - base offset fits in an i32.
//!
//! Append writes all batches of one request with one `pwritev` at the
//! segment's size (looping on short writes): per batch one iovec for the
//! 61-byte header (a copy, patched) and one for the producer's record bytes
//! (not copied). Index entries follow Kafka's `LogSegment.append` (see
//! `offset_index.rs` / `time_index.rs`) and are written only after the log
//! bytes were written.
//!
//! Crash behaviour: a crash mid-append may leave a partial batch at the end
//! of the `.log` and index entries that are not on disk; recovery
//! (`recovery.rs`) validates batches, truncates at the first bad byte and
//! rebuilds both indexes. A failed write is rolled back by truncating the
//! `.log` to its previous size.
//!
//! Descriptors: the `.log` file is a [`CachedFile`] (`file_cache.rs`): it is
//! open while used and may be closed by the broker-wide open-file budget
//! between uses, so every operation asks for a handle (reopening it when
//! needed) and no file cursor is relied on (writes are positional). The index
//! files keep no descriptor (`index_file.rs`).

use std::fs::File;
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::batch::{self, BatchHeader, HEADER_SIZE};
use crate::error::{LogError, Result};
use crate::file_cache::{CachedFile, FileCache};
use crate::offset_index::OffsetIndex;
use crate::reserver::{self, Ticket};
use crate::time_index::TimeIndex;
use crate::txn_index::TxnIndex;

/// `<base offset zero-padded to 20 digits>.<ext>`.
pub fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

/// One batch ready to be written: its patched header and its record bytes.
#[derive(Debug)]
pub struct PreparedBatch<'a> {
    pub header: [u8; HEADER_SIZE],
    pub records: &'a [u8],
}

impl PreparedBatch<'_> {
    pub fn parsed(&self) -> BatchHeader {
        BatchHeader::parse(&self.header)
    }
}

/// A segment of the partition log.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    log: CachedFile,
    size: u64,
    pub(crate) offset_index: OffsetIndex,
    pub(crate) time_index: TimeIndex,
    pub(crate) txn_index: TxnIndex,
    /// Offset after the last batch (the base offset when empty). Exact for
    /// the active segment; for older ones only once scanned.
    pub(crate) next_offset: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) offset_of_max_timestamp: i64,
    /// maxTimestamp of the first batch (Kafka's rollingBasedTimestamp).
    pub(crate) first_batch_timestamp: Option<i64>,
    pub(crate) bytes_since_last_index_entry: u64,
    pub(crate) created_ms: i64,
    index_interval_bytes: u64,
    /// End of the blocks reserved (or queued to be, see `preallocate_ahead`) past the
    /// data for the appends to come; 0: none reserved by this handle of the segment.
    preallocated: u64,
    /// Whether this segment holds one chunk of `RESERVATIONS` (given back at
    /// release, truncation or drop).
    holds_reservation: bool,
    /// This segment's queued reservations, while it may still make them.
    ticket: Option<Arc<Ticket>>,
    /// The cut queued at its last deactivation (spent by a truncation).
    pending_cut: Option<Arc<Ticket>>,
}

/// The active segment's blocks are reserved this far ahead of its appends (between
/// half of it and all of it: the next reservation is asked for when the appends
/// pass half of the last, so the worker has a head start).
const PREALLOCATE_CHUNK: u64 = 16 << 20;
/// ... once it holds this much: a partition written only now and then reserves nothing.
const PREALLOCATE_AFTER: u64 = 1 << 20;
/// Disk reserved ahead by every segment of the process together: 32 chunks. A broker
/// with thousands of busy partitions would otherwise hold 16 MiB of free space for
/// each (10,000 partitions: 160 GB that `df` shows as used and a full disk would miss);
/// the stalls this avoids come from a few partitions taking a bulk load at once.
const RESERVE_BUDGET: u64 = 32 * PREALLOCATE_CHUNK;

/// Chunks of reservation handed out to segments, against a budget.
pub(crate) struct Reservations {
    taken: AtomicU64,
    budget: u64,
}

impl Reservations {
    pub(crate) const fn new(budget: u64) -> Reservations {
        Reservations {
            taken: AtomicU64::new(0),
            budget,
        }
    }

    /// Takes one chunk; false when the budget is spent.
    pub(crate) fn take(&self) -> bool {
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken + PREALLOCATE_CHUNK <= self.budget).then_some(taken + PREALLOCATE_CHUNK)
            })
            .is_ok()
    }

    pub(crate) fn give_back(&self) {
        self.taken.fetch_sub(PREALLOCATE_CHUNK, Ordering::AcqRel);
    }
}

static RESERVATIONS: Reservations = Reservations::new(RESERVE_BUDGET);

/// A segment's chunk comes back once its cut is made (by the reserver's worker).
pub(crate) fn give_back_chunk() {
    RESERVATIONS.give_back();
}

impl Segment {
    /// Opens (creating missing files) the segment at `base_offset` in `dir`.
    /// Sizes and indexes are loaded; offsets and timestamps of the content
    /// are set by the caller's scan (`recover` or `load_tail`).
    pub fn open(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        now_ms: i64,
        files: &Arc<FileCache>,
    ) -> Result<Segment> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = CachedFile::open(files, &log_path)?;
        let size = log.handle()?.metadata()?.len();
        let offset_index =
            OffsetIndex::open(&dir.join(file_name(base_offset, "index")), base_offset)?;
        let time_index =
            TimeIndex::open(&dir.join(file_name(base_offset, "timeindex")), base_offset)?;
        let txn_index = TxnIndex::open(&dir.join(file_name(base_offset, "txnindex")), files)?;
        let (max_timestamp, offset_of_max_timestamp) =
            time_index.last_entry().unwrap_or((-1, base_offset));
        Ok(Segment {
            base_offset,
            log_path,
            log,
            size,
            offset_index,
            time_index,
            txn_index,
            next_offset: base_offset,
            max_timestamp,
            offset_of_max_timestamp,
            first_batch_timestamp: None,
            bytes_since_last_index_entry: 0,
            created_ms: now_ms,
            index_interval_bytes,
            preallocated: 0,
            holds_reservation: false,
            ticket: None,
            pending_cut: None,
        })
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    /// A handle to the `.log` file (reopened if the budget closed it); it
    /// stays valid while held, whatever the budget does meanwhile.
    pub fn file(&self) -> Result<Arc<File>> {
        self.log.handle()
    }
    /// Whether the `.log` file's descriptor is open now.
    pub fn is_file_open(&self) -> bool {
        self.log.is_open()
    }
    /// Maps the indexes opened empty, before entries are added: fails
    /// (EMFILE, ENOMEM) before anything is written.
    pub(crate) fn prepare_indexes(&mut self) -> Result<()> {
        self.offset_index.ensure_mapped()?;
        self.time_index.ensure_mapped()
    }
    pub fn is_index_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    /// Kafka's per-batch bookkeeping, for append and recovery alike.
    pub(crate) fn track_batch(&mut self, position: u64, h: &BatchHeader) {
        if self.first_batch_timestamp.is_none() {
            self.first_batch_timestamp = Some(h.max_timestamp);
        }
        if h.max_timestamp > self.max_timestamp {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = h.last_offset();
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            self.offset_index.append(h.last_offset(), position as u32);
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += h.size() as u64;
        self.next_offset = h.next_offset();
    }

    /// Writes the batches (all or none) and updates the indexes.
    pub fn append(&mut self, batches: &[PreparedBatch<'_>]) -> Result<()> {
        self.prepare_indexes()?;
        let log = self.log.handle_for_write()?;
        let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(batches.len() * 2);
        let mut total = 0u64;
        for b in batches {
            iov.push(IoSlice::new(&b.header));
            if !b.records.is_empty() {
                iov.push(IoSlice::new(b.records));
            }
            total += (HEADER_SIZE + b.records.len()) as u64;
        }
        let end = self.size + total;
        if end >= PREALLOCATE_AFTER && end + PREALLOCATE_CHUNK / 2 > self.preallocated {
            self.preallocate_ahead(&log, end);
        }
        if let Err(e) = write_all_vectored_at(&log, &mut iov, self.size) {
            let _ = log.set_len(self.size);
            return Err(e.into());
        }
        let mut pos = self.size;
        self.size += total;
        for b in batches {
            let h = b.parsed();
            self.track_batch(pos, &h);
            pos += h.size() as u64;
        }
        Ok(())
    }

    /// Asks for the file's blocks up to a chunk past `end` to be reserved for the
    /// next appends (fallocate with FALLOC_FL_KEEP_SIZE: the file's size, and so
    /// what any reader or a recovery sees, stays the data's). On ext4, an append
    /// past the allocated blocks reserves them (delayed allocation) under the
    /// inode's i_data_sem, which the kernel's writeback holds while it allocates
    /// the same file's blocks: once several GB of dirty pages are being written
    /// back (a broker right after a bulk load) appends stalled there for 5-250 ms
    /// (issue 26). Into reserved blocks an append takes no such lock. The fallocate
    /// takes that lock too, so it runs on the reserver's worker thread
    /// (`reserver.rs`), asked half a chunk early; the append does not wait for it.
    /// Best effort: a file system without fallocate, or a full disk, gets plain
    /// appends (which then fail or not as they would have).
    fn preallocate_ahead(&mut self, log: &Arc<File>, end: u64) {
        if !self.holds_reservation {
            if !RESERVATIONS.take() {
                // plain appends until another segment gives its chunk back
                return;
            }
            self.holds_reservation = true;
        }
        let from = self.preallocated.max(self.size);
        let until = end + PREALLOCATE_CHUNK;
        let ticket = self.ticket.get_or_insert_with(Ticket::new);
        reserver::reserve(Arc::clone(log), from, until - from, Arc::clone(ticket));
        self.preallocated = until;
    }

    /// Gives back the blocks reserved past the data (a file whose size does not
    /// change is still cut to it: ext4 frees what lies past the end). The cut is
    /// the reserver worker's, after this segment's reservations still queued (it
    /// takes the lock an append would wait for at a roll); the budget's chunk comes
    /// back once it is made. A process killed before the worker made the cut leaves
    /// the rolled segment's reserved blocks (at most a chunk) until the segment is
    /// deleted or truncated: only the active segment is checked at activation.
    fn release_preallocated(&mut self) -> Result<()> {
        if let Some(ticket) = self.ticket.take() {
            ticket.retire();
        }
        if self.preallocated > self.size {
            let file = self.log.handle_for_write()?;
            let ticket = Ticket::new();
            reserver::cut(file, self.size, self.holds_reservation, Arc::clone(&ticket));
            self.pending_cut = Some(ticket);
            self.holds_reservation = false;
        }
        self.preallocated = 0;
        self.give_back_reservation();
        Ok(())
    }

    fn give_back_reservation(&mut self) {
        if self.holds_reservation {
            RESERVATIONS.give_back();
            self.holds_reservation = false;
        }
    }

    /// Reads the header of the batch at `position` (framing checked, no CRC).
    /// None at the end of the segment.
    pub fn header_at(&self, position: u64) -> Result<Option<BatchHeader>> {
        if position >= self.size {
            return Ok(None);
        }
        let log = self.log.handle()?;
        self.header_in(&log, position)
    }

    /// [`Segment::header_at`] with the handle given (loops take it once).
    pub(crate) fn header_in(&self, log: &File, position: u64) -> Result<Option<BatchHeader>> {
        if position >= self.size {
            return Ok(None);
        }
        let mut buf = [0u8; HEADER_SIZE];
        let n = (self.size - position).min(HEADER_SIZE as u64) as usize;
        log.read_exact_at(&mut buf[..n], position)?;
        if n < HEADER_SIZE {
            return Err(LogError::Corrupt(format!(
                "partial batch header at {position}"
            )));
        }
        let length = batch::be_i32(&buf, batch::LENGTH_AT);
        if length < batch::MIN_BATCH_LENGTH
            || position + length as u64 + batch::LOG_OVERHEAD as u64 > self.size
            || buf[batch::MAGIC_AT] != 2
        {
            return Err(LogError::Corrupt(format!(
                "bad batch framing at {position}"
            )));
        }
        Ok(Some(BatchHeader::parse(&buf)))
    }

    /// Position and header of the first batch with last offset >= `offset`,
    /// starting from the index entry for it; None when the segment has none.
    pub fn find_batch(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>> {
        let (_, pos) = self.offset_index.lookup(offset);
        let mut pos = pos as u64;
        if pos >= self.size {
            return Ok(None);
        }
        let log = self.log.handle()?;
        while let Some(h) = self.header_in(&log, pos)? {
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.size() as u64;
        }
        Ok(None)
    }

    /// Copies `len` bytes at `position` (for record decoding).
    pub fn read_bytes(&self, position: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.log.handle()?.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// Truncates the `.log` to `size` bytes and drops index entries past it.
    pub(crate) fn truncate_log(&mut self, size: u64) -> Result<()> {
        // no queued reservation may reach past the cut once it is made
        if let Some(ticket) = self.ticket.take() {
            ticket.spend();
        }
        // nor a cut queued at a roll: this segment may take appends again after this
        if let Some(ticket) = self.pending_cut.take() {
            ticket.spend();
        }
        self.log.handle_for_write()?.set_len(size)?;
        self.size = size;
        // the cut freed whatever was reserved past it
        self.preallocated = 0;
        self.give_back_reservation();
        Ok(())
    }

    /// Makes this the active segment: indexes preallocated, and blocks a process
    /// killed before its roll or close had reserved past the data given back.
    pub fn activate(&mut self, segment_index_bytes: u64) -> Result<()> {
        self.drop_stale_reservation()?;
        self.offset_index.preallocate(segment_index_bytes)?;
        self.time_index.preallocate(segment_index_bytes)
    }

    /// A reservation this handle did not make (the previous process's, killed
    /// before it gave it back) lies past the data: cut it off. Files are allocated
    /// in blocks and large ones carry extent blocks, hence the slack.
    fn drop_stale_reservation(&mut self) -> Result<()> {
        if self.preallocated != 0 || self.size == 0 {
            return Ok(());
        }
        let metadata = self.log.handle()?.metadata()?;
        let allocated = std::os::unix::fs::MetadataExt::blocks(&metadata) * 512;
        if allocated > self.size + PREALLOCATE_AFTER {
            self.log.handle_for_write()?.set_len(self.size)?;
        }
        Ok(())
    }

    /// Kafka's onBecomeInactiveSegment / close: final time index entry, then
    /// both indexes trimmed to their entries.
    pub fn deactivate(&mut self) -> Result<()> {
        self.release_preallocated()?;
        if self.size > 0 {
            self.time_index.ensure_mapped()?;
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
        }
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    /// fsync of the log and its indexes.
    pub fn flush(&self) -> Result<()> {
        self.log.sync()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// The aborted-transaction index of this segment.
    pub fn txn_index(&self) -> &TxnIndex {
        &self.txn_index
    }

    /// Deletes the files (the `.txnindex` too when there is one) crash-safely, as Kafka does: each is first
    /// renamed to `<name>.deleted` (the `.log` first, so the segment leaves
    /// the directory listing in one step), then removed. A crash in between
    /// leaves `.deleted` files that recovery removes; a lone `.index` /
    /// `.timeindex` without its `.log` is removed by recovery too. Open
    /// handles stay valid, so a fetch already sending from the file finishes.
    pub fn delete_files(&self) -> Result<()> {
        let paths = [
            self.log_path.as_path(),
            self.offset_index.path(),
            self.time_index.path(),
            self.txn_index.path(),
        ];
        let mut doomed = Vec::with_capacity(paths.len());
        for p in paths {
            let mut name = p.as_os_str().to_owned();
            name.push(".deleted");
            let target = PathBuf::from(name);
            match std::fs::rename(p, &target) {
                Ok(()) => doomed.push(target),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        for p in doomed {
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Writes every buffer at `offset` on with pwritev(2) (at most IOV_MAX
/// buffers a call), looping on short writes and EINTR.
fn write_all_vectored_at(
    file: &File,
    mut bufs: &mut [IoSlice<'_>],
    mut offset: u64,
) -> std::io::Result<()> {
    const IOV_MAX: usize = 1024;
    while !bufs.is_empty() {
        let count = bufs.len().min(IOV_MAX);
        // SAFETY: IoSlice is ABI-compatible with iovec on Unix; the slices
        // and the descriptor outlive the call.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                bufs.as_ptr().cast::<libc::iovec>(),
                count as libc::c_int,
                offset as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        offset += n as u64;
        IoSlice::advance_slices(&mut bufs, n as usize);
    }
    Ok(())
}

impl Drop for Segment {
    fn drop(&mut self) {
        // the blocks go with the file or stay reserved until the next activation;
        // the budget is the process's and must not leak with the handle
        if let Some(ticket) = self.ticket.take() {
            ticket.retire();
        }
        self.give_back_reservation();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Record};

    fn prepared(raw: &[u8], base_offset: i64) -> PreparedBatch<'_> {
        let mut header = [0u8; HEADER_SIZE];
        header.copy_from_slice(&raw[..HEADER_SIZE]);
        batch::set_base_offset(&mut header, base_offset);
        PreparedBatch {
            header,
            records: &raw[HEADER_SIZE..],
        }
    }

    /// A segment at `base_offset` in `dir`, opened and made active (indexes of a MiB).
    fn active_segment(dir: &Path, base_offset: i64, index_interval_bytes: u64) -> Segment {
        let mut s = Segment::open(
            dir,
            base_offset,
            index_interval_bytes,
            0,
            FileCache::global(),
        )
        .unwrap();
        s.activate(1 << 20).unwrap();
        s
    }

    #[test]
    fn delete_files_renames_then_removes() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = active_segment(dir.path(), 7, 100);
        let mut b = BatchBuilder::new(0, 1000);
        b.push(Record::new(1000, None, Some(b"x")));
        let raw = b.build();
        s.append(&[prepared(&raw, 7)]).unwrap();
        let file = s.file().unwrap();
        s.delete_files().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // an open handle still reads the bytes (a fetch in flight finishes)
        let mut buf = vec![0u8; raw.len()];
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf[HEADER_SIZE..], &raw[HEADER_SIZE..]);
    }

    #[test]
    fn file_names_are_20_digits() {
        assert_eq!(file_name(0, "log"), "00000000000000000000.log");
        assert_eq!(
            file_name(1234, "timeindex"),
            "00000000000000001234.timeindex"
        );
    }

    #[test]
    fn append_find_and_index_every_interval() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = active_segment(dir.path(), 0, 100);
        let mut raws = Vec::new();
        for i in 0..20 {
            let mut b = BatchBuilder::new(0, 1000 + i);
            b.push(Record::new(1000 + i, None, Some(&[7u8; 40])));
            b.push(Record::new(1000 + i, None, Some(&[8u8; 40])));
            raws.push(b.build());
        }
        for (i, r) in raws.iter().enumerate() {
            s.append(&[prepared(r, 2 * i as i64)]).unwrap();
        }
        assert_eq!(s.next_offset(), 40);
        assert!(s.offset_index.entries() > 3);
        for o in 0..40 {
            let (pos, h) = s.find_batch(o).unwrap().unwrap();
            assert_eq!(h.base_offset, o / 2 * 2);
            assert_eq!(pos, (o / 2) as u64 * raws[0].len() as u64);
        }
        assert!(s.find_batch(40).unwrap().is_none());
        let bytes = std::fs::read(s.log_path()).unwrap();
        assert_eq!(bytes.len() as u64, s.size());
        assert!(batch::validate_batches(&bytes, usize::MAX).is_ok());
    }

    /// Appends batches of 64 records of 1 KiB at consecutive offsets.
    struct KibBatches {
        raw: Vec<u8>,
        offset: i64,
    }

    impl KibBatches {
        fn new() -> KibBatches {
            let mut b = BatchBuilder::new(0, 1000);
            for _ in 0..64 {
                b.push(Record::new(1000, None, Some(&[7u8; 1024])));
            }
            KibBatches {
                raw: b.build(),
                offset: 0,
            }
        }

        fn append(&mut self, s: &mut Segment) {
            s.append(&[prepared(&self.raw, self.offset)]).unwrap();
            self.offset += 64;
        }

        /// Until the segment holds a MiB more than reservations start at.
        fn fill_past_reserving_threshold(&mut self, s: &mut Segment) {
            while s.size() < PREALLOCATE_AFTER + (1 << 20) {
                self.append(s);
            }
        }
    }

    /// Blocks on disk of the segment's log file, in bytes.
    #[cfg(target_os = "linux")]
    fn allocated(s: &Segment) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(s.log_path()).unwrap().blocks() * 512
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn blocks_are_reserved_ahead_of_a_busy_segment_and_given_back_at_roll() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = active_segment(dir.path(), 0, 4096);
        let mut appender = KibBatches::new();
        appender.append(&mut s);
        // a little data: nothing reserved
        assert!(
            allocated(&s) < s.size() + (1 << 20),
            "{} for {}",
            allocated(&s),
            s.size()
        );
        appender.fill_past_reserving_threshold(&mut s);
        reserver::settle();
        // the size is the data's (readers and recovery see only that), the blocks
        // reach at least half a chunk past it
        assert_eq!(std::fs::metadata(s.log_path()).unwrap().len(), s.size());
        assert!(
            allocated(&s) >= s.size() + PREALLOCATE_CHUNK / 2,
            "{} allocated for {}",
            allocated(&s),
            s.size()
        );
        let bytes = std::fs::read(s.log_path()).unwrap();
        assert_eq!(bytes.len() as u64, s.size());
        assert!(batch::validate_batches(&bytes, usize::MAX).is_ok());
        s.deactivate().unwrap();
        reserver::settle();
        assert_eq!(std::fs::metadata(s.log_path()).unwrap().len(), s.size());
        assert!(
            allocated(&s) < s.size() + (1 << 20),
            "{} for {}",
            allocated(&s),
            s.size()
        );
    }

    #[test]
    fn reservations_stop_at_the_budget_and_come_back() {
        let r = Reservations::new(3 * PREALLOCATE_CHUNK);
        assert!(r.take() && r.take() && r.take());
        assert!(!r.take(), "a fourth chunk past a budget of three");
        r.give_back();
        assert!(r.take());
        assert!(!r.take());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_reservation_left_by_a_killed_process_is_cut_at_the_next_activation() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = active_segment(dir.path(), 0, 4096);
        KibBatches::new().fill_past_reserving_threshold(&mut s);
        reserver::settle();
        let size = s.size();
        // (the budget's 32 chunks are far more than the tests running at once hold)
        assert!(allocated(&s) > size + PREALLOCATE_CHUNK / 2);
        // no deactivate: what a kill -9 leaves
        drop(s);
        let mut s = Segment::open(dir.path(), 0, 4096, 0, FileCache::global()).unwrap();
        assert_eq!(s.size(), size);
        assert!(allocated(&s) > size + PREALLOCATE_CHUNK / 2);
        s.activate(1 << 20).unwrap();
        assert!(
            allocated(&s) < size + (1 << 20),
            "{} for {}",
            allocated(&s),
            size
        );
        assert_eq!(std::fs::metadata(s.log_path()).unwrap().len(), size);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn appends_do_not_wait_for_the_reservation_of_their_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = active_segment(dir.path(), 0, 4096);
        let mut appender = KibBatches::new();
        {
            // the worker is held: the appends past the threshold go on without it
            let _held = reserver::hold();
            appender.fill_past_reserving_threshold(&mut s);
            assert!(
                allocated(&s) < s.size() + (1 << 20),
                "reserved by the appending thread: {} for {}",
                allocated(&s),
                s.size()
            );
        }
        reserver::settle();
        assert!(
            allocated(&s) >= s.size() + PREALLOCATE_CHUNK / 2,
            "{} allocated for {}",
            allocated(&s),
            s.size()
        );
        // the next one is asked for while half a chunk is still reserved
        let asked = s.preallocated;
        while s.preallocated == asked {
            appender.append(&mut s);
        }
        assert!(asked - s.size() >= PREALLOCATE_CHUNK / 2 - 64 * 1100);
        s.deactivate().unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_reservation_still_queued_at_a_truncation_is_not_made() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = active_segment(dir.path(), 0, 4096);
        {
            let _held = reserver::hold();
            KibBatches::new().fill_past_reserving_threshold(&mut s);
            // a follower's truncation, the reservation still queued
            s.truncate_log(PREALLOCATE_AFTER / 2).unwrap();
        }
        reserver::settle();
        assert_eq!(s.size(), PREALLOCATE_AFTER / 2);
        assert!(
            allocated(&s) < s.size() + (1 << 20),
            "reserved past a truncation: {} for {}",
            allocated(&s),
            s.size()
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_cut_queued_at_a_roll_does_not_touch_a_segment_truncated_and_appended_to_since() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = active_segment(dir.path(), 0, 4096);
        let mut appender = KibBatches::new();
        {
            let _held = reserver::hold();
            appender.fill_past_reserving_threshold(&mut s);
            let rolled_at = s.size();
            s.deactivate().unwrap();
            // a follower truncates into the rolled segment, which takes appends again
            s.truncate_log(PREALLOCATE_AFTER / 2).unwrap();
            s.activate(1 << 20).unwrap();
            appender.offset = s.next_offset;
            while s.size() <= rolled_at {
                appender.append(&mut s);
            }
        }
        reserver::settle();
        assert_eq!(std::fs::metadata(s.log_path()).unwrap().len(), s.size());
        s.deactivate().unwrap();
    }
}
