//! Property tests of the partition log: read by every offset, recovery of a
//! damaged tail, index lookup against a linear scan.

mod common;

use std::path::Path;

use proptest::prelude::*;
use pybroker_log::{Log, LogConfig, OpenState};

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, segment_bytes: u64, clean: bool) -> Log {
    let state = OpenState {
        clean_shutdown: clean,
        ..OpenState::default()
    };
    Log::open(dir, config(segment_bytes), state).unwrap()
}

/// (record count, value length) of each batch; appended in groups of 1-3 batches.
fn batches_strategy() -> impl Strategy<Value = Vec<Vec<(usize, usize)>>> {
    prop::collection::vec(prop::collection::vec((1usize..6, 0usize..300), 1..4), 1..25)
}

/// Appends the groups; returns the (base, last) offsets of every batch.
fn fill(log: &mut Log, groups: &[Vec<(usize, usize)>]) -> Vec<(i64, i64)> {
    let mut expect = Vec::new();
    let mut ts = 1_000;
    for g in groups {
        let mut buf = Vec::new();
        for &(n, v) in g {
            buf.extend_from_slice(&common::batch(n, v, ts));
            ts += n as i64;
        }
        let info = log.append(&buf, 3, ts).unwrap();
        let mut next = info.base_offset;
        for &(n, _) in g {
            expect.push((next, next + n as i64 - 1));
            next += n as i64;
        }
        assert_eq!(info.last_offset, next - 1);
    }
    expect
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_offset_reads_back_its_batch(groups in batches_strategy(), seg in 600u64..4000) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), seg, false);
        let expect = fill(&mut log, &groups);
        let leo = expect.last().unwrap().1 + 1;
        prop_assert_eq!(log.log_end_offset(), leo);
        for &(base, last) in &expect {
            for o in base..=last {
                let s = log.read(o, 1, true, None).unwrap().unwrap();
                prop_assert_eq!(common::offsets(&s.read().unwrap()), vec![(base, last)]);
                // A large read returns whole batches starting with the same one.
                let s = log.read(o, 1 << 20, false, None).unwrap().unwrap();
                let got = common::offsets(&s.read().unwrap());
                prop_assert_eq!(got[0], (base, last));
                let pos = expect.iter().position(|e| *e == (base, last)).unwrap();
                prop_assert_eq!(&got[..], &expect[pos..pos + got.len()]);
            }
        }
        prop_assert!(log.read(leo, 100, true, None).unwrap().is_none());
        // Same answers after a clean close and reopen.
        log.close().unwrap();
        let log = open(dir.path(), seg, true);
        prop_assert_eq!(log.log_end_offset(), leo);
        for &(base, last) in &expect {
            let s = log.read(last, 1, true, None).unwrap().unwrap();
            prop_assert_eq!(common::offsets(&s.read().unwrap()), vec![(base, last)]);
        }
    }

    #[test]
    fn recovery_keeps_exactly_the_valid_prefix(
        groups in batches_strategy(),
        cut in any::<prop::sample::Index>(),
        flip in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), 1 << 20, false);
        let expect = fill(&mut log, &groups);
        let path = log.segments().last().unwrap().log_path().to_path_buf();
        drop(log); // no close: an unclean stop
        let mut bytes = std::fs::read(&path).unwrap();
        // Batch boundaries in the file.
        let mut ends = Vec::new();
        let mut pos = 0;
        for _ in &expect {
            let h = pybroker_log::batch::check_batch(&bytes[pos..], usize::MAX).unwrap();
            pos += h.size();
            ends.push(pos);
        }
        let at = cut.index(bytes.len());
        if flip {
            // Damage a CRC-covered (or magic/crc) byte at/after `at`.
            let start = ends.iter().rev().find(|&&e| e <= at).copied().unwrap_or(0);
            let target = at.max(start + 16);
            if target < bytes.len() {
                bytes[target] ^= 0x5a;
            }
            std::fs::write(&path, &bytes).unwrap();
        } else {
            bytes.truncate(at);
            std::fs::write(&path, &bytes).unwrap();
        }
        let valid = if flip {
            let start = ends.iter().rev().find(|&&e| e <= at).copied().unwrap_or(0);
            if at.max(start + 16) < ends.last().copied().unwrap() { start } else { bytes.len() }
        } else {
            ends.iter().rev().find(|&&e| e <= at).copied().unwrap_or(0)
        };
        let kept = ends.iter().filter(|&&e| e <= valid).count();
        let leo = if kept == 0 { 0 } else { expect[kept - 1].1 + 1 };
        let log = open(dir.path(), 1 << 20, false);
        prop_assert_eq!(log.log_end_offset(), leo);
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, valid);
        for &(base, last) in &expect[..kept] {
            let s = log.read(base, 1, true, None).unwrap().unwrap();
            prop_assert_eq!(common::offsets(&s.read().unwrap()), vec![(base, last)]);
        }
    }

    #[test]
    fn index_lookup_equals_linear_scan(groups in batches_strategy()) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), 1 << 20, false);
        let expect = fill(&mut log, &groups);
        let seg = log.segments().next().unwrap();
        let bytes = std::fs::read(seg.log_path()).unwrap();
        let mut positions = Vec::new();
        let mut pos = 0u64;
        for _ in &expect {
            positions.push(pos);
            let h = pybroker_log::batch::check_batch(&bytes[pos as usize..], usize::MAX).unwrap();
            pos += h.size() as u64;
        }
        for (i, &(_, last)) in expect.iter().enumerate() {
            let (p, h) = seg.find_batch(last).unwrap().unwrap();
            prop_assert_eq!(p, positions[i]);
            prop_assert_eq!(h.last_offset(), last);
        }
    }
}
