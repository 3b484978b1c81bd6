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

use memmap2::MmapMut;

use crate::error::Result;

#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    file: File,
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    /// Capacity in entries of the current file length.
    capacity: usize,
}

impl IndexFile {
    /// Opens (creating) the file and maps it. `entries` is not yet known:
    /// the caller scans with `raw_entry` and calls `set_entries`.
    pub(crate) fn open(path: &Path, entry_size: usize) -> Result<IndexFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len() as usize;
        let mut f = IndexFile {
            path: path.to_path_buf(),
            file,
            mmap: None,
            entry_size,
            entries: 0,
            capacity: 0,
        };
        f.remap(len)?;
        f.entries = f.capacity;
        Ok(f)
    }

    fn remap(&mut self, len: usize) -> Result<()> {
        self.mmap = None;
        self.capacity = len / self.entry_size;
        if len > 0 {
            // SAFETY: the file is owned by this struct and only this process
            // changes its length (always through `remap`); the mapping is
            // dropped before every `set_len`.
            self.mmap = Some(unsafe { MmapMut::map_mut(&self.file)? });
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
    }

    /// Bytes of entry `i` (must be < capacity).
    pub(crate) fn raw_entry(&self, i: usize) -> &[u8] {
        let m = self.mmap.as_ref().expect("entry of an empty index");
        &m[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Appends one entry; the caller checks `is_full` first.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        debug_assert_eq!(bytes.len(), self.entry_size);
        let at = self.entries * self.entry_size;
        let m = self.mmap.as_mut().expect("push into an unallocated index");
        m[at..at + self.entry_size].copy_from_slice(bytes);
        self.entries += 1;
    }

    /// Drops entries from `n` on and zeroes them.
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        if n >= self.entries {
            return;
        }
        let (from, to) = (n * self.entry_size, self.entries * self.entry_size);
        if let Some(m) = self.mmap.as_mut() {
            m[from..to].fill(0);
        }
        self.entries = n;
    }

    /// Preallocates the file to `max_bytes` rounded down to whole entries
    /// (never below the used size).
    pub(crate) fn preallocate(&mut self, max_bytes: u64) -> Result<()> {
        let es = self.entry_size as u64;
        let len = (max_bytes / es * es).max(self.entries as u64 * es);
        if len as usize != self.capacity * self.entry_size {
            self.mmap = None;
            self.file.set_len(len)?;
            self.remap(len as usize)?;
        }
        Ok(())
    }

    /// Trims the file to exactly the used entries.
    pub(crate) fn trim(&mut self) -> Result<()> {
        let len = (self.entries * self.entry_size) as u64;
        if self.capacity * self.entry_size != len as usize {
            if let Some(m) = self.mmap.as_ref() {
                m.flush()?;
            }
            self.mmap = None;
            self.file.set_len(len)?;
            let n = self.entries;
            self.remap(len as usize)?;
            self.entries = n;
        }
        Ok(())
    }

    pub(crate) fn flush(&self) -> Result<()> {
        if let Some(m) = self.mmap.as_ref() {
            m.flush()?;
        }
        self.file.sync_all()?;
        Ok(())
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
