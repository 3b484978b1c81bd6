//! Kafka's `.timeindex` file: sparse map from timestamp to offset.
//!
//! Byte layout: a flat array of 12-byte entries, no header:
//!
//! ```text
//! timestamp i64 BE | relativeOffset i32 BE (offset - segment base offset)
//! ```
//!
//! Kafka semantics: whenever an offset index entry is added, the segment's
//! (maxTimestampSoFar, offsetOfMaxTimestampSoFar) is appended if its
//! timestamp is greater than the last entry's; on roll/close the final pair
//! is appended the same way. The offset is the last offset of the batch that
//! holds the max timestamp. Timestamps strictly increase, offsets never
//! decrease.
//!
//! Lookup of timestamp T: the largest entry with timestamp <= T, else
//! (-1, base offset); its offset is then looked up in the offset index.
//!
//! Preallocated to `segment_index_bytes` rounded down to a multiple of 12
//! while active, trimmed on roll/close (see `index_file.rs` for crash
//! behaviour; trailing entries that do not increase are dropped on open).

use std::path::Path;

use crate::batch::{be_i32, be_i64};
use crate::error::Result;
use crate::index_file::IndexFile;

/// Size of one `.timeindex` entry.
pub const ENTRY_SIZE: usize = 12;

/// One segment's time index.
#[derive(Debug)]
pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

impl TimeIndex {
    /// Opens (creating) the index; existing entries are kept up to the first
    /// whose timestamp does not increase or whose offset decreases.
    pub fn open(path: &Path, base_offset: i64) -> Result<TimeIndex> {
        let mut idx = TimeIndex {
            base_offset,
            file: IndexFile::open(path, ENTRY_SIZE)?,
        };
        let mut n = 0;
        let mut prev: Option<(i64, i32)> = None;
        while n < idx.file.entries() {
            let e = idx.file.raw_entry(n);
            let cur = (be_i64(e, 0), be_i32(e, 8));
            let ok = cur.1 >= 0
                && (cur.0 != 0 || cur.1 != 0)
                && prev.is_none_or(|p| cur.0 > p.0 && cur.1 >= p.1);
            if !ok {
                break;
            }
            prev = Some(cur);
            n += 1;
        }
        idx.file.set_entries(n);
        Ok(idx)
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
    pub fn entries(&self) -> usize {
        self.file.entries()
    }
    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Entry `i` as (timestamp, absolute offset).
    pub fn entry(&self, i: usize) -> (i64, i64) {
        let e = self.file.raw_entry(i);
        (be_i64(e, 0), self.base_offset + be_i32(e, 8) as i64)
    }

    pub fn last_entry(&self) -> Option<(i64, i64)> {
        self.entries().checked_sub(1).map(|i| self.entry(i))
    }

    /// Appends (timestamp, offset) when the timestamp is newer than the last
    /// entry's and the offset not older (Kafka's `maybeAppend`).
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) {
        if self.is_full() || timestamp < 0 {
            return;
        }
        if let Some((t, o)) = self.last_entry() {
            if timestamp <= t || offset < o {
                return;
            }
        }
        let mut e = [0u8; ENTRY_SIZE];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&((offset - self.base_offset) as i32).to_be_bytes());
        self.file.push(&e);
    }

    /// Largest entry with timestamp <= target, else (-1, base offset).
    pub fn lookup(&self, target: i64) -> (i64, i64) {
        match self.file.floor(target, |e| be_i64(e, 0)) {
            Some(i) => self.entry(i),
            None => (-1, self.base_offset),
        }
    }

    /// Keeps only entries with offset < `offset`.
    pub fn truncate_to_offset(&mut self, offset: i64) {
        let n = (0..self.entries())
            .take_while(|&i| self.entry(i).1 < offset)
            .count();
        self.file.truncate_entries(n);
    }

    pub fn clear(&mut self) {
        self.file.truncate_entries(0);
    }
    pub fn preallocate(&mut self, max_bytes: u64) -> Result<()> {
        self.file.preallocate(max_bytes)
    }
    pub fn trim(&mut self) -> Result<()> {
        self.file.trim()
    }
    /// Maps the file before an entry is added to an index opened empty
    /// (see `index_file.rs`).
    pub fn ensure_mapped(&mut self) -> Result<()> {
        self.file.ensure_mapped()
    }
    pub fn flush(&self) -> Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_lookup_trim() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("00000000000000000005.timeindex");
        let mut idx = TimeIndex::open(&p, 5).unwrap();
        idx.preallocate(100).unwrap();
        idx.ensure_mapped().unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 96);
        assert_eq!(idx.lookup(10), (-1, 5));
        idx.maybe_append(1000, 7);
        idx.maybe_append(1000, 9); // same timestamp: skipped
        idx.maybe_append(2000, 9);
        assert_eq!(idx.entries(), 2);
        assert_eq!(idx.lookup(999), (-1, 5));
        assert_eq!(idx.lookup(1500), (1000, 7));
        assert_eq!(idx.lookup(5000), (2000, 9));
        idx.trim().unwrap();
        drop(idx);
        let b = std::fs::read(&p).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&2i32.to_be_bytes());
        want.extend_from_slice(&2000i64.to_be_bytes());
        want.extend_from_slice(&4i32.to_be_bytes());
        assert_eq!(b, want);
        let mut idx = TimeIndex::open(&p, 5).unwrap();
        assert_eq!(idx.entries(), 2);
        idx.truncate_to_offset(9);
        assert_eq!(idx.entries(), 1);
    }
}
