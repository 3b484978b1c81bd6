//! Kafka's `.index` file: sparse map from offset to position in the `.log`.
//!
//! Byte layout: a flat array of 8-byte entries, no header:
//!
//! ```text
//! relativeOffset i32 BE (offset - segment base offset) | position i32 BE
//! ```
//!
//! Like Kafka's `LogSegment.append`, an entry is added for a batch when more
//! than `index_interval_bytes` of log were written since the previous entry
//! (strictly more, as Kafka does), before the batch is counted. The entry is
//! (the batch's LAST offset, the batch's position) — the pair Kafka's
//! DumpLogSegments verifies. Both fields strictly increase, and no entry has
//! position 0 (the first batch of a segment is never indexed).
//!
//! Lookup of offset O: binary search for the largest entry with offset <= O,
//! giving a position from which a forward scan of batch headers finds the
//! batch holding O (an entry never points past that batch).
//!
//! Preallocated to `segment_index_bytes` rounded down to a multiple of 8
//! while active, trimmed to the used size on roll/close (see `index_file.rs`
//! for crash behaviour).

use std::path::Path;

use crate::batch::be_i32;
use crate::error::Result;
use crate::index_file::IndexFile;

/// Size of one `.index` entry.
pub const ENTRY_SIZE: usize = 8;

/// One segment's offset index.
#[derive(Debug)]
pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

impl OffsetIndex {
    /// Opens (creating) the index of the segment at `base_offset`; existing
    /// entries are kept up to the first that does not strictly increase.
    pub fn open(path: &Path, base_offset: i64) -> Result<OffsetIndex> {
        let mut idx = OffsetIndex {
            base_offset,
            file: IndexFile::open(path, ENTRY_SIZE)?,
        };
        let mut n = 0;
        let mut prev: Option<(i32, i32)> = None;
        while n < idx.file.entries() {
            let e = idx.file.raw_entry(n);
            let cur = (be_i32(e, 0), be_i32(e, 4));
            let ok = cur.0 >= 0 && cur.1 > 0 && prev.is_none_or(|p| cur.0 > p.0 && cur.1 > p.1);
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
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn entries(&self) -> usize {
        self.file.entries()
    }
    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Entry `i` as (absolute offset, position).
    pub fn entry(&self, i: usize) -> (i64, u32) {
        let e = self.file.raw_entry(i);
        (self.base_offset + be_i32(e, 0) as i64, be_i32(e, 4) as u32)
    }

    pub fn last_entry(&self) -> Option<(i64, u32)> {
        self.entries().checked_sub(1).map(|i| self.entry(i))
    }

    /// Appends (offset, position); ignored unless both exceed the last entry.
    pub fn append(&mut self, offset: i64, position: u32) {
        if self.is_full() {
            return;
        }
        if let Some((o, p)) = self.last_entry() {
            if offset <= o || position <= p {
                return;
            }
        }
        let mut e = [0u8; ENTRY_SIZE];
        e[..4].copy_from_slice(&((offset - self.base_offset) as i32).to_be_bytes());
        e[4..].copy_from_slice(&(position as i32).to_be_bytes());
        self.file.push(&e);
    }

    /// Largest entry with offset <= target, else (base offset, 0).
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let base = self.base_offset;
        match self.file.floor(target, |e| base + be_i32(e, 0) as i64) {
            Some(i) => self.entry(i),
            None => (base, 0),
        }
    }

    /// Keeps only entries with position < `position` (log truncated there).
    pub fn truncate_to_position(&mut self, position: u32) {
        let n = (0..self.entries())
            .take_while(|&i| self.entry(i).1 < position)
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
    fn append_lookup_trim_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&p, 100).unwrap();
        idx.preallocate(8 * 4 + 5).unwrap();
        idx.ensure_mapped().unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 32);
        assert_eq!(idx.lookup(150), (100, 0));
        idx.append(110, 4200);
        idx.append(120, 9000);
        idx.append(120, 9500); // not increasing: ignored
        assert_eq!(idx.entries(), 2);
        assert_eq!(idx.lookup(109), (100, 0));
        assert_eq!(idx.lookup(110), (110, 4200));
        assert_eq!(idx.lookup(119), (110, 4200));
        assert_eq!(idx.lookup(1000), (120, 9000));
        idx.append(130, 9600);
        idx.append(140, 9700);
        assert!(idx.is_full());
        idx.append(150, 9800);
        assert_eq!(idx.entries(), 4);
        idx.truncate_to_position(9600);
        assert_eq!(idx.entries(), 2);
        idx.trim().unwrap();
        drop(idx);
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(
            bytes,
            [0, 0, 0, 10, 0, 0, 0x10, 0x68, 0, 0, 0, 20, 0, 0, 0x23, 0x28]
        );
        let idx = OffsetIndex::open(&p, 100).unwrap();
        assert_eq!(idx.entries(), 2);
    }

    #[test]
    fn reopen_of_preallocated_file_drops_zero_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.index");
        let mut idx = OffsetIndex::open(&p, 0).unwrap();
        idx.preallocate(800).unwrap();
        idx.ensure_mapped().unwrap();
        idx.append(3, 5000);
        idx.flush().unwrap();
        drop(idx);
        let idx = OffsetIndex::open(&p, 0).unwrap();
        assert_eq!(idx.entries(), 1);
        assert_eq!(idx.entry(0), (3, 5000));
    }
}
