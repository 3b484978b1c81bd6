//! Exact on-disk bytes, as Kafka's DumpLogSegments expects them: file names,
//! index entry layouts, preallocation and trimming.

mod common;

use pybroker_log::{Log, LogConfig, OpenState};

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn segment_files_match_kafka_layout() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 4000,
        index_interval_bytes: 100,
        segment_index_bytes: 1000, // -> 1000 (.index, 125 entries), 996 (.timeindex)
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg.clone(), OpenState::default()).unwrap();
    let b = common::batch(2, 60, 5_000); // 2 records per batch
    let size = b.len() as u64;
    assert!(size > 100);
    let p = |name: &str| dir.path().join(name);
    assert_eq!(
        std::fs::metadata(p("00000000000000000000.index"))
            .unwrap()
            .len(),
        1000
    );
    assert_eq!(
        std::fs::metadata(p("00000000000000000000.timeindex"))
            .unwrap()
            .len(),
        996
    );
    let per_segment = 4000 / size;
    for _ in 0..per_segment + 1 {
        log.append(&b, 0, 0).unwrap();
    }
    assert_eq!(log.segment_count(), 2);
    let second = 2 * per_segment as i64;
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // Kafka also writes the producer state snapshot at the new base offset.
    let mut want: Vec<String> = [0, second]
        .iter()
        .flat_map(|o| ["index", "log", "timeindex"].map(|e| format!("{o:020}.{e}")))
        .collect();
    want.push(format!("{second:020}.snapshot"));
    // ... and the leader-epoch cache: epoch 0 starts at offset 0.
    want.push("leader-epoch-checkpoint".into());
    want.sort();
    assert_eq!(names, want);
    assert_eq!(
        std::fs::read_to_string(p("leader-epoch-checkpoint")).unwrap(),
        "0\n1\n0 0\n"
    );

    // The rolled segment: indexes trimmed to their entries.
    let index = std::fs::read(p("00000000000000000000.index")).unwrap();
    let timeindex = std::fs::read(p("00000000000000000000.timeindex")).unwrap();
    // Kafka: entry for batch i (i >= 1) since > 100 bytes were written since
    // the last one: (batch last offset - base, batch position).
    assert_eq!(index.len(), 8 * (per_segment as usize - 1));
    for (i, e) in index.chunks(8).enumerate() {
        let batch_no = i as i64 + 1;
        assert_eq!(be_i32(e, 0) as i64, 2 * batch_no + 1);
        assert_eq!(be_i32(e, 4) as u64, batch_no as u64 * size);
    }
    // Time index: (max timestamp so far, offset of it) whenever it grows; all
    // batches carry timestamps 5000/5001, so one entry at the second batch.
    assert_eq!(timeindex.len(), 12);
    assert_eq!(be_i64(&timeindex, 0), 5_001);
    assert_eq!(be_i32(&timeindex, 8), 1);

    // The active segment is preallocated; close trims it.
    let active_index = p(&format!("{second:020}.index"));
    assert_eq!(std::fs::metadata(&active_index).unwrap().len(), 1000);
    log.close().unwrap();
    assert_eq!(std::fs::metadata(&active_index).unwrap().len(), 0);
    let ti = std::fs::read(p(&format!("{second:020}.timeindex"))).unwrap();
    assert_eq!(ti.len(), 12); // the final (max timestamp, offset) entry
    assert_eq!(be_i64(&ti, 0), 5_001);
    assert_eq!(be_i32(&ti, 8), 1);

    // The .log holds the batches byte for byte, with base offsets assigned.
    let data = std::fs::read(p("00000000000000000000.log")).unwrap();
    assert_eq!(data.len() as u64, per_segment * size);
    assert_eq!(&data[16..size as usize], &b[16..]);
    let offs = common::offsets(&data);
    assert_eq!(offs[1], (2, 3));

    // Reopened cleanly: same end offset, active segment preallocated again.
    let log = Log::open(
        dir.path(),
        cfg,
        OpenState {
            clean_shutdown: true,
            ..OpenState::default()
        },
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), second + 2);
    assert_eq!(std::fs::metadata(&active_index).unwrap().len(), 1000);
}

#[test]
fn leftovers_are_cleaned_and_missing_indexes_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        index_interval_bytes: 10,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg.clone(), OpenState::default()).unwrap();
    for _ in 0..4 {
        log.append(&common::batch(1, 50, 1), 0, 0).unwrap();
    }
    log.close().unwrap();
    let p = |n: &str| dir.path().join(n);
    std::fs::remove_file(p("00000000000000000000.index")).unwrap();
    std::fs::write(p("00000000000000000099.log.deleted"), b"x").unwrap();
    std::fs::write(p("00000000000000000000.log.cleaned"), b"x").unwrap();
    std::fs::write(p("00000000000000000077.index"), b"").unwrap();
    std::fs::write(p("leader-epoch-checkpoint"), b"0\n0\n").unwrap();
    let mut log = Log::open(
        dir.path(),
        cfg,
        OpenState {
            clean_shutdown: true,
            ..OpenState::default()
        },
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), 4);
    assert!(!p("00000000000000000099.log.deleted").exists());
    assert!(!p("00000000000000000000.log.cleaned").exists());
    assert!(!p("00000000000000000077.index").exists());
    assert!(p("leader-epoch-checkpoint").exists());
    log.close().unwrap();
    assert_eq!(
        std::fs::metadata(p("00000000000000000000.index"))
            .unwrap()
            .len(),
        3 * 8
    );
}

#[test]
fn a_log_in_a_missing_dir_is_created_and_a_lone_missing_time_index_rebuilt() {
    // which indexes exist is read from the dir's listing, not a stat per file
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("topic-0");
    let cfg = LogConfig {
        index_interval_bytes: 10,
        ..LogConfig::default()
    };
    let mut log = Log::open(&dir, cfg.clone(), OpenState::default()).unwrap();
    for ts in 1..5 {
        // growing timestamps: a time index entry per indexed batch
        log.append(&common::batch(1, 50, ts), 0, 0).unwrap();
    }
    log.close().unwrap();
    let time_index = dir.join("00000000000000000000.timeindex");
    let written = std::fs::read(&time_index).unwrap();
    assert!(written.len() > 12, "more than the closing entry");
    std::fs::remove_file(&time_index).unwrap();
    let clean = OpenState {
        clean_shutdown: true,
        ..OpenState::default()
    };
    let mut log = Log::open(&dir, cfg, clean).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    log.close().unwrap();
    assert_eq!(std::fs::read(&time_index).unwrap(), written);
}

#[test]
fn truncate_and_advance_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::batch(2, 100, 10);
    let cfg = LogConfig {
        segment_bytes: 3 * b.len() as u64,
        index_interval_bytes: 10,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg, OpenState::default()).unwrap();
    for _ in 0..10 {
        log.append(&b, 0, 0).unwrap();
    }
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(log.segment_count(), 4); // 0, 6, 12, 18
    log.truncate_to(13, 0).unwrap(); // mid-batch: cut at 12
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(log.segment_count(), 3);
    assert_eq!(log.append(&b, 0, 0).unwrap().base_offset, 12);
    log.truncate_to(8, 0).unwrap();
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(log.segment_count(), 2);
    let s = log.read(6, 1 << 20, false, None).unwrap().unwrap();
    assert_eq!(common::offsets(&s.read().unwrap()), vec![(6, 7)]);
    assert_eq!(log.advance_log_start_offset(7).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 7);
    assert_eq!(
        log.segment_infos().iter().map(|i| i.0).collect::<Vec<_>>(),
        vec![6]
    );
    assert!(log.read(5, 100, true, None).is_err());
    assert!(log.advance_log_start_offset(9).is_err());
    log.truncate_to(3, 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
    assert_eq!(log.append(&b, 0, 0).unwrap().base_offset, 3);
    assert!(dir.path().join("00000000000000000003.log").exists());
}
