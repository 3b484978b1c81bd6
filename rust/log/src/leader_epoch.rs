//! The leader-epoch cache of a partition (Kafka's `LeaderEpochFileCache`)
//! and its file, `leader-epoch-checkpoint`.
//!
//! An entry (epoch, start offset) says: the first record written under
//! leader epoch `epoch` has offset `start offset`. Entries ascend strictly by
//! epoch and by start offset. A follower asks its leader for the end offset
//! of its latest epoch (OffsetForLeaderEpoch, [`LeaderEpochCache::end_offset_for`])
//! and truncates its log there, so a failover never leaves diverging logs.
//!
//! File layout (Kafka's `LeaderEpochCheckpointFile` through `CheckpointFile`;
//! UTF-8 text, `\n` line ends):
//!
//! ```text
//! 0              version
//! 2              number of entries
//! 0 0            epoch (int32) SP start offset (int64), oldest first
//! 3 1200
//! ```
//!
//! Reading follows Kafka's reader: an empty file, or one with only the
//! version line, holds no entries; an unknown version, a malformed line or a
//! count that does not match the lines is an error (the log then rebuilds
//! the cache from its batch headers, see `replication.rs`).
//!
//! Crash behaviour: every change is written to `leader-epoch-checkpoint.tmp`,
//! fsynced, renamed over the file and the directory fsynced, so the file is
//! always one whole version. A new entry is written before the batches that
//! carry it (as Kafka does), so after a crash the file may hold entries past
//! the recovered log end: opening the log truncates them away. That cut (and
//! a cache rebuilt at open) is written with the log's next flush, not at once
//! (`defer_flush`): a crash before then makes the same cut again.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{LogError, Result};

/// Name of the file in the partition directory.
pub const CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// Version line of the file.
pub const CHECKPOINT_VERSION: i32 = 0;
/// Kafka's UNDEFINED_EPOCH (OffsetForLeaderEpoch "no such epoch").
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's UNDEFINED_EPOCH_OFFSET.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One (epoch, start offset) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// Encodes the file's bytes (layout in the module doc).
pub fn encode(entries: &[EpochEntry]) -> String {
    let mut s = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for e in entries {
        s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    s
}

/// Decodes the file's text; any deviation is [`LogError::Corrupt`].
pub fn decode(text: &str) -> Result<Vec<EpochEntry>> {
    let bad = |m: String| LogError::Corrupt(format!("{CHECKPOINT_FILE}: {m}"));
    let mut lines = text.lines();
    let Some(version) = lines.next() else {
        return Ok(Vec::new());
    };
    let version: i32 = version
        .parse()
        .map_err(|_| bad(format!("malformed line {version:?}")))?;
    if version != CHECKPOINT_VERSION {
        return Err(bad(format!("unrecognised version {version}")));
    }
    let Some(count) = lines.next() else {
        return Ok(Vec::new());
    };
    let count: usize = count
        .parse()
        .map_err(|_| bad(format!("malformed line {count:?}")))?;
    let mut out = Vec::with_capacity(count.min(1 << 16));
    for line in lines {
        let mut fields = line.split_whitespace();
        let entry = match (fields.next(), fields.next(), fields.next()) {
            (Some(e), Some(o), None) => e.parse().ok().zip(o.parse().ok()),
            _ => None,
        };
        let Some((epoch, start_offset)) = entry else {
            return Err(bad(format!("malformed line {line:?}")));
        };
        out.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    if out.len() != count {
        return Err(bad(format!(
            "expected {count} entries, found {}",
            out.len()
        )));
    }
    Ok(out)
}

/// The cache of one partition, backed by `<dir>/leader-epoch-checkpoint`.
/// Mutators change memory only and report whether anything changed; the
/// caller writes the file with [`LeaderEpochCache::flush`].
#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    /// Ascending by epoch and by start offset.
    entries: Vec<EpochEntry>,
    /// Memory differs from the file by a change whose write may wait (see
    /// [`LeaderEpochCache::defer_flush`]).
    unflushed: bool,
}

impl LeaderEpochCache {
    /// An empty cache for `dir` (nothing read or written).
    pub fn new(dir: &Path) -> LeaderEpochCache {
        LeaderEpochCache {
            path: dir.join(CHECKPOINT_FILE),
            entries: Vec::new(),
            unflushed: false,
        }
    }

    /// Reads the file of `dir`. Ok(None) when it is missing; an unreadable
    /// one is an error (Corrupt for a bad format, Io otherwise). Entries are
    /// re-assigned one by one, as Kafka loads them, so a file breaking the
    /// ordering keeps only a monotonic suffix; a negative epoch or offset is
    /// Corrupt.
    pub fn load(dir: &Path) -> Result<Option<LeaderEpochCache>> {
        let mut cache = LeaderEpochCache::new(dir);
        let text = match fs::read_to_string(&cache.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(LogError::Corrupt(format!("{CHECKPOINT_FILE}: not UTF-8")))
            }
            Err(e) => return Err(e.into()),
        };
        for e in decode(&text)? {
            if e.epoch < 0 || e.start_offset < 0 {
                return Err(LogError::Corrupt(format!(
                    "{CHECKPOINT_FILE}: invalid entry {} {}",
                    e.epoch, e.start_offset
                )));
            }
            cache.assign(e.epoch, e.start_offset);
        }
        Ok(Some(cache))
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset` (Kafka's `assign`): a
    /// no-op when it is the latest epoch already starting at or before that
    /// offset; otherwise entries that would break the ordering (epoch >= it
    /// or start >= it) are dropped from the end first. A negative epoch
    /// (a batch written without one) or offset is not recorded.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                return false;
            }
        }
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// Drops every entry starting at or after `end_offset` (Kafka's
    /// `truncateFromEnd`): the log was cut there.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        if end_offset < 0 {
            return false;
        }
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Drops the entries starting at or before `start_offset` and
    /// re-inserts the last of them starting at `start_offset` (Kafka's
    /// `truncateFromStart`): the log now starts there, inside that epoch.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let n = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if n == 0 {
            return false;
        }
        let epoch = self.entries[n - 1].epoch;
        let changed = n > 1 || self.entries[0].start_offset != start_offset;
        self.entries.drain(..n - 1);
        self.entries[0] = EpochEntry {
            epoch,
            start_offset,
        };
        changed
    }

    /// Forgets every entry.
    pub fn clear(&mut self) -> bool {
        let changed = !self.entries.is_empty();
        self.entries.clear();
        changed
    }

    /// Kafka's `endOffsetFor`: (the largest epoch <= `requested`, the start
    /// offset of the first epoch above `requested`), with these cases:
    ///
    /// * `requested` is UNDEFINED_EPOCH (-1), or above every epoch but not
    ///   the latest (an empty cache included): (-1, -1);
    /// * `requested` is the latest epoch: (requested, `log_end_offset`);
    /// * `requested` is below the first epoch: (requested, the first
    ///   entry's start offset): the data before it is gone, the follower
    ///   truncates to where this log begins.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match higher.checked_sub(1).map(|i| self.entries[i]) {
            None => (requested, next.start_offset),
            Some(floor) => (floor.epoch, next.start_offset),
        }
    }

    /// Leaves a change for a later [`LeaderEpochCache::flush`] (or
    /// [`LeaderEpochCache::flush_if_deferred`]) to write, as Kafka's
    /// `truncateFromEndAsyncFlush` / `truncateFromStartAsyncFlush` do for the
    /// cuts made while a log is loaded: for those only, because they are made
    /// again from the same files if the process dies before the write (the
    /// file may hold entries past the log end, never miss one: every new entry
    /// is written at once). A restart after a kill -9 otherwise spent two
    /// fsyncs per partition rewriting the files of logs that led an epoch
    /// with no record yet.
    pub fn defer_flush(&mut self) {
        self.unflushed = true;
    }

    /// Writes the file when a change was deferred.
    pub fn flush_if_deferred(&mut self) -> Result<()> {
        if self.unflushed {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the file atomically (tmp, fsync, rename, fsync of the dir).
    pub fn flush(&mut self) -> Result<()> {
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(encode(&self.entries).as_bytes())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        self.unflushed = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::new(Path::new("/nonexistent"));
        for &(epoch, start) in entries {
            assert!(c.assign(epoch, start));
        }
        c
    }

    #[test]
    fn file_bytes_match_kafka() {
        let text = encode(&[e(0, 0), e(3, 1200)]);
        assert_eq!(text, "0\n2\n0 0\n3 1200\n");
        assert_eq!(encode(&[]), "0\n0\n");
        assert_eq!(decode(&text).unwrap(), vec![e(0, 0), e(3, 1200)]);
        // Kafka's reader: whitespace runs separate fields; empty / version-only is empty
        assert_eq!(decode("0\n1\n7   99\n").unwrap(), vec![e(7, 99)]);
        assert_eq!(decode("").unwrap(), vec![]);
        assert_eq!(decode("0\n").unwrap(), vec![]);
        for bad in [
            "1\n0\n",
            "x\n",
            "0\n2\n1 1\n",
            "0\n1\n1\n",
            "0\n1\n1 2 3\n",
            "0\n1\na b\n",
        ] {
            assert!(matches!(decode(bad), Err(LogError::Corrupt(_))), "{bad:?}");
        }
    }

    #[test]
    fn assign_keeps_entries_monotonic() {
        let mut c = cache(&[(0, 0), (2, 10)]);
        assert!(!c.assign(2, 15), "same epoch, later offset: no-op");
        assert!(!c.assign(-1, 20), "no epoch: not recorded");
        assert!(c.assign(2, 8), "same epoch, earlier offset: moved back");
        assert_eq!(c.entries(), &[e(0, 0), e(2, 8)]);
        assert!(c.assign(1, 20), "a lower epoch drops the higher ones");
        assert_eq!(c.entries(), &[e(0, 0), e(1, 20)]);
        assert!(c.assign(5, 20), "same start offset replaces the entry");
        assert_eq!(c.entries(), &[e(0, 0), e(5, 20)]);
        assert_eq!(c.latest_epoch(), Some(5));
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let c = cache(&[(1, 10), (3, 20), (6, 40)]);
        let leo = 55;
        assert_eq!(c.end_offset_for(-1, leo), (-1, -1));
        assert_eq!(c.end_offset_for(6, leo), (6, 55));
        assert_eq!(c.end_offset_for(7, leo), (-1, -1));
        assert_eq!(c.end_offset_for(0, leo), (0, 10));
        assert_eq!(c.end_offset_for(1, leo), (1, 20));
        assert_eq!(c.end_offset_for(2, leo), (1, 20));
        assert_eq!(c.end_offset_for(3, leo), (3, 40));
        assert_eq!(c.end_offset_for(5, leo), (3, 40));
        let empty = cache(&[]);
        assert_eq!(empty.end_offset_for(0, leo), (-1, -1));
    }

    #[test]
    fn truncation_from_both_ends() {
        let mut c = cache(&[(1, 10), (3, 20), (6, 40)]);
        assert!(!c.truncate_from_end(41));
        assert!(c.truncate_from_end(40));
        assert_eq!(c.entries(), &[e(1, 10), e(3, 20)]);
        assert!(!c.truncate_from_start(5));
        assert!(!c.truncate_from_start(10));
        assert!(c.truncate_from_start(15));
        assert_eq!(c.entries(), &[e(1, 15), e(3, 20)]);
        assert!(c.truncate_from_start(25));
        assert_eq!(c.entries(), &[e(3, 25)]);
        assert!(c.clear());
        assert!(!c.clear());
    }

    #[test]
    fn flush_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert!(LeaderEpochCache::load(dir.path()).unwrap().is_none());
        let mut c = LeaderEpochCache::new(dir.path());
        c.assign(0, 0);
        c.assign(4, 17);
        c.flush().unwrap();
        let text = fs::read_to_string(dir.path().join(CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n4 17\n");
        assert!(!dir.path().join("leader-epoch-checkpoint.tmp").exists());
        let back = LeaderEpochCache::load(dir.path()).unwrap().unwrap();
        assert_eq!(back.entries(), c.entries());
        fs::write(dir.path().join(CHECKPOINT_FILE), "0\n1\n-1 5\n").unwrap();
        assert!(matches!(
            LeaderEpochCache::load(dir.path()),
            Err(LogError::Corrupt(_))
        ));
    }

    /// Reference model: a map epoch -> start offset, answered by brute force.
    fn model_end_offset(entries: &[(i32, i64)], requested: i32, leo: i64) -> (i32, i64) {
        if requested == -1 {
            return (-1, -1);
        }
        if entries.last().map(|e| e.0) == Some(requested) {
            return (requested, leo);
        }
        let next = entries.iter().find(|e| e.0 > requested);
        let floor = entries.iter().rev().find(|e| e.0 <= requested);
        match (floor, next) {
            (_, None) => (-1, -1),
            (None, Some(n)) => (requested, n.1),
            (Some(f), Some(n)) => (f.0, n.1),
        }
    }

    proptest! {
        #[test]
        fn assign_sequence_stays_sorted_and_answers_like_the_model(
            ops in prop::collection::vec((0i32..8, 0i64..60), 1..30),
            requested in -1i32..10,
        ) {
            let mut c = cache(&[]);
            for (epoch, start) in ops {
                c.assign(epoch, start);
                let es = c.entries();
                prop_assert!(es.windows(2).all(|w| w[0].epoch < w[1].epoch
                    && w[0].start_offset < w[1].start_offset));
                prop_assert!(es.iter().any(|x| x.epoch == epoch));
            }
            let pairs: Vec<(i32, i64)> =
                c.entries().iter().map(|x| (x.epoch, x.start_offset)).collect();
            prop_assert_eq!(c.end_offset_for(requested, 100), model_end_offset(&pairs, requested, 100));
            let text = encode(c.entries());
            prop_assert_eq!(decode(&text).unwrap(), c.entries().to_vec());
        }
    }
}
