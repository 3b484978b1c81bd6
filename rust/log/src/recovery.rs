//! Opening a partition directory: listing, leftover cleanup, recovery.
//!
//! Directory contents we act on (anything else, e.g. `leader-epoch-checkpoint`,
//! `partition.metadata`, `*.snapshot`, is left alone):
//!
//! * `<20 digits>.log` — a segment; its `.index` / `.timeindex` are created
//!   (and rebuilt from the log) when missing.
//! * `*.deleted` — a segment file scheduled for deletion: removed.
//! * `*.cleaned` — output of an unfinished compaction that never reached the
//!   swap step: removed (the originals are still live).
//! * `*.log.swap` — a compaction result whose swap was interrupted after it
//!   was complete: renamed over the live `.log`, its indexes (and any
//!   `.index.swap` / `.timeindex.swap`) removed and rebuilt from the log.
//!   Live segments whose base offset falls inside the swapped segment's
//!   offset range are deleted (they were its inputs). A `X.txnindex.swap`
//!   goes live with its `X.log.swap`, and is removed when there is none.
//! * `<20 digits>.index|.timeindex|.txnindex` without a `.log` — removed.
//!
//! Unclean open (`clean_shutdown == false`): every segment from the one
//! holding `recovery_point` on is scanned batch by batch (length, magic,
//! CRC-32C, record count, offsets ascending and fitting the segment); the
//! `.log` is truncated at the first bad byte, all later segments are deleted,
//! and both indexes are rebuilt from the scan. Segments before it are loaded
//! as on a clean open.
//!
//! Clean open: indexes are loaded as they are, then sanity-checked (the last
//! offset index entry must point at a batch whose last offset is the entry's
//! offset); an inconsistent segment is recovered as above. The log end offset
//! comes from the last segment's tail: last index entry, then a header scan.
//!
//! Crash behaviour: recovery itself only truncates and rewrites indexes, so it
//! can be interrupted and rerun; a partial rename of a `.swap` is redone.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::batch;
use crate::error::{LogError, Result};
use crate::file_cache::FileCache;
use crate::segment::{file_name, Segment};

/// What a directory scan found, before segments are opened.
#[derive(Debug, Default)]
struct Listing {
    bases: Vec<i64>,
    /// Segments whose indexes must be rebuilt (missing or swapped in).
    rebuild: Vec<i64>,
    /// Swapped-in segments (their offset ranges replace older segments).
    swapped: Vec<i64>,
}

fn parse_base(name: &str, ext: &str) -> Option<i64> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok())?
}

fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// The dir's entries, the dir created first when missing (a new log): an
/// existing dir, the common case at a restart, costs no mkdir.
fn read_dir_or_create(dir: &Path) -> Result<std::fs::ReadDir> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            Ok(std::fs::read_dir(dir)?)
        }
        other => Ok(other?),
    }
}

fn list_dir(dir: &Path) -> Result<Listing> {
    let mut names: Vec<String> = Vec::new();
    for e in read_dir_or_create(dir)? {
        let e = e?;
        if let Ok(n) = e.file_name().into_string() {
            names.push(n);
        }
    }
    let mut l = Listing::default();
    let mut txn_swaps = Vec::new();
    for n in &names {
        if n.ends_with(".deleted") || n.ends_with(".cleaned") {
            remove(&dir.join(n))?;
        } else if let Some(live) = n.strip_suffix(".swap") {
            if let Some(base) = parse_base(live, "log") {
                std::fs::rename(dir.join(n), dir.join(live))?;
                remove(&dir.join(file_name(base, "index")))?;
                remove(&dir.join(file_name(base, "timeindex")))?;
                l.swapped.push(base);
                l.rebuild.push(base);
            } else if let Some(base) = parse_base(live, "txnindex") {
                txn_swaps.push((base, n));
            } else {
                remove(&dir.join(n))?;
            }
        }
    }
    // The cleaner renames `X.txnindex.swap` before `X.log.swap` and puts it
    // live before the log: with the log's swap pending it belongs to it,
    // without it the clean never reached its commit point.
    for (base, n) in txn_swaps {
        if l.swapped.contains(&base) {
            std::fs::rename(dir.join(n), dir.join(file_name(base, "txnindex")))?;
        } else {
            remove(&dir.join(n))?;
        }
    }
    for n in &names {
        if let Some(base) = parse_base(n, "log") {
            if !l.bases.contains(&base) {
                l.bases.push(base);
            }
        }
    }
    for b in &l.swapped {
        if !l.bases.contains(b) {
            l.bases.push(*b);
        }
    }
    // Which indexes exist is told by the listing, not a stat per file (a
    // restart opens thousands of logs). The only index files removed since it
    // was taken are swapped-in segments' (above), already to be rebuilt.
    let mut indexed: HashSet<(i64, &str)> = HashSet::new();
    for n in &names {
        if let Some(base) = parse_base(n, "txnindex") {
            if !l.bases.contains(&base) {
                remove(&dir.join(n))?;
            }
        }
        for ext in ["index", "timeindex"] {
            if let Some(base) = parse_base(n, ext) {
                if !l.bases.contains(&base) {
                    remove(&dir.join(n))?;
                } else {
                    indexed.insert((base, ext));
                }
            }
        }
    }
    for &b in &l.bases {
        for ext in ["index", "timeindex"] {
            if !indexed.contains(&(b, ext)) && !l.rebuild.contains(&b) {
                l.rebuild.push(b);
            }
        }
    }
    l.bases.sort_unstable();
    Ok(l)
}

/// Scans the whole segment, validating every batch; truncates the `.log` at
/// the first bad byte and rebuilds both indexes. Returns true when bytes were
/// cut off. The segment must be activated (indexes preallocated) first.
pub fn recover_segment(seg: &mut Segment) -> Result<bool> {
    let base = seg.base_offset();
    seg.offset_index.clear();
    seg.time_index.clear();
    seg.next_offset = base;
    seg.max_timestamp = -1;
    seg.offset_of_max_timestamp = base;
    seg.first_batch_timestamp = None;
    seg.bytes_since_last_index_entry = 0;
    let size = seg.size();
    let mut pos = 0u64;
    if size > 0 {
        seg.prepare_indexes()?;
        let file = seg.file()?;
        // SAFETY: the mapping is read-only and dropped before the file is
        // truncated below; only this process writes the partition directory.
        let map = unsafe { Mmap::map(&*file)? };
        while (pos as usize) < map.len() {
            let h = match batch::check_stored_batch(&map[pos as usize..]) {
                Ok(h) => h,
                Err(LogError::Io(e)) => return Err(LogError::Io(e)),
                Err(_) => break,
            };
            let in_range = h.base_offset >= seg.next_offset
                && h.last_offset() - base <= i32::MAX as i64
                && pos <= i32::MAX as u64;
            if !in_range {
                break;
            }
            seg.track_batch(pos, &h);
            pos += h.size() as u64;
        }
    }
    let truncated = pos < size;
    if truncated {
        seg.truncate_log(pos)?;
    }
    Ok(truncated)
}

/// Clean-open loading of a segment: sanity check of the last offset index
/// entry, then a header scan of the tail (or, for non-last segments, of
/// nothing). Errors mean "recover this segment".
fn load_segment(seg: &mut Segment, scan_tail: bool) -> Result<()> {
    let (start_pos, indexed) = match seg.offset_index.last_entry() {
        Some((off, pos)) => {
            match seg.header_at(pos as u64)? {
                Some(h) if h.last_offset() == off => {}
                _ => {
                    return Err(LogError::Corrupt(
                        "offset index does not match the log".into(),
                    ))
                }
            }
            (pos as u64, true)
        }
        None => (0, false),
    };
    if let Some((_, off)) = seg.time_index.last_entry() {
        if off < seg.base_offset() {
            return Err(LogError::Corrupt(
                "time index does not match the log".into(),
            ));
        }
    }
    if seg.size() > 0 {
        let first = seg
            .header_at(0)?
            .ok_or_else(|| LogError::Corrupt("empty".into()))?;
        seg.first_batch_timestamp = Some(first.max_timestamp);
        seg.next_offset = first.next_offset();
    }
    if scan_tail {
        let mut pos = start_pos;
        while let Some(h) = seg.header_at(pos)? {
            if h.max_timestamp > seg.max_timestamp {
                seg.max_timestamp = h.max_timestamp;
                seg.offset_of_max_timestamp = h.last_offset();
            }
            seg.next_offset = h.next_offset();
            pos += h.size() as u64;
        }
    }
    seg.bytes_since_last_index_entry = if indexed {
        seg.size() - start_pos
    } else {
        seg.size()
    };
    Ok(())
}

/// The loaded segments and the log end offset.
pub struct Loaded {
    pub segments: BTreeMap<i64, Segment>,
    pub log_end_offset: i64,
    /// Bytes recovery cut off: the torn or corrupt tail of the segment where
    /// the scan stopped, and every later segment (deleted with it).
    pub truncated_bytes: u64,
}

/// Opens every segment of `dir`, recovering as the module doc describes.
/// The last segment is left activated (indexes preallocated).
pub fn load(
    dir: &Path,
    index_interval_bytes: u64,
    segment_index_bytes: u64,
    recovery_point: i64,
    clean_shutdown: bool,
    now_ms: i64,
    files: &Arc<FileCache>,
) -> Result<Loaded> {
    let listing = list_dir(dir)?;
    let mut segments = BTreeMap::new();
    for &b in &listing.bases {
        segments.insert(
            b,
            Segment::open(dir, b, index_interval_bytes, now_ms, files)?,
        );
    }
    let first_recover = if clean_shutdown {
        i64::MAX
    } else {
        segments
            .range(..=recovery_point)
            .next_back()
            .map(|(b, _)| *b)
            .unwrap_or(i64::MIN)
    };
    let bases: Vec<i64> = segments.keys().copied().collect();
    let mut cut_at: Option<usize> = None;
    let mut truncated_bytes = 0u64;
    for (i, b) in bases.iter().enumerate() {
        let last = i + 1 == bases.len();
        let seg = segments.get_mut(b).unwrap();
        let mut recover = *b >= first_recover || listing.rebuild.contains(b);
        if !recover {
            match load_segment(seg, last) {
                Ok(()) => {}
                Err(LogError::Io(e)) => return Err(LogError::Io(e)),
                Err(_) => recover = true,
            }
        }
        if recover {
            seg.activate(segment_index_bytes)?;
            let size = seg.size();
            if recover_segment(seg)? {
                truncated_bytes += size - seg.size();
                cut_at = Some(i + 1);
                break;
            }
        }
        if !last {
            seg.deactivate()?;
        }
    }
    if let Some(i) = cut_at {
        for b in &bases[i..] {
            if let Some(s) = segments.remove(b) {
                truncated_bytes += s.size();
                s.delete_files()?;
            }
        }
    }
    // Swapped-in segments replace live segments inside their offset range.
    for &sw in &listing.swapped {
        let next = match segments.get(&sw) {
            Some(s) if s.next_offset() > sw => s.next_offset(),
            _ => continue,
        };
        let inside: Vec<i64> = segments.range(sw + 1..next).map(|(b, _)| *b).collect();
        for b in inside {
            if let Some(s) = segments.remove(&b) {
                s.delete_files()?;
            }
        }
    }
    let log_end_offset = match segments.iter_mut().next_back() {
        Some((_, s)) => {
            s.activate(segment_index_bytes)?;
            s.next_offset()
        }
        None => 0,
    };
    Ok(Loaded {
        segments,
        log_end_offset,
        truncated_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_base_needs_20_digits() {
        assert_eq!(parse_base("00000000000000000042.log", "log"), Some(42));
        assert_eq!(parse_base("00000000000000000042.index", "log"), None);
        assert_eq!(parse_base("42.log", "log"), None);
        assert_eq!(parse_base("0000000000000000004x.log", "log"), None);
    }
}
