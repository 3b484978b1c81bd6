//! Fixed-size-entry, memory-mapped, preallocated index file: the mechanics
//! shared by `.index` (8-byte entries) and `.timeindex` (12-byte entries).
//!
//! While a segment is active its index file is preallocated to
//! `max_index_bytes` rounded down to a multiple of the entry size, and
//! mapped read-write; unused space is zeros. On roll and close the file is
//! trimmed to exactly `entries * entry_size` bytes, which is what Kafka
//! leaves on disk and what its tools expect.
//!
//! Crash behaviour: after a crash the file may still be preallocated (trailing
//! zero entries) or hold entries not yet flushed. On open, entries are taken
//! up to the first one that does not strictly increase (both fields), so
//! trailing zeros are dropped; the log is then cross-checked by the caller,
//! and recovery rebuilds the index from the log when in doubt.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::{Advice, MmapMut};

use crate::error::Result;

#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    /// Capacity in entries of the current file length.
    capacity: usize,
    /// Entries written or zeroed through the mapping since its last msync (or
    /// since the file was opened: what was on disk then was made durable by the
    /// process that wrote it, before its recovery point passed this segment or its
    /// clean shutdown; what recovery writes again counts as written). `flush` is
    /// a no-op without it: an msync(MS_SYNC) is a device flush on this file system
    /// whether or not a page is dirty, and a close paid two per log even for a log
    /// flushed to its end already.
    written: AtomicBool,
}

/// No read-ahead on an index mapping: its reads are binary searches and a scan
/// that stops at the first unused entry. A fault otherwise pulls in the device's
/// read-ahead window (8 MiB on the bench machine) of a preallocated file that is
/// mostly holes: after a kill -9 every active segment's two 10 MiB indexes were
/// read into the page cache as zeros at open, ~45 ms and 16 MiB a partition.
fn random_access(mmap: &MmapMut) -> Result<()> {
    mmap.advise(Advice::Random)?;
    Ok(())
}

fn open_rw(path: &Path) -> Result<File> {
    Ok(OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?)
}

impl IndexFile {
    /// Opens (creating) the file and maps it. `entries` is not yet known:
    /// the caller scans with `raw_entry` and calls `set_entries`, which
    /// unmaps an index found empty.
    pub(crate) fn open(path: &Path, entry_size: usize) -> Result<IndexFile> {
        let file = open_rw(path)?;
        let len = file.metadata()?.len() as usize;
        let mut f = IndexFile {
            path: path.to_path_buf(),
            mmap: None,
            entry_size,
            entries: 0,
            capacity: len / entry_size,
            written: AtomicBool::new(false),
        };
        f.map(&file)?;
        f.entries = f.capacity;
        Ok(f)
    }

    fn map(&mut self, file: &File) -> Result<()> {
        self.mmap = None;
        if self.capacity > 0 {
            // SAFETY: only this process changes the file's length (always
            // through this struct, which drops the mapping before every
            // `set_len` and maps again after it).
            let mmap = unsafe { MmapMut::map_mut(file)? };
            random_access(&mmap)?;
            self.mmap = Some(mmap);
        }
        Ok(())
    }

    /// Maps the file if it is not: before the first `push` of an index
    /// opened empty. Fails (EMFILE, ENOMEM) before anything is written.
    pub(crate) fn ensure_mapped(&mut self) -> Result<()> {
        if self.mmap.is_none() && self.capacity > 0 {
            let file = open_rw(&self.path)?;
            self.map(&file)?;
        }
        Ok(())
    }

    /// Sets the file's length and maps it again (the entries are kept). No
    /// msync first: the mapping's dirty pages are the file's page cache, which
    /// the unmap keeps and the next `flush` (an msync, i.e. an fsync of the
    /// file's range) writes; here it was a synchronous flush on the append
    /// path at every roll (issue 26).
    fn resize(&mut self, len: u64) -> Result<()> {
        self.mmap = None;
        let file = open_rw(&self.path)?;
        file.set_len(len)?;
        self.capacity = len as usize / self.entry_size;
        if self.entries > 0 {
            self.map(&file)?;
        }
        Ok(())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }
    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.capacity
    }
    pub(crate) fn set_entries(&mut self, n: usize) {
        self.entries = n.min(self.capacity);
        if self.entries == 0 {
            self.mmap = None;
        }
    }

    /// Bytes of entry `i` (must be < entries, or < capacity while mapped).
    pub(crate) fn raw_entry(&self, i: usize) -> &[u8] {
        let m = self.mmap.as_ref().expect("entry of an unmapped index");
        &m[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Appends one entry; the caller checks `is_full` first and has called
    /// `ensure_mapped`. Were it not mapped, the entry is left out (a debug
    /// build panics): an index is sparse, a missing entry only makes lookups
    /// scan further, where a panic would take the broker down.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        debug_assert_eq!(bytes.len(), self.entry_size);
        debug_assert!(self.mmap.is_some(), "push into an unmapped index");
        let at = self.entries * self.entry_size;
        let Some(m) = self.mmap.as_mut() else {
            return;
        };
        m[at..at + self.entry_size].copy_from_slice(bytes);
        self.entries += 1;
        *self.written.get_mut() = true;
    }

    /// Drops entries from `n` on and zeroes them.
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        if n >= self.entries {
            return;
        }
        let (from, to) = (n * self.entry_size, self.entries * self.entry_size);
        if let Some(m) = self.mmap.as_mut() {
            m[from..to].fill(0);
            *self.written.get_mut() = true;
        }
        self.entries = n;
    }

    /// Preallocates the file to `max_bytes` rounded down to whole entries
    /// (never below the used size).
    pub(crate) fn preallocate(&mut self, max_bytes: u64) -> Result<()> {
        let es = self.entry_size as u64;
        let len = (max_bytes / es * es).max(self.entries as u64 * es);
        if len as usize != self.capacity * self.entry_size {
            self.resize(len)?;
        }
        Ok(())
    }

    /// Trims the file to exactly the used entries.
    pub(crate) fn trim(&mut self) -> Result<()> {
        let len = (self.entries * self.entry_size) as u64;
        if self.capacity * self.entry_size != len as usize {
            self.resize(len)?;
        }
        Ok(())
    }

    /// msync of the mapping (see the module docs) when an entry was written
    /// since the last one; nothing when unmapped, which means no entries.
    pub(crate) fn flush(&self) -> Result<()> {
        if let Some(m) = self.mmap.as_ref() {
            // `&self`: no entry can be written meanwhile (that takes `&mut self`)
            if self.written.load(Ordering::Relaxed) {
                m.flush()?;
                self.written.store(false, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Whether `flush` has something to write (tests).
    #[cfg(test)]
    pub(crate) fn needs_flush(&self) -> bool {
        self.mmap.is_some() && self.written.load(Ordering::Relaxed)
    }

    /// Binary search: the largest entry index whose key (given by `key`) is
    /// <= target, or None when there is none. Keys must be ascending.
    pub(crate) fn floor(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if key(self.raw_entry(mid)) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: usize = 8;

    fn entry(i: u8) -> [u8; ENTRY] {
        [0, 0, 0, i, 0, 0, 0, i]
    }

    #[test]
    fn only_an_index_written_since_its_last_flush_is_flushed_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut f = IndexFile::open(&path, ENTRY).unwrap();
        f.set_entries(0);
        f.preallocate(80).unwrap();
        f.ensure_mapped().unwrap();
        assert!(!f.needs_flush(), "nothing written yet");
        f.push(&entry(1));
        f.push(&entry(2));
        assert!(f.needs_flush());
        f.flush().unwrap();
        assert!(
            !f.needs_flush(),
            "flushed to its last entry: nothing to msync"
        );
        f.flush().unwrap();
        // a trim (set_len and a new mapping) keeps what the old mapping wrote unflushed
        f.push(&entry(3));
        f.trim().unwrap();
        assert!(f.needs_flush());
        f.flush().unwrap();
        f.truncate_entries(1);
        assert!(f.needs_flush(), "zeroed entries are written too");
        f.flush().unwrap();
        drop(f);
        // opened again: what is on disk was flushed by whoever wrote it
        let mut f = IndexFile::open(&path, ENTRY).unwrap();
        f.set_entries(1);
        assert!(!f.needs_flush());
        assert_eq!(f.raw_entry(0), &entry(1));
    }
}
