//! The aborted-transaction index of a segment: `<base offset>.txnindex`
//! (Kafka's `TransactionIndex`).
//!
//! One entry per transaction aborted by a marker in this segment, in the
//! order the markers were written, 34 bytes each, big-endian, no header:
//!
//! ```text
//! off size field
//!   0    2 version             = 0
//!   2    8 producerId
//!  10    8 firstOffset         first offset of the transaction's data
//!  18    8 lastOffset          offset of the ABORT marker
//!  26    8 lastStableOffset    the LSO once this transaction ended
//! ```
//!
//! A read_committed fetch of [start, end) is told (producerId, firstOffset)
//! of every entry with lastOffset >= start and firstOffset < end; since a
//! transaction's data may lie in segments before the one holding its
//! marker, the search runs from the segment holding `start` onwards and
//! stops at the first entry whose lastStableOffset passes `end` (Kafka's
//! `TxnIndexSearchResult.isComplete`).
//!
//! The entries are kept in memory too (a segment has few), so searches do
//! no I/O. The file is created on the first entry only, as Kafka does; its
//! descriptor is one of the log files under the open-file budget
//! (`file_cache.rs`).
//!
//! Crash behaviour: an entry is written (not fsynced) after its marker; the
//! segment's flush fsyncs it. A torn last entry is dropped on open. The log
//! rebuilds the entries of every segment part it replays from the producer
//! snapshot on (recovery, truncation), so a missing or stale tail is
//! rewritten from the markers themselves.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{LogError, Result};
use crate::file_cache::{CachedFile, FileCache};

/// Bytes per entry.
pub const ENTRY_SIZE: usize = 34;
/// The entry format version.
pub const VERSION: i16 = 0;

/// One aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut b = [0u8; ENTRY_SIZE];
        b[0..2].copy_from_slice(&VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<AbortedTxn> {
        if b.len() < ENTRY_SIZE {
            return Err(LogError::Corrupt("short transaction index entry".into()));
        }
        let version = i16::from_be_bytes([b[0], b[1]]);
        if version != VERSION {
            return Err(LogError::Corrupt(format!(
                "transaction index entry version {version}"
            )));
        }
        let at = |i: usize| i64::from_be_bytes(b[i..i + 8].try_into().unwrap());
        Ok(AbortedTxn {
            producer_id: at(2),
            first_offset: at(10),
            last_offset: at(18),
            last_stable_offset: at(26),
        })
    }
}

/// Decodes a whole `.txnindex` file's bytes: every whole entry up to the
/// first bad one (a torn tail or garbage ends the index there).
pub fn decode_all(bytes: &[u8]) -> Vec<AbortedTxn> {
    bytes
        .chunks_exact(ENTRY_SIZE)
        .map_while(|c| AbortedTxn::decode(c).ok())
        .collect()
}

/// One segment's `.txnindex`.
#[derive(Debug)]
pub struct TxnIndex {
    path: PathBuf,
    entries: Vec<AbortedTxn>,
    cache: Arc<FileCache>,
    file: Option<CachedFile>,
}

impl TxnIndex {
    /// Reads the file if there is one (it is created on the first append).
    pub fn open(path: &Path, cache: &Arc<FileCache>) -> Result<TxnIndex> {
        // most segments have none: the failed read says so (no separate exists())
        let read = match std::fs::read(path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e.into()),
        };
        let mut idx = TxnIndex {
            path: path.to_path_buf(),
            entries: read.as_deref().map(decode_all).unwrap_or_default(),
            cache: cache.clone(),
            file: None,
        };
        if let Some(bytes) = read {
            // a torn or bad tail is cut so appends follow the last good entry
            let len = (idx.entries.len() * ENTRY_SIZE) as u64;
            if bytes.len() as u64 != len {
                idx.handle()?.set_len(len)?;
            }
        }
        Ok(idx)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// A handle to write with (the file is created on first use).
    fn handle(&mut self) -> Result<Arc<File>> {
        if self.file.is_none() {
            self.file = Some(CachedFile::open(&self.cache, &self.path)?);
        }
        self.file.as_ref().expect("opened above").handle_for_write()
    }

    /// Appends an entry; one already present (same producer and marker
    /// offset, a replay of the same marker) is not written twice.
    pub fn append(&mut self, txn: AbortedTxn) -> Result<()> {
        if self
            .entries
            .iter()
            .any(|e| e.producer_id == txn.producer_id && e.last_offset == txn.last_offset)
        {
            return Ok(());
        }
        let len = (self.entries.len() * ENTRY_SIZE) as u64;
        let f = self.handle()?;
        use std::os::unix::fs::FileExt;
        f.write_all_at(&txn.encode(), len)?;
        self.entries.push(txn);
        Ok(())
    }

    /// Drops the entries whose marker is at or after `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.last_offset < offset);
        if self.entries.len() == before || !self.path.exists() {
            return Ok(());
        }
        let bytes: Vec<u8> = self.entries.iter().flat_map(|e| e.encode()).collect();
        let f = self.handle()?;
        use std::os::unix::fs::FileExt;
        f.write_all_at(&bytes, 0)?;
        f.set_len(bytes.len() as u64)?;
        Ok(())
    }

    /// The entries overlapping [start, end) and whether the search is
    /// complete (an entry's LSO passed `end`: later segments hold nothing
    /// for this range).
    pub fn collect(&self, start: i64, end: i64) -> (Vec<AbortedTxn>, bool) {
        let mut out = Vec::new();
        for e in &self.entries {
            if e.last_offset >= start && e.first_offset < end {
                out.push(*e);
            }
            if e.last_stable_offset > end {
                return (out, true);
            }
        }
        (out, false)
    }

    /// fsync of the file when this index wrote to it.
    pub fn flush(&self) -> Result<()> {
        match &self.file {
            Some(f) => f.sync(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;
    use std::io::Write;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entry_bytes_are_kafkas() {
        let b = txn(7, 10, 20, 21).encode();
        assert_eq!(b.len(), 34);
        assert_eq!(&b[0..2], &[0, 0]);
        assert_eq!(&b[2..10], &7i64.to_be_bytes());
        assert_eq!(&b[10..18], &10i64.to_be_bytes());
        assert_eq!(&b[18..26], &20i64.to_be_bytes());
        assert_eq!(&b[26..34], &21i64.to_be_bytes());
        assert_eq!(AbortedTxn::decode(&b).unwrap(), txn(7, 10, 20, 21));
        let mut bad = b;
        bad[1] = 1;
        assert!(AbortedTxn::decode(&bad).is_err());
    }

    #[test]
    fn created_lazily_appended_reopened_and_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let cache = FileCache::new(16, 4);
        let mut idx = TxnIndex::open(&path, &cache).unwrap();
        assert!(!path.exists());
        idx.truncate_to(0).unwrap();
        assert!(!path.exists());
        idx.append(txn(1, 0, 5, 6)).unwrap();
        idx.append(txn(2, 3, 9, 10)).unwrap();
        idx.append(txn(2, 3, 9, 10)).unwrap(); // replayed: not twice
        idx.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap().len(), 68);
        // a torn tail is cut on open
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 1]).unwrap();
        let mut idx = TxnIndex::open(&path, &cache).unwrap();
        assert_eq!(idx.entries().len(), 2);
        assert_eq!(std::fs::read(&path).unwrap().len(), 68);
        assert_eq!(idx.collect(6, 100).0, vec![txn(2, 3, 9, 10)]);
        assert_eq!(idx.collect(0, 3).0, vec![txn(1, 0, 5, 6)]);
        assert!(idx.collect(0, 3).1, "lso 6 > 3: complete");
        assert!(!idx.collect(0, 100).1);
        idx.truncate_to(9).unwrap();
        assert_eq!(idx.entries(), &[txn(1, 0, 5, 6)]);
        assert_eq!(std::fs::read(&path).unwrap(), txn(1, 0, 5, 6).encode());
        idx.append(txn(3, 7, 8, 9)).unwrap();
        let idx = TxnIndex::open(&path, &cache).unwrap();
        assert_eq!(idx.entries(), &[txn(1, 0, 5, 6), txn(3, 7, 8, 9)]);
    }
}
