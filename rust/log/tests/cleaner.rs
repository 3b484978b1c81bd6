//! Compaction: one value per key at unchanged offsets, tombstones, codecs,
//! min compaction lag, the offset map bound, producers' last batches and
//! crashes at each step of the swap.

use std::collections::BTreeMap;
use std::path::Path;

use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::cleaner::{self, CleanConfig};
use pybroker_log::codec::{self, RecordIter, DECOMPRESSED_BYTES_MAX};
use pybroker_log::{Log, LogConfig, OpenState};

const NOW: i64 = 10_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 128,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

fn open(dir: &Path) -> Log {
    let state = OpenState {
        clean_shutdown: false,
        now_ms: NOW,
        ..OpenState::default()
    };
    Log::open(dir, config(), state).unwrap()
}

fn clean_config() -> CleanConfig {
    CleanConfig {
        now_ms: NOW,
        delete_retention_ms: 1_000,
        ..CleanConfig::default()
    }
}

/// One batch of (key, value) records, compressed with `codec`.
fn batch(records: &[(&str, Option<&str>)], ts: i64, codec: u8) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, ts);
    for (k, v) in records {
        b.push(Record::new(ts, Some(k.as_bytes()), v.map(str::as_bytes)));
    }
    if codec == 0 {
        return b.build();
    }
    let body = codec::compress(codec, &b.encode_records()).unwrap();
    b.build_with_records(&body, codec as i16, records.len() as i32)
}

type Row = (i64, String, Option<String>);

fn contents(log: &Log) -> Vec<Row> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while let Some(slice) = log.read(offset, 1 << 20, true, None).unwrap() {
        let data = slice.read().unwrap();
        let mut pos = 0;
        while pos < data.len() {
            let h = pybroker_log::batch::check_stored_batch(&data[pos..]).unwrap();
            let (_, recs) =
                codec::batch_records(&data[pos..pos + h.size()], DECOMPRESSED_BYTES_MAX).unwrap();
            for r in RecordIter::new(h, &recs) {
                let r = r.unwrap();
                let s = |b: Option<&[u8]>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
                out.push((r.offset, s(r.key).unwrap(), s(r.value)));
            }
            offset = h.next_offset();
            pos += h.size();
        }
    }
    out
}

/// The newest record per key, tombstones dropped when `drop_tombstones`.
fn expected(rows: &[Row], below: i64, drop_tombstones: bool) -> Vec<Row> {
    let mut latest: BTreeMap<&str, i64> = BTreeMap::new();
    for (o, k, _) in rows {
        if *o < below {
            latest.insert(k, *o);
        }
    }
    rows.iter()
        .filter(|(o, k, v)| {
            *o >= below || (latest[k.as_str()] == *o && !(drop_tombstones && v.is_none()))
        })
        .cloned()
        .collect()
}

/// 3 keys updated many times, a tombstone for key b, in batches of 2.
fn fill(log: &mut Log, codec: u8, ts: i64) -> Vec<Row> {
    let keys = ["a", "b", "c"];
    for i in 0..30 {
        let v1 = format!("v{i}");
        let k2 = keys[(i + 1) % 3];
        let v2 = if i == 20 { None } else { Some(format!("w{i}")) };
        log.append(
            &batch(&[(keys[i % 3], Some(&v1)), (k2, v2.as_deref())], ts, codec),
            0,
            NOW,
        )
        .unwrap();
    }
    contents(log)
}

#[test]
fn keeps_newest_value_per_key_at_unchanged_offsets() {
    for codec in 0..=4u8 {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path());
        let before = fill(&mut log, codec, NOW - 500);
        assert!(log.segment_count() > 3);
        let active = log.segment_infos().last().unwrap().0;
        let stats = log.clean(0, clean_config()).unwrap();
        assert_eq!(stats.first_dirty_offset, active);
        assert!(stats.records_removed > 0 && stats.bytes_written < stats.bytes_read);
        let after = contents(&log);
        // tombstone is recent (500 ms < 1000 ms retention): kept
        assert_eq!(after, expected(&before, active, false), "codec {codec}");
        assert_eq!(log.log_end_offset(), 60);
        // the cleaned log survives an unclean reopen byte for byte
        drop(log);
        let log = open(dir.path());
        assert_eq!(contents(&log), after);
        assert!(!std::fs::read_dir(dir.path()).unwrap().any(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted")
        }));
    }
}

#[test]
fn old_tombstones_are_dropped_and_recleaning_is_stable() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let before = fill(&mut log, 0, NOW - 5_000);
    let active = log.segment_infos().last().unwrap().0;
    log.clean(0, clean_config()).unwrap();
    let after = contents(&log);
    assert_eq!(after, expected(&before, active, true));
    let again = log.clean(0, clean_config()).unwrap();
    assert_eq!(again.records_removed, 0);
    assert_eq!(contents(&log), after);
    // nothing dirty: a no-op
    let noop = log.clean(active, clean_config()).unwrap();
    assert_eq!((noop.bytes_read, noop.first_dirty_offset), (0, active));
}

#[test]
fn min_compaction_lag_stops_the_dirty_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let before = fill(&mut log, 0, NOW - 500);
    let cfg = CleanConfig {
        min_compaction_lag_ms: 10_000,
        ..clean_config()
    };
    let stats = log.clean(0, cfg).unwrap();
    assert_eq!((stats.first_dirty_offset, stats.records_removed), (0, 0));
    assert_eq!(contents(&log), before);
}

#[test]
fn a_small_offset_map_cleans_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    for i in 0..40 {
        let k1 = format!("k{}", i % 8);
        let k2 = format!("k{}", (i + 3) % 8);
        log.append(
            &batch(&[(&k1, Some("x")), (&k2, Some("y"))], NOW, 0),
            0,
            NOW,
        )
        .unwrap();
    }
    let before = contents(&log);
    let active = log.segment_infos().last().unwrap().0;
    let cfg = CleanConfig {
        offset_map_bytes: 3 * cleaner::OFFSET_MAP_ENTRY_BYTES,
        ..clean_config()
    };
    let mut dirty = 0;
    for _ in 0..50 {
        dirty = log.clean(dirty, cfg.clone()).unwrap().first_dirty_offset;
        if dirty >= active {
            break;
        }
    }
    assert_eq!(dirty, active);
    let full = log.clean(0, clean_config()).unwrap();
    let after = contents(&log);
    assert_eq!(after, expected(&before, active, false));
    assert_eq!(full.first_dirty_offset, active);
}

#[test]
fn producers_last_batches_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    for i in 0..20 {
        let mut b = BatchBuilder::new(0, NOW).producer(5, 0, 2 * i);
        b.push(Record::new(NOW, Some(b"k"), Some(b"v")));
        b.push(Record::new(NOW, Some(b"k"), Some(b"w")));
        log.append(&b.build(), 0, NOW).unwrap();
        log.append(&batch(&[("k", Some("z"))], NOW, 0), 0, NOW)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    log.clean(0, clean_config()).unwrap();
    let rows = contents(&log);
    // the producer's last batch (offsets 57, 58) survives, and the newest k
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![57, 58, 59]
    );
    // and its retry is still a duplicate after reopen
    drop(log);
    let mut log = open(dir.path());
    let mut b = BatchBuilder::new(0, NOW).producer(5, 0, 38);
    b.push(Record::new(NOW, Some(b"k"), Some(b"v")));
    b.push(Record::new(NOW, Some(b"k"), Some(b"w")));
    let d = log.append(&b.build(), 0, NOW).unwrap();
    assert_eq!((d.duplicate_count, d.base_offset), (1, 57));
}

#[test]
fn crash_before_and_after_the_swap_rename() {
    for crash_after_swap in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path());
        let before = fill(&mut log, 2, NOW - 500);
        let active = log.segment_infos().last().unwrap().0;
        let plan = log.plan_clean(0, clean_config()).unwrap().unwrap();
        let _out = cleaner::run(plan).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".cleaned"))
            .collect();
        assert!(!names.is_empty());
        if crash_after_swap {
            // crash right after the .cleaned -> .swap renames
            for n in &names {
                let from = dir.path().join(n);
                std::fs::rename(&from, dir.path().join(n.replace(".cleaned", ".swap"))).unwrap();
            }
        }
        drop(log);
        let log = open(dir.path());
        let got = contents(&log);
        if crash_after_swap {
            assert_eq!(got, expected(&before, active, false));
        } else {
            assert_eq!(got, before);
        }
        assert_eq!(log.log_end_offset(), 60);
    }
}
