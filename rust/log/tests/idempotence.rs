//! Idempotent producer checks through `Log::append`, and the producer state
//! across clean and unclean restarts, rolls and truncation.

use std::path::Path;

use proptest::prelude::*;
use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::producer_state::list_snapshots;
use pybroker_log::{Log, LogConfig, LogError, OpenState};

fn pbatch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, 1000).producer(pid, epoch, seq);
    for i in 0..n {
        b.push(Record::new(1000 + i as i64, Some(b"k"), Some(b"value")));
    }
    b.build()
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 128,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, clean: bool, recovery_point: i64) -> Log {
    let state = OpenState {
        clean_shutdown: clean,
        recovery_point,
        ..OpenState::default()
    };
    Log::open(dir, config(), state).unwrap()
}

#[test]
fn duplicate_returns_original_offsets_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), false, 0);
    log.append(&pbatch(-1, -1, -1, 2), 0, 1).unwrap();
    let a = log.append(&pbatch(5, 0, 0, 3), 0, 1).unwrap();
    assert_eq!((a.base_offset, a.last_offset, a.duplicate_count), (2, 4, 0));
    let size = log.size_bytes();
    let d = log.append(&pbatch(5, 0, 0, 3), 0, 1).unwrap();
    assert_eq!((d.base_offset, d.last_offset), (2, 4));
    assert_eq!(
        (d.batch_count, d.record_count, d.duplicate_count),
        (0, 0, 1)
    );
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.size_bytes(), size);
    // gap, stale epoch: rejected, nothing written
    assert!(matches!(
        log.append(&pbatch(5, 0, 7, 1), 0, 1),
        Err(LogError::OutOfOrderSequence(_))
    ));
    let mut two = pbatch(5, 0, 3, 1);
    two.extend_from_slice(&pbatch(5, 0, 9, 1));
    assert!(matches!(
        log.append(&two, 0, 1),
        Err(LogError::OutOfOrderSequence(_))
    ));
    assert_eq!(log.log_end_offset(), 5);
    // several batches per request, with a duplicate inside the request
    let mut req = pbatch(5, 0, 0, 3); // duplicate of the cached batch
    req.extend_from_slice(&pbatch(5, 0, 3, 2));
    req.extend_from_slice(&pbatch(5, 0, 3, 2)); // duplicate of the previous one
    req.extend_from_slice(&pbatch(6, 0, 0, 1));
    let r = log.append(&req, 0, 1).unwrap();
    assert_eq!((r.base_offset, r.last_offset), (2, 7));
    assert_eq!(
        (r.batch_count, r.duplicate_count, r.record_count),
        (2, 2, 3)
    );
    assert_eq!(log.log_end_offset(), 8);
    assert!(matches!(
        log.append(&pbatch(5, -1, 5, 1), 0, 1),
        Err(LogError::InvalidProducerEpoch(_))
    ));
}

fn fill(log: &mut Log, pid: i64, from_seq: i32, batches: i32) -> i32 {
    let mut seq = from_seq;
    for _ in 0..batches {
        log.append(&pbatch(pid, 0, seq, 2), 0, 1).unwrap();
        seq += 2;
    }
    seq
}

#[test]
fn state_survives_clean_restart_and_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), false, 0);
    let seq = fill(&mut log, 1, 0, 12);
    assert!(log.segment_count() > 2);
    let snaps = list_snapshots(dir.path()).unwrap();
    assert!(!snaps.is_empty() && snaps.len() <= 3);
    let leo = log.log_end_offset();
    log.close().unwrap();
    assert_eq!(list_snapshots(dir.path()).unwrap().last().unwrap().0, leo);
    let mut log = open(dir.path(), true, leo);
    // retry of the last batch: duplicate; gap: error; next: ok
    let d = log.append(&pbatch(1, 0, seq - 2, 2), 0, 1).unwrap();
    assert_eq!((d.duplicate_count, d.base_offset), (1, leo - 2));
    assert!(log.append(&pbatch(1, 0, seq + 1, 2), 0, 1).is_err());
    log.append(&pbatch(1, 0, seq, 2), 0, 1).unwrap();
}

#[test]
fn state_survives_unclean_restart_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), false, 0);
    let seq = fill(&mut log, 1, 0, 12);
    let leo = log.log_end_offset();
    drop(log); // no close: no snapshot at the log end
    assert!(list_snapshots(dir.path()).unwrap().last().unwrap().0 < leo);
    let mut log = open(dir.path(), false, 0);
    // the last five batches are known again (rebuilt from batch headers)
    for k in 1..=5 {
        let s = seq - 2 * k;
        let d = log.append(&pbatch(1, 0, s, 2), 0, 1).unwrap();
        assert_eq!((d.duplicate_count, d.base_offset), (1, leo - 2 * k as i64));
    }
    assert!(log.append(&pbatch(1, 0, seq - 12, 2), 0, 1).is_err());
    // without any snapshot, the whole log is replayed
    drop(log);
    for (_, p) in list_snapshots(dir.path()).unwrap() {
        std::fs::remove_file(p).unwrap();
    }
    let mut log = open(dir.path(), false, 0);
    assert_eq!(
        log.append(&pbatch(1, 0, seq - 2, 2), 0, 1)
            .unwrap()
            .duplicate_count,
        1
    );
    log.append(&pbatch(1, 0, seq, 2), 0, 1).unwrap();
}

#[test]
fn truncation_rewinds_the_state_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), false, 0);
    fill(&mut log, 1, 0, 12);
    log.truncate_to(10, 1).unwrap();
    assert_eq!(log.log_end_offset(), 10);
    assert!(list_snapshots(dir.path())
        .unwrap()
        .iter()
        .all(|(o, _)| *o <= 10));
    // the producer's last batch is now seq 8-9
    assert_eq!(
        log.append(&pbatch(1, 0, 8, 2), 0, 1)
            .unwrap()
            .duplicate_count,
        1
    );
    log.append(&pbatch(1, 0, 10, 2), 0, 1).unwrap();
    log.truncate_to(-5, 1).unwrap_or(());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Whatever the restart kind, a producer that retries its last batch
    /// after a restart gets its original offset back.
    #[test]
    fn retry_after_restart_is_a_duplicate(batches in 1i32..30, clean in any::<bool>(), producers in 1i64..4) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), false, 0);
        let mut last = Vec::new();
        for p in 0..producers {
            let mut seq = 0;
            let mut off = 0;
            for _ in 0..batches {
                off = log.append(&pbatch(p, 3, seq, 2), 0, 1).unwrap().base_offset;
                seq += 2;
            }
            last.push((seq, off));
        }
        if clean {
            log.close().unwrap();
        } else {
            drop(log);
        }
        let mut log = open(dir.path(), clean, 0);
        for (p, (seq, off)) in last.iter().enumerate() {
            let d = log.append(&pbatch(p as i64, 3, seq - 2, 2), 0, 1).unwrap();
            prop_assert_eq!((d.duplicate_count, d.base_offset), (1, *off));
            let n = log.append(&pbatch(p as i64, 3, *seq, 2), 0, 1).unwrap();
            prop_assert_eq!(n.duplicate_count, 0);
        }
    }
}
