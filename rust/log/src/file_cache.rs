//! The open-file budget of the log files: segment `.log` files (a
//! partition's active segment included) and `.txnindex` files are opened on
//! demand, and a bounded LRU closes the least recently used ones, so a broker
//! holding more partition replicas than its RLIMIT_NOFILE allows still works.
//! (Index files keep no descriptor at all: see `index_file.rs`.)
//!
//! Stock Kafka keeps one descriptor per segment for good, so its replica count
//! is capped by the open-file limit; this cache trades an open(2) on a cold
//! partition for that cap.
//!
//! Rules:
//! * A handle is an `Arc<File>`: whoever holds one (a write in progress, a
//!   fetch response waiting for sendfile, the cleaner) keeps the descriptor
//!   valid however the cache evicts; evicting only drops the cache's own
//!   reference.
//! * Durability: a file written since its last fsync ("dirty") is fsynced
//!   *before* the cache closes it, and a dirty file some caller still holds
//!   (possibly mid-write) is never evicted. Reopening later and fsyncing would
//!   usually work on Linux (the page cache is per inode), but a writeback error
//!   that happens while no descriptor is open can be forgotten with the inode,
//!   and the later fsync then reports success for bytes that never reached the
//!   disk (PostgreSQL's "fsyncgate"). So a closed slot is always clean, and
//!   `sync` never needs to open anything.
//! * A failed fsync at eviction is remembered by the slot: every later write
//!   and `sync` of that file fails with it (the log dir goes offline in
//!   Python), never "succeeds" over lost bytes.
//! * EMFILE/ENFILE from open(2) is returned as the I/O error it is (the
//!   request fails with KAFKA_STORAGE_ERROR); nothing is retried or skipped.
//!
//! Budget ([`budget_for_limit`]): from the soft RLIMIT_NOFILE, a reserve is
//! kept for everything that is not a log file, the rest split between cached
//! files (3/4) and descriptors pinned by file slices in flight (1/4; above
//! that, reads copy their bytes instead of pinning, see `log.rs`).
//!
//! Locking: one mutex over all slots of the cache. Opens, closes and the
//! fsync of an evicted dirty file happen under it; reads, writes and the
//! fsync of `sync` happen outside it on a cloned handle.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::error::{LogError, Result};

/// Descriptors kept for what is not a log file, as a fraction of the soft
/// limit (at least `RESERVE_MIN`): client and inter-broker sockets, the
/// ZooKeeper session, the listening sockets, Python's own files, checkpoint
/// and snapshot files written by write-then-rename, index files opened for a
/// moment to resize them, directory fsyncs. A quarter of the usual 1,024 is
/// 256 connections; of 20,000 it is 5,000.
const RESERVE_DIVISOR: u64 = 4;
const RESERVE_MIN: u64 = 128;
/// The smallest budgets the arithmetic may give (tiny limits).
const CACHED_MIN: usize = 16;
const PINNED_MIN: usize = 4;

/// (cached files, pinned slices) for a soft RLIMIT_NOFILE of `soft`.
pub fn budget_for_limit(soft: u64) -> (usize, usize) {
    let reserve = (soft / RESERVE_DIVISOR).max(RESERVE_MIN);
    let rest = soft.saturating_sub(reserve) as usize;
    ((rest / 4 * 3).max(CACHED_MIN), (rest / 4).max(PINNED_MIN))
}

/// The soft RLIMIT_NOFILE of this process (RLIM_INFINITY read as 2^20).
fn soft_nofile_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, exclusively borrowed rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        1 << 20
    } else {
        r.rlim_cur
    }
}

/// A bounded set of open log files; see the module docs.
#[derive(Debug)]
pub struct FileCache {
    budget: usize,
    pin_limit: usize,
    pinned: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    tick: u64,
    /// tick of last use -> slot id, for the open slots only.
    lru: BTreeMap<u64, usize>,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    evictions: u64,
    /// Evictions of dirty files (each fsynced first).
    synced_evictions: u64,
    /// Tests: the next fsync at eviction fails with EIO.
    #[cfg(test)]
    fail_next_eviction_sync: bool,
}

#[derive(Debug)]
struct Slot {
    path: PathBuf,
    file: Option<Arc<File>>,
    /// Key in `lru` while open.
    tick: u64,
    /// Written since the last successful fsync.
    dirty: bool,
    /// An fsync at eviction failed: the bytes' fate is unknown for good.
    failed: Option<(io::ErrorKind, String)>,
}

impl FileCache {
    /// A cache of at most `budget` open files and `pin_limit` pinned slices.
    pub fn new(budget: usize, pin_limit: usize) -> Arc<FileCache> {
        Arc::new(FileCache {
            budget: budget.max(1),
            pin_limit,
            pinned: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        })
    }

    /// The process-wide cache, sized from the soft RLIMIT_NOFILE when first
    /// used (the broker does not change its limit later).
    pub fn global() -> &'static Arc<FileCache> {
        static GLOBAL: OnceLock<Arc<FileCache>> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let (budget, pins) = budget_for_limit(soft_nofile_limit());
            FileCache::new(budget, pins)
        })
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Files the cache holds open now.
    pub fn open_files(&self) -> usize {
        self.lock().lru.len()
    }

    /// Files closed by the LRU so far.
    pub fn evictions(&self) -> u64 {
        self.lock().evictions
    }

    /// Of those, files that were dirty and fsynced before being closed.
    pub fn synced_evictions(&self) -> u64 {
        self.lock().synced_evictions
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one pin (a descriptor held by a file slice) when under the pin
    /// limit.
    pub(crate) fn try_pin(self: &Arc<Self>) -> Option<Pin> {
        if self.pinned.fetch_add(1, Ordering::AcqRel) < self.pin_limit {
            Some(Pin {
                cache: self.clone(),
            })
        } else {
            self.pinned.fetch_sub(1, Ordering::AcqRel);
            None
        }
    }
}

impl State {
    fn touch(&mut self, id: usize) {
        self.tick += 1;
        let tick = self.tick;
        let slot = self.slots[id].as_mut().expect("live slot");
        if slot.file.is_some() {
            self.lru.remove(&slot.tick);
        }
        slot.tick = tick;
        self.lru.insert(tick, id);
    }

    /// Closes least recently used files until fewer than `budget` are open.
    /// A dirty file is fsynced first; one still held elsewhere is skipped.
    fn make_room(&mut self, budget: usize) {
        let mut from = 0u64;
        while self.lru.len() >= budget {
            let Some((&tick, &id)) = self.lru.range(from..).next() else {
                return; // everything left is dirty and in use: over budget for now
            };
            from = tick + 1;
            let slot = self.slots[id].as_mut().expect("open slot is live");
            let file = slot.file.as_ref().expect("lru lists open slots");
            if slot.dirty {
                if Arc::strong_count(file) > 1 {
                    continue; // maybe mid-write: its fsync must cover that write
                }
                #[cfg(test)]
                let result = if std::mem::take(&mut self.fail_next_eviction_sync) {
                    Err(io::Error::from_raw_os_error(libc::EIO))
                } else {
                    file.sync_all()
                };
                #[cfg(not(test))]
                let result = file.sync_all();
                if let Err(e) = result {
                    slot.failed = Some((e.kind(), e.to_string()));
                }
                slot.dirty = false;
                self.synced_evictions += 1;
            }
            slot.file = None;
            self.lru.remove(&tick);
            self.evictions += 1;
        }
    }
}

/// A descriptor held by a file slice, counted against the pin limit.
#[derive(Debug)]
pub struct Pin {
    cache: Arc<FileCache>,
}

impl Clone for Pin {
    fn clone(&self) -> Self {
        self.cache.pinned.fetch_add(1, Ordering::AcqRel);
        Pin {
            cache: self.cache.clone(),
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.cache.pinned.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One file under the cache: opened when used, closed by the LRU.
#[derive(Debug)]
pub struct CachedFile {
    cache: Arc<FileCache>,
    id: usize,
}

impl CachedFile {
    /// Opens (creating it when missing) the file read-write now.
    pub fn open(cache: &Arc<FileCache>, path: &Path) -> Result<CachedFile> {
        let id = {
            let mut st = cache.lock();
            let slot = Slot {
                path: path.to_path_buf(),
                file: None,
                tick: 0,
                dirty: false,
                failed: None,
            };
            match st.free.pop() {
                Some(id) => {
                    st.slots[id] = Some(slot);
                    id
                }
                None => {
                    st.slots.push(Some(slot));
                    st.slots.len() - 1
                }
            }
        };
        let f = CachedFile {
            cache: cache.clone(),
            id,
        };
        f.handle()?;
        Ok(f)
    }

    /// A handle for reading (the file is reopened if the LRU closed it).
    pub fn handle(&self) -> Result<Arc<File>> {
        self.acquire(false)
    }

    /// A handle for writing: the file counts as dirty (fsynced before it is
    /// closed) from now on. Refused once an fsync of this file failed.
    pub fn handle_for_write(&self) -> Result<Arc<File>> {
        self.acquire(true)
    }

    fn acquire(&self, write: bool) -> Result<Arc<File>> {
        let mut st = self.cache.lock();
        let slot = st.slots[self.id].as_mut().expect("live slot");
        if write {
            if let Some((kind, msg)) = &slot.failed {
                return Err(failed(*kind, msg, &slot.path));
            }
        }
        let file = match slot.file.clone() {
            Some(f) => f,
            None => {
                let path = slot.path.clone();
                st.make_room(self.cache.budget);
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)?;
                let file = Arc::new(file);
                st.slots[self.id].as_mut().expect("live slot").file = Some(file.clone());
                file
            }
        };
        if write {
            // under the lock, before the caller writes: eviction sees it
            st.slots[self.id].as_mut().expect("live slot").dirty = true;
        }
        st.touch(self.id);
        Ok(file)
    }

    /// fsync of what was written since the last one. A closed file is clean
    /// (it was fsynced before it was closed) unless that fsync failed.
    pub fn sync(&self) -> Result<()> {
        let file = {
            let st = self.cache.lock();
            let slot = st.slots[self.id].as_ref().expect("live slot");
            if let Some((kind, msg)) = &slot.failed {
                return Err(failed(*kind, msg, &slot.path));
            }
            match (&slot.file, slot.dirty) {
                (Some(f), true) => f.clone(),
                _ => return Ok(()),
            }
        };
        // the owner's writes are serialized with this call (the log's lock),
        // and eviction skips a dirty file while this clone is held
        let result = file.sync_all();
        let mut st = self.cache.lock();
        let slot = st.slots[self.id].as_mut().expect("live slot");
        match result {
            Ok(()) => {
                slot.dirty = false;
                Ok(())
            }
            Err(e) => {
                slot.failed = Some((e.kind(), e.to_string()));
                Err(e.into())
            }
        }
    }

    /// Whether the descriptor is open now (tests, metrics).
    pub fn is_open(&self) -> bool {
        let st = self.cache.lock();
        st.slots[self.id]
            .as_ref()
            .expect("live slot")
            .file
            .is_some()
    }

    /// The cache this file counts against.
    pub fn cache(&self) -> &Arc<FileCache> {
        &self.cache
    }
}

impl Drop for CachedFile {
    /// Leaves the cache; the descriptor closes once no handle is held (no
    /// fsync here: an owner that needs one flushes before dropping).
    fn drop(&mut self) {
        let mut st = self.cache.lock();
        if let Some(slot) = st.slots[self.id].take() {
            if slot.file.is_some() {
                st.lru.remove(&slot.tick);
            }
        }
        st.free.push(self.id);
    }
}

fn failed(kind: io::ErrorKind, msg: &str, path: &Path) -> LogError {
    LogError::Io(io::Error::new(
        kind,
        format!(
            "an fsync of {} failed before its descriptor was closed ({msg}); its \
             unflushed bytes may be lost",
            path.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn budget_keeps_a_reserve() {
        assert_eq!(budget_for_limit(20_000), (11_250, 3_750));
        assert_eq!(budget_for_limit(1_024), (576, 192));
        assert_eq!(budget_for_limit(512), (288, 96));
        assert_eq!(budget_for_limit(64), (CACHED_MIN, PINNED_MIN));
    }

    #[test]
    fn lru_closes_the_least_recently_used_and_reopens_on_demand() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(3, 1);
        let files: Vec<CachedFile> = (0..5)
            .map(|i| CachedFile::open(&cache, &dir.path().join(format!("{i}"))).unwrap())
            .collect();
        assert_eq!(cache.open_files(), 3);
        let open: Vec<bool> = files.iter().map(CachedFile::is_open).collect();
        assert_eq!(open, [false, false, true, true, true]);
        files[0]
            .handle_for_write()
            .unwrap()
            .write_all_at(b"abc", 0)
            .unwrap();
        assert!(files[0].is_open() && !files[2].is_open());
        let mut buf = [0u8; 3];
        files[0]
            .handle()
            .unwrap()
            .read_exact_at(&mut buf, 0)
            .unwrap();
        assert_eq!(&buf, b"abc");
        drop(files);
        assert_eq!(cache.open_files(), 0);
    }

    #[test]
    fn a_held_handle_outlives_eviction() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1, 1);
        let a = CachedFile::open(&cache, &dir.path().join("a")).unwrap();
        let h = a.handle().unwrap();
        h.write_all_at(b"xyz", 0).unwrap();
        let _b = CachedFile::open(&cache, &dir.path().join("b")).unwrap();
        assert!(!a.is_open());
        let mut buf = [0u8; 3];
        h.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"xyz");
    }

    #[test]
    fn a_dirty_file_in_use_is_not_evicted() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1, 1);
        let a = CachedFile::open(&cache, &dir.path().join("a")).unwrap();
        let w = a.handle_for_write().unwrap();
        let b = CachedFile::open(&cache, &dir.path().join("b")).unwrap();
        assert!(a.is_open() && b.is_open(), "over budget rather than unsafe");
        drop(w);
        let _c = CachedFile::open(&cache, &dir.path().join("c")).unwrap();
        assert!(!a.is_open(), "dirty and no longer held: fsynced and closed");
        assert_eq!(cache.open_files(), 1);
        a.sync().unwrap();
        assert!(!a.is_open(), "a clean closed file needs no reopen to sync");
    }

    #[test]
    fn a_failed_fsync_at_eviction_fails_every_later_sync_and_write() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1, 1);
        let a = CachedFile::open(&cache, &dir.path().join("a")).unwrap();
        a.handle_for_write().unwrap().write_all_at(b"x", 0).unwrap();
        cache.lock().fail_next_eviction_sync = true;
        let _b = CachedFile::open(&cache, &dir.path().join("b")).unwrap();
        assert!(!a.is_open());
        assert_eq!(cache.synced_evictions(), 1);
        for _ in 0..2 {
            match a.sync() {
                Err(LogError::Io(e)) => assert!(e.to_string().contains("may be lost"), "{e}"),
                other => panic!("a lost fsync error: {other:?}"),
            }
        }
        assert!(a.handle_for_write().is_err());
        assert!(a.handle().is_ok(), "reading what is there stays possible");
    }

    #[test]
    fn pins_are_bounded() {
        let cache = FileCache::new(4, 2);
        let p1 = cache.try_pin().unwrap();
        let p2 = p1.clone();
        assert!(cache.try_pin().is_none());
        drop(p2);
        let p3 = cache.try_pin().unwrap();
        drop((p1, p3));
        assert_eq!(cache.pinned.load(Ordering::Acquire), 0);
    }

    #[test]
    fn open_errors_are_returned() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(4, 1);
        let missing = dir.path().join("no-such-dir").join("x");
        match CachedFile::open(&cache, &missing) {
            Err(LogError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
            other => panic!("{other:?}"),
        }
        assert_eq!(cache.open_files(), 0);
    }
}
