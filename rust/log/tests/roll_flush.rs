//! A roll writes its producer snapshot without fsyncing it (the append path):
//! the fsync is left to a flush job run without the log (as Kafka's flush-log
//! job does, KAFKA-15046), or to the next full flush.

mod common;

use std::path::Path;

use pybroker_log::{Log, LogConfig, OpenState};

fn open(dir: &Path) -> Log {
    let config = LogConfig {
        segment_bytes: 2048,
        ..LogConfig::default()
    };
    Log::open(dir, config, OpenState::default()).unwrap()
}

/// Appends batches of 4 records of 200 bytes until the log has rolled `rolls` times.
fn append_until_rolled(log: &mut Log, rolls: usize) {
    let mut ts = 1_000;
    while log.segment_count() < rolls + 1 {
        log.append(&common::batch(4, 200, ts), 0, ts).unwrap();
        ts += 10;
    }
}

#[test]
fn a_roll_leaves_its_snapshot_fsync_to_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    assert!(!log.roll_flush_pending());
    assert!(log.take_roll_flush().unwrap().is_none());
    append_until_rolled(&mut log, 2);
    assert!(log.roll_flush_pending());
    let job = log.take_roll_flush().unwrap().expect("a job");
    assert!(!log.roll_flush_pending());
    job.sync().unwrap();
    assert!(log.take_roll_flush().unwrap().is_none());
    // the snapshots written at the rolls are there, whole
    let snapshots = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("snapshot".as_ref()))
        .count();
    assert_eq!(snapshots, 2);
}

#[test]
fn a_full_flush_also_syncs_the_rolls_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    append_until_rolled(&mut log, 1);
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), log.log_end_offset());
    assert!(!log.roll_flush_pending());
}
