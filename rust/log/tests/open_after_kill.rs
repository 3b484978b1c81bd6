//! Opening the logs a killed broker left: what the open reads.
//!
//! An active segment's indexes are preallocated (10 MiB by default) and stay
//! so after a kill -9. Their open maps them and scans up to the first unused
//! entry; that scan must read the pages it looks at, not the device's
//! read-ahead window of a file that is mostly holes (8 MiB on the bench
//! machine: a restart with thousands of partitions read gigabytes of zeros).

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::{Log, LogConfig, OpenState};

const NOW: i64 = 1_700_000_000_000;
const PAGE: usize = 4096;

/// Pages of the file in the page cache (mincore over a fresh read-only map).
fn resident_pages(path: &Path) -> usize {
    let file = File::open(path).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    assert!(len > 0);
    // SAFETY: a read-only private mapping of a file nothing else writes now;
    // unmapped below, and mincore only reports residency.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED);
        let mut vec = vec![0u8; len.div_ceil(PAGE)];
        assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
        libc::munmap(addr, len);
        vec.iter().filter(|b| **b & 1 == 1).count()
    }
}

/// Writes the file's dirty pages and drops its pages from the page cache.
fn evict(path: &Path) {
    let file = File::open(path).unwrap();
    file.sync_all().unwrap();
    // SAFETY: plain syscall on an open descriptor.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

fn open(dir: &Path, clean_shutdown: bool) -> Log {
    let state = OpenState {
        clean_shutdown,
        now_ms: NOW,
        ..OpenState::default()
    };
    Log::open(dir, LogConfig::default(), state).unwrap()
}

#[test]
fn reopening_preallocated_indexes_reads_only_what_it_scans() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    // enough bytes for index entries (one per index.interval.bytes, 4096): the
    // indexes are preallocated once they hold one
    for _ in 0..4 {
        let mut b = BatchBuilder::new(0, NOW);
        b.push(Record::new(NOW, Some(b"k"), Some(&[b'v'; 5000])));
        log.append(&b.build(), 0, NOW).unwrap();
    }
    drop(log); // a kill -9: no close, the indexes stay preallocated
    let indexes = [
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ];
    for name in indexes {
        let path = dir.path().join(name);
        assert!(
            std::fs::metadata(&path).unwrap().len() > 1 << 20,
            "{name} preallocated"
        );
        evict(&path);
    }
    let log = open(dir.path(), false);
    assert_eq!(log.log_end_offset(), 4);
    for name in indexes {
        let pages = resident_pages(&dir.path().join(name));
        // the scan stops at the first unused entry: a page or two, where the
        // read-ahead window is 32 pages at the kernel's default and more on
        // virtual disks
        assert!(pages <= 4, "{name}: {pages} pages read in at open");
    }
}

/// Appends `n` one-record batches of 1,000-byte values.
fn fill(log: &mut Log, n: usize) {
    for _ in 0..n {
        let mut b = BatchBuilder::new(0, NOW);
        b.push(Record::new(NOW, Some(b"k"), Some(&[b'v'; 1000])));
        log.append(&b.build(), 0, NOW).unwrap();
    }
}

#[test]
fn a_recovery_reports_the_torn_tail_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true);
    fill(&mut log, 3);
    let (end, size) = (log.log_end_offset(), log.size_bytes());
    drop(log); // a kill -9
    let segment = dir.path().join("00000000000000000000.log");
    let mut torn = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    std::io::Write::write_all(&mut torn, &[7u8; 37]).unwrap();
    drop(torn);
    let log = open(dir.path(), false);
    assert_eq!(log.truncated_at_open(), 37);
    assert_eq!((log.log_end_offset(), log.size_bytes()), (end, size));
    drop(log);
    // a clean open, and a recovery that finds every batch whole, cut nothing
    assert_eq!(open(dir.path(), false).truncated_at_open(), 0);
    assert_eq!(open(dir.path(), true).truncated_at_open(), 0);
}

#[test]
fn a_recovery_counts_the_later_segments_it_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 2500, // two ~1 KB batches a segment
        ..LogConfig::default()
    };
    let state = |clean_shutdown| OpenState {
        clean_shutdown,
        now_ms: NOW,
        ..OpenState::default()
    };
    let mut log = Log::open(dir.path(), config.clone(), state(true)).unwrap();
    fill(&mut log, 6);
    let total = log.size_bytes();
    assert!(log.segment_count() >= 3);
    drop(log);
    // the first segment's second batch corrupt: it and every later segment go
    let first = dir.path().join("00000000000000000000.log");
    let mut data = std::fs::read(&first).unwrap();
    let len = data.len();
    let batch = len / 2;
    data[batch + 20] ^= 0xff; // inside the second batch (past its length field)
    std::fs::write(&first, &data).unwrap();
    let log = Log::open(dir.path(), config, state(false)).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.size_bytes(), batch as u64);
    assert_eq!(log.truncated_at_open(), total - batch as u64);
}
