//! Logs under an open-file budget far below their segment count
//! (`file_cache.rs`): every operation works on a segment whose `.log` file
//! the budget closed, reopening it, and nothing written is lost across
//! evictions, flushes, rolls, truncation, deletion, compaction and recovery.

use std::path::Path;
use std::sync::Arc;

use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::cleaner::CleanConfig;
use pybroker_log::codec::{self, RecordIter};
use pybroker_log::{FileCache, Log, LogConfig, OpenState};

const NOW: i64 = 1_700_000_000_000;
const LOGS: usize = 8;
const BUDGET: usize = 2;

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 100,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, files: &Arc<FileCache>, segment_bytes: u64, clean: bool, rp: i64) -> Log {
    let state = OpenState {
        clean_shutdown: clean,
        recovery_point: rp,
        now_ms: NOW,
        ..OpenState::default()
    };
    Log::open_with_files(dir, config(segment_bytes), state, files.clone()).unwrap()
}

fn keyed(key: &str, value: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, NOW);
    b.push(Record::new(
        NOW,
        Some(key.as_bytes()),
        Some(value.as_bytes()),
    ));
    b.build()
}

/// (offset, key, value) of every record from the log start, read through
/// `Log::read` (which reopens closed segment files).
fn contents(log: &Log) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while let Some(slice) = log.read(next, 1 << 20, true, None).unwrap() {
        let bytes = slice.read().unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let (h, data) = codec::batch_records(&bytes[pos..], usize::MAX).unwrap();
            for r in RecordIter::new(h, &data) {
                let r = r.unwrap();
                let s = |b: Option<&[u8]>| String::from_utf8(b.unwrap().to_vec()).unwrap();
                out.push((r.offset, s(r.key), s(r.value)));
            }
            pos += h.size();
            next = h.next_offset();
        }
    }
    out
}

struct Logs {
    _dirs: Vec<tempfile::TempDir>,
    logs: Vec<Log>,
    files: Arc<FileCache>,
}

/// `LOGS` logs under a budget of `BUDGET` open files, each written
/// `rounds` times round-robin: every append reopens a file the budget
/// closed since.
fn written(rounds: usize, segment_bytes: u64) -> Logs {
    let files = FileCache::new(BUDGET, 1);
    let dirs: Vec<_> = (0..LOGS).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut logs: Vec<Log> = dirs
        .iter()
        .map(|d| open(d.path(), &files, segment_bytes, false, 0))
        .collect();
    for round in 0..rounds {
        for (i, log) in logs.iter_mut().enumerate() {
            log.append(
                &keyed(&format!("k{}", round % 3), &format!("{i}-{round}")),
                0,
                NOW,
            )
            .unwrap();
            assert!(files.open_files() <= BUDGET);
        }
    }
    Logs {
        _dirs: dirs,
        logs,
        files,
    }
}

fn expected(i: usize, rounds: usize) -> Vec<(i64, String, String)> {
    (0..rounds)
        .map(|r| (r as i64, format!("k{}", r % 3), format!("{i}-{r}")))
        .collect()
}

#[test]
fn appends_and_reads_reopen_evicted_files() {
    let w = written(20, 1 << 20);
    assert!(w.files.evictions() > 100, "the budget closed files");
    for (i, log) in w.logs.iter().enumerate() {
        assert_eq!(contents(log), expected(i, 20));
        assert!(w.files.open_files() <= BUDGET);
    }
}

#[test]
fn flush_of_an_evicted_file_needs_no_descriptor_and_loses_nothing() {
    let mut w = written(5, 1 << 20);
    assert!(
        w.files.synced_evictions() > 0,
        "dirty files were fsynced before closing"
    );
    // the first log's files were closed (fsynced) long ago: its flush opens nothing
    let first = &mut w.logs[0];
    assert!(!first.segments().any(|s| s.is_file_open()));
    first.flush().unwrap();
    assert_eq!(first.recovery_point(), 5);
    assert!(!first.segments().any(|s| s.is_file_open()));
    // the last one is open and dirty: its flush fsyncs it in place
    let last = w.logs.last_mut().unwrap();
    assert!(last.segments().any(|s| s.is_file_open()));
    last.flush().unwrap();
    assert_eq!(last.recovery_point(), 5);
}

#[test]
fn rolls_close_and_clean_reopen_across_evictions() {
    // about 80 bytes a batch: a roll every few appends
    let mut w = written(30, 300);
    let dirs: Vec<_> = w.logs.iter().map(|l| l.dir().to_path_buf()).collect();
    for (i, log) in w.logs.iter_mut().enumerate() {
        assert!(log.segment_count() > 5);
        assert_eq!(contents(log), expected(i, 30));
        log.close().unwrap();
    }
    for (i, d) in dirs.iter().enumerate() {
        let log = open(d, &w.files, 300, true, 30);
        assert_eq!(log.log_end_offset(), 30);
        assert_eq!(contents(&log), expected(i, 30));
        assert!(w.files.open_files() <= BUDGET);
    }
}

#[test]
fn unclean_recovery_under_the_budget() {
    let w = written(30, 300);
    let dirs: Vec<_> = w.logs.iter().map(|l| l.dir().to_path_buf()).collect();
    // a partial batch at the end of every active segment, as a crash leaves
    for d in &dirs {
        let mut last = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect::<Vec<_>>();
        last.sort();
        let p = last.pop().unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.extend_from_slice(&keyed("torn", "x")[..30]);
        std::fs::write(&p, bytes).unwrap();
    }
    drop(w.logs);
    let files = FileCache::new(BUDGET, 1);
    for (i, d) in dirs.iter().enumerate() {
        let log = open(d, &files, 300, false, 0);
        assert_eq!(log.log_end_offset(), 30);
        assert_eq!(contents(&log), expected(i, 30));
        assert!(files.open_files() <= BUDGET);
    }
}

#[test]
fn truncation_of_an_evicted_segment_then_append() {
    let mut w = written(10, 1 << 20);
    let log = &mut w.logs[0];
    assert!(!log.segments().any(|s| s.is_file_open()));
    log.truncate_to(6, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    log.append(&keyed("k9", "after"), 0, NOW).unwrap();
    let mut want = expected(0, 6);
    want.push((6, "k9".into(), "after".into()));
    assert_eq!(contents(log), want);
    // and with the file closed again in between
    for other in w.logs.iter_mut().skip(1) {
        other.append(&keyed("x", "y"), 0, NOW).unwrap();
    }
    let log = &mut w.logs[0];
    assert!(!log.segments().any(|s| s.is_file_open()));
    assert_eq!(contents(log), want);
}

#[test]
fn deletion_of_evicted_segments() {
    let mut w = written(30, 300);
    let log = &mut w.logs[3];
    let before = log.segment_count();
    assert!(log.segments().filter(|s| !s.is_file_open()).count() > 3);
    let deleted = log.advance_log_start_offset(20).unwrap();
    assert!(deleted > 0 && log.segment_count() == before - deleted);
    assert_eq!(contents(log), expected(3, 30)[20..].to_vec());
    let log = &mut w.logs[4];
    log.truncate_fully_and_start_at(100, NOW).unwrap();
    log.append(&keyed("k", "fresh"), 0, NOW).unwrap();
    assert_eq!(contents(log), vec![(100, "k".into(), "fresh".into())]);
}

#[test]
fn compaction_of_evicted_segments() {
    let mut w = written(30, 300);
    for log in w.logs.iter_mut() {
        log.roll(NOW).unwrap();
    }
    for (i, log) in w.logs.iter_mut().enumerate() {
        let cfg = CleanConfig {
            now_ms: NOW,
            ..CleanConfig::default()
        };
        let stats = log.clean(0, cfg).unwrap();
        assert!(stats.records_removed > 0);
        // the last value of each of the three keys survives
        let got = contents(log);
        let want: Vec<_> = expected(i, 30)[27..].to_vec();
        assert_eq!(got, want);
        assert!(w.files.open_files() <= BUDGET + 1);
    }
}

#[test]
fn file_slices_stay_readable_after_their_file_is_evicted() {
    let files = FileCache::new(1, 4);
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut logs: Vec<Log> = dirs
        .iter()
        .map(|d| open(d.path(), &files, 1 << 20, false, 0))
        .collect();
    let big = "v".repeat(40_000); // above the copy threshold: the slice holds the file
    logs[0].append(&keyed("k", &big), 0, NOW).unwrap();
    let slice = logs[0].read(0, 1 << 20, true, None).unwrap().unwrap();
    assert!(slice.file().is_some());
    // a dirty file still held is not closed (the holder might be writing)
    logs[1].append(&keyed("k", "x"), 0, NOW).unwrap();
    assert!(logs[0].segments().any(|s| s.is_file_open()));
    logs[0].flush().unwrap();
    logs[1].append(&keyed("k", "x"), 0, NOW).unwrap();
    logs[2].append(&keyed("k", "x"), 0, NOW).unwrap();
    assert!(!logs[0].segments().any(|s| s.is_file_open()));
    let bytes = slice.read().unwrap();
    assert_eq!(bytes.len() as u64, slice.length);
    // a small slice carries its bytes and holds no descriptor
    let small = logs[1].read(0, 1 << 20, true, None).unwrap().unwrap();
    assert!(small.file().is_none());
    assert_eq!(small.read().unwrap().len() as u64, small.length);
}
