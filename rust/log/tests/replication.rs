//! Replication through the log engine: a follower fed its leader's fetched
//! bytes holds the same bytes; failovers with epoch-based truncation
//! converge; the leader-epoch cache across reopen, crash, truncation and log
//! start moves; idempotent producer state carried by the follower.

mod common;

use std::path::Path;

use proptest::prelude::*;
use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::leader_epoch::{EpochEntry, CHECKPOINT_FILE};
use pybroker_log::{Log, LogConfig, LogError, OpenState};

const NOW: i64 = 1_700_000_000_000;

fn config(segment_bytes: u64, log_append_time: bool) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 200,
        segment_index_bytes: 4096,
        log_append_time,
        ..LogConfig::default()
    }
}

fn open_with(dir: &Path, cfg: LogConfig, clean: bool) -> Log {
    let state = OpenState {
        clean_shutdown: clean,
        now_ms: NOW,
        ..OpenState::default()
    };
    Log::open(dir, cfg, state).unwrap()
}

fn open(dir: &Path) -> Log {
    open_with(dir, config(1500, false), false)
}

/// A batch of `n` records; producer `pid` >= 0 makes it idempotent.
fn batch(n: usize, value_len: usize, pid: i64, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, NOW);
    if pid >= 0 {
        b = b.producer(pid, 0, seq);
    }
    for i in 0..n {
        b.push(Record::new(
            NOW + i as i64,
            Some(b"k"),
            Some(&vec![b'v'; value_len]),
        ));
    }
    b.build()
}

/// Every `.log` file of the directory concatenated in offset order: the
/// log's content independent of where segments roll.
fn log_bytes(dir: &Path) -> Vec<u8> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|n| std::fs::read(dir.join(n)).unwrap())
        .collect()
}

fn epochs(log: &Log) -> Vec<(i32, i64)> {
    log.leader_epochs()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

fn checkpoint(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(CHECKPOINT_FILE)).unwrap()
}

/// One follower fetch: the leader's bytes from the follower's end, at most
/// `max_bytes` (one batch at least), appended as follower. False when there
/// was nothing to fetch.
fn fetch_once(leader: &Log, follower: &mut Log, max_bytes: u64) -> bool {
    let Some(slice) = leader
        .read(follower.log_end_offset(), max_bytes, true, None)
        .unwrap()
    else {
        return false;
    };
    let bytes = slice.read().unwrap();
    let info = follower.append_as_follower(&bytes, NOW).unwrap();
    assert_eq!(info.duplicate_count, 0);
    assert_eq!(info.last_offset + 1, follower.log_end_offset());
    true
}

fn catch_up(leader: &Log, follower: &mut Log, max_bytes: u64) {
    while fetch_once(leader, follower, max_bytes) {}
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
}

/// Kafka's follower truncation (`AbstractFetcherThread.getOffsetTruncationState`,
/// KIP-279): ask the leader for the end of the follower's latest epoch; if
/// the leader answers with an epoch the follower does not have, cut to the
/// follower's end of that epoch and ask again.
fn truncate_follower(leader: &Log, follower: &mut Log) {
    loop {
        let Some(epoch) = follower.latest_epoch() else {
            return;
        };
        let (leader_epoch, leader_end) = leader.end_offset_for_epoch(epoch).unwrap();
        assert!(leader_epoch >= 0, "the leader knows every epoch it wrote");
        let (own_epoch, own_end) = follower.end_offset_for_epoch(leader_epoch).unwrap();
        let leo = follower.log_end_offset();
        if own_epoch == leader_epoch {
            follower
                .truncate_to(leader_end.min(own_end).min(leo), NOW)
                .unwrap();
            return;
        }
        if own_epoch < 0 {
            follower.truncate_to(leader_end.min(leo), NOW).unwrap();
            return;
        }
        follower.truncate_to(own_end.min(leo), NOW).unwrap();
    }
}

/// What a caught-up follower's cache must hold: the leader's entries, minus
/// a last one assigned on becoming leader that no batch carries yet.
fn expected_follower_epochs(leader: &Log) -> Vec<(i32, i64)> {
    let mut e = epochs(leader);
    if e.last().is_some_and(|l| l.1 >= leader.log_end_offset()) {
        e.pop();
    }
    e
}

#[test]
fn follower_copies_offsets_epochs_and_bytes() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader = open_with(ld.path(), config(1500, true), false);
    let mut follower = open_with(fd.path(), config(1500, true), false);
    for epoch in 0..3 {
        leader
            .assign_leader_epoch(epoch, leader.log_end_offset())
            .unwrap();
        for i in 0..4 {
            leader
                .append(&batch(1 + i, 40, -1, -1), epoch, NOW + 5 * i as i64)
                .unwrap();
        }
    }
    // LogAppendTime topic: the follower keeps the leader's stamped times.
    catch_up(&leader, &mut follower, 300);
    assert_eq!(log_bytes(fd.path()), log_bytes(ld.path()));
    assert_eq!(epochs(&follower), vec![(0, 0), (1, 10), (2, 20)]);
    assert_eq!(checkpoint(fd.path()), "0\n3\n0 0\n1 10\n2 20\n");
    assert_eq!(checkpoint(fd.path()), checkpoint(ld.path()));
    for (asked, want) in [
        (-1, (-1, -1)),
        (0, (0, 10)),
        (1, (1, 20)),
        (2, (2, 30)),
        (3, (-1, -1)),
    ] {
        assert_eq!(follower.end_offset_for_epoch(asked).unwrap(), want);
        assert_eq!(leader.end_offset_for_epoch(asked).unwrap(), want);
    }
    // every offset reads back the same batch bytes
    for o in 0..30 {
        let a = leader
            .read(o, 1, true, None)
            .unwrap()
            .unwrap()
            .read()
            .unwrap();
        let b = follower
            .read(o, 1, true, None)
            .unwrap()
            .unwrap()
            .read()
            .unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn follower_rejects_overlap_and_bad_batches_writing_nothing() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader = open(ld.path());
    let mut follower = open(fd.path());
    leader.append(&batch(2, 10, -1, -1), 0, NOW).unwrap();
    leader.append(&batch(3, 10, -1, -1), 0, NOW).unwrap();
    let all = leader
        .read(0, u64::MAX, true, None)
        .unwrap()
        .unwrap()
        .read()
        .unwrap();
    let first = leader
        .read(0, 1, true, None)
        .unwrap()
        .unwrap()
        .read()
        .unwrap();
    follower.append_as_follower(&first, NOW).unwrap();
    let size = follower.size_bytes();
    // overlap with the log
    assert!(matches!(
        follower.append_as_follower(&all, NOW),
        Err(LogError::UnexpectedAppendOffset {
            offset: 0,
            next_offset: 2
        })
    ));
    // non-monotonic inside one append: second batch repeated
    let second = &all[first.len()..];
    let mut twice = second.to_vec();
    twice.extend_from_slice(second);
    assert!(matches!(
        follower.append_as_follower(&twice, NOW),
        Err(LogError::UnexpectedAppendOffset {
            offset: 2,
            next_offset: 5
        })
    ));
    // a bad CRC anywhere rejects all
    let mut bad = second.to_vec();
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert!(matches!(
        follower.append_as_follower(&bad, NOW),
        Err(LogError::Corrupt(_))
    ));
    assert_eq!(
        (follower.size_bytes(), follower.log_end_offset()),
        (size, 2)
    );
    // a partial tail is ignored; nothing whole -> nothing happens
    let info = follower.append_as_follower(&second[..30], NOW).unwrap();
    assert_eq!(
        (info.base_offset, info.last_offset, info.batch_count),
        (-1, -1, 0)
    );
    let mut with_tail = second.to_vec();
    with_tail.extend_from_slice(&second[..70]);
    let info = follower.append_as_follower(&with_tail, NOW).unwrap();
    assert_eq!(
        (info.base_offset, info.last_offset, info.record_count),
        (2, 4, 3)
    );
    assert_eq!(log_bytes(fd.path()), log_bytes(ld.path()));
}

#[test]
fn follower_accepts_gaps_and_restarts_an_empty_log_inside_a_batch() {
    let fd = tempfile::tempdir().unwrap();
    let mut follower = open(fd.path());
    let mut b = batch(2, 10, -1, -1);
    pybroker_log::batch::set_base_offset(&mut b, 10);
    pybroker_log::batch::set_partition_leader_epoch(&mut b, 4);
    // empty log at 0: a batch at 10 (the leader compacted 0..9 away)
    let info = follower.append_as_follower(&b, NOW).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (10, 11));
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (0, 12)
    );
    assert_eq!(epochs(&follower), vec![(4, 10)]);
    assert!(follower.read(5, 1000, true, None).unwrap().is_some());

    // DeleteRecords left the leader's start inside a batch (offset 21 of
    // 20..22); a fresh follower starting at 21 gets the batch at 20.
    let fd = tempfile::tempdir().unwrap();
    let state = OpenState {
        log_start_offset: 21,
        now_ms: NOW,
        ..OpenState::default()
    };
    let mut follower = Log::open(fd.path(), config(1500, false), state).unwrap();
    assert_eq!(follower.log_end_offset(), 21);
    let mut b = batch(3, 10, -1, -1);
    pybroker_log::batch::set_base_offset(&mut b, 20);
    let info = follower.append_as_follower(&b, NOW).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (20, 22));
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (20, 23)
    );
    assert_eq!(log_bytes(fd.path()), b);
    // not empty any more: the same batch again overlaps
    assert!(matches!(
        follower.append_as_follower(&b, NOW),
        Err(LogError::UnexpectedAppendOffset { .. })
    ));
}

#[test]
fn follower_gap_beyond_i32_offsets_starts_a_segment_at_the_batch() {
    let fd = tempfile::tempdir().unwrap();
    let mut follower = open(fd.path());
    let far = 3_000_000_000i64;
    for (i, base) in [(0, 5), (1, far), (2, 2 * far)] {
        let mut b = batch(2, 10, -1, -1);
        pybroker_log::batch::set_base_offset(&mut b, base);
        let info = follower.append_as_follower(&b, NOW).unwrap();
        assert_eq!(info.base_offset, base, "batch {i}");
    }
    let bases: Vec<i64> = follower.segment_infos().iter().map(|s| s.0).collect();
    assert_eq!(bases, vec![0, far, 2 * far]);
    for (asked, want) in [(0, 5), (7, far), (far + 1, far), (far + 2, 2 * far)] {
        let s = follower.read(asked, 1000, true, None).unwrap().unwrap();
        let h = pybroker_log::batch::check_stored_batch(&s.read().unwrap()).unwrap();
        assert_eq!(h.base_offset, want, "read at {asked}");
    }
    follower.close().unwrap();
    let again = open_with(fd.path(), config(1500, false), false);
    assert_eq!(again.log_end_offset(), 2 * far + 2);
}

#[test]
fn follower_producer_state_recognises_a_retry_after_failover() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader = open(ld.path());
    let mut follower = open(fd.path());
    for seq in 0..7 {
        leader.append(&batch(2, 10, 9, seq * 2), 0, NOW).unwrap();
    }
    catch_up(&leader, &mut follower, 200);
    // the follower takes over (epoch 1) and the client retries its last batches
    follower
        .assign_leader_epoch(1, follower.log_end_offset())
        .unwrap();
    let d = follower.append(&batch(2, 10, 9, 12), 1, NOW).unwrap();
    assert_eq!(
        (d.duplicate_count, d.base_offset, d.last_offset),
        (1, 12, 13)
    );
    let d = follower.append(&batch(2, 10, 9, 8), 1, NOW).unwrap();
    assert_eq!((d.duplicate_count, d.base_offset, d.last_offset), (1, 8, 9));
    assert!(matches!(
        follower.append(&batch(1, 10, 9, 20), 1, NOW),
        Err(LogError::OutOfOrderSequence(_))
    ));
    // after an unclean restart the state is rebuilt from the copied batches
    drop(follower);
    let mut follower = open(fd.path());
    let d = follower.append(&batch(2, 10, 9, 12), 1, NOW).unwrap();
    assert_eq!((d.duplicate_count, d.base_offset), (1, 12));
    let w = follower.append(&batch(1, 10, 9, 14), 1, NOW).unwrap();
    assert_eq!((w.duplicate_count, w.base_offset), (0, 14));
    assert_eq!(epochs(&follower), vec![(0, 0), (1, 14)]);
}

#[test]
fn epoch_cache_survives_reopen_crash_and_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    for epoch in [0, 2, 5] {
        log.append(&batch(3, 100, -1, -1), epoch, NOW).unwrap();
        log.append(&batch(2, 100, -1, -1), epoch, NOW).unwrap();
    }
    let want = vec![(0, 0), (2, 5), (5, 10)];
    assert_eq!(epochs(&log), want);
    log.close().unwrap();
    let log = open_with(dir.path(), config(1500, false), true);
    assert_eq!(epochs(&log), want);
    assert_eq!(log.end_offset_for_epoch(3).unwrap(), (2, 10));
    // kill: no close, then an entry assigned for an epoch with no batch yet
    let mut log = log;
    log.assign_leader_epoch(6, 15).unwrap();
    drop(log);
    let log = open(dir.path());
    assert_eq!(
        epochs(&log),
        want,
        "an entry at the log end has no batch: cut"
    );
    drop(log);
    // torn tail: the last batch (epoch 5, offsets 13-14) loses its last byte
    let last = dir.path().join(format!("{:020}.log", {
        let log = open(dir.path());
        log.segment_infos().last().unwrap().0
    }));
    let len = std::fs::metadata(&last).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let log = open(dir.path());
    assert_eq!(log.log_end_offset(), 13);
    assert_eq!(epochs(&log), want);
    drop(log);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(0)
        .unwrap();
    let mut log = open(dir.path());
    assert!(log.log_end_offset() <= 10, "{}", log.log_end_offset());
    assert_eq!(epochs(&log), vec![(0, 0), (2, 5)]);
    // the cuts made at open are written with the log's next flush, not at open
    // (Kafka's truncateFromEndAsyncFlush): every open after a kill above made
    // the same cut again from the file the last entry assigned left
    assert_eq!(checkpoint(dir.path()), "0\n4\n0 0\n2 5\n5 10\n6 15\n");
    log.flush().unwrap();
    assert_eq!(checkpoint(dir.path()), "0\n2\n0 0\n2 5\n");
}

#[test]
fn open_cut_is_written_by_close_and_made_again_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append(&batch(3, 100, -1, -1), 0, NOW).unwrap();
    // leader at epoch 4 that wrote nothing before it died
    log.assign_leader_epoch(4, 3).unwrap();
    drop(log);
    let stale = "0\n2\n0 0\n4 3\n";
    assert_eq!(checkpoint(dir.path()), stale);
    for _ in 0..2 {
        let log = open(dir.path());
        assert_eq!(epochs(&log), vec![(0, 0)]);
        drop(log); // killed again before any flush: the file is as it was
        assert_eq!(checkpoint(dir.path()), stale);
    }
    let mut log = open(dir.path());
    log.close().unwrap();
    assert_eq!(checkpoint(dir.path()), "0\n1\n0 0\n");
    // a new entry writes the whole cache at once, as before
    let mut log = open(dir.path());
    log.assign_leader_epoch(5, 3).unwrap();
    assert_eq!(checkpoint(dir.path()), "0\n2\n0 0\n5 3\n");
}

#[test]
fn epoch_cache_is_rebuilt_from_batches_when_missing_or_stale() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    for epoch in [1, 1, 3, 7] {
        log.append(&batch(2, 200, -1, -1), epoch, NOW).unwrap();
    }
    log.close().unwrap();
    assert!(open(dir.path()).segment_count() > 1);
    let want = "0\n3\n1 0\n3 4\n7 6\n";
    assert_eq!(checkpoint(dir.path()), want);
    for stale in [
        None,
        Some("0\n0\n"),
        Some("0\n1\n1 0\n"),
        Some("garbage"),
        Some("0\n2\n1 0\n"),
    ] {
        match stale {
            None => std::fs::remove_file(dir.path().join(CHECKPOINT_FILE)).unwrap(),
            Some(s) => std::fs::write(dir.path().join(CHECKPOINT_FILE), s).unwrap(),
        }
        let mut log = open_with(dir.path(), config(1500, false), true);
        assert_eq!(log.latest_epoch(), Some(7));
        log.close().unwrap();
        assert_eq!(checkpoint(dir.path()), want, "{stale:?}");
    }
}

#[test]
fn truncation_and_log_start_keep_the_cache_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    for epoch in 0..5 {
        log.append(&batch(4, 150, -1, -1), epoch, NOW).unwrap();
    }
    assert_eq!(log.log_end_offset(), 20);
    // mid-batch: the batch holding 13 (12..15) goes whole
    log.truncate_to(13, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(epochs(&log), vec![(0, 0), (1, 4), (2, 8)]);
    assert_eq!(log.end_offset_for_epoch(2).unwrap(), (2, 12));
    log.append(&batch(1, 10, -1, -1), 6, NOW).unwrap();
    assert_eq!(epochs(&log), vec![(0, 0), (1, 4), (2, 8), (6, 12)]);
    log.advance_log_start_offset(6).unwrap();
    assert_eq!(epochs(&log), vec![(1, 6), (2, 8), (6, 12)]);
    assert_eq!(checkpoint(dir.path()), "0\n3\n1 6\n2 8\n6 12\n");
    assert_eq!(log.end_offset_for_epoch(0).unwrap(), (0, 6));
    // below the log start: emptied, restarts, cache cleared
    log.truncate_to(2, NOW).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (2, 2));
    assert_eq!(epochs(&log), vec![]);
    assert_eq!(checkpoint(dir.path()), "0\n0\n");
    assert_eq!(log.latest_epoch(), None);
    assert_eq!(log.end_offset_for_epoch(0).unwrap(), (-1, -1));
}

#[test]
fn truncate_fully_and_start_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    for i in 0..6 {
        log.append(&batch(3, 200, 4, 3 * i), 2, NOW).unwrap();
    }
    assert!(log.segment_count() > 1);
    log.truncate_fully_and_start_at(500, NOW).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 500));
    assert_eq!(log.recovery_point(), 500);
    assert_eq!(log.segment_infos(), vec![(500, 0, -1)]);
    assert_eq!(
        (log.latest_epoch(), log.producer_state().producer_count()),
        (None, 0)
    );
    assert_eq!(checkpoint(dir.path()), "0\n0\n");
    let mut b = batch(2, 10, -1, -1);
    pybroker_log::batch::set_base_offset(&mut b, 500);
    pybroker_log::batch::set_partition_leader_epoch(&mut b, 9);
    log.append_as_follower(&b, NOW).unwrap();
    drop(log);
    let log = open(dir.path());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 502));
    assert_eq!(epochs(&log), vec![(9, 500)]);
}

#[test]
fn epoch_entries_are_exposed_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.assign_leader_epoch(3, 0).unwrap();
    log.append(&batch(1, 1, -1, -1), 3, NOW).unwrap();
    assert_eq!(
        log.leader_epochs().entries(),
        &[EpochEntry {
            epoch: 3,
            start_offset: 0
        }]
    );
}

/// One round of the failover simulation: the leader appends `appends`
/// (record count, value length, producer or -1), the follower fetches
/// `fetches` times with `max_bytes`.
type Round = (Vec<(usize, usize, bool)>, usize, u64);

fn rounds() -> impl Strategy<Value = Vec<Round>> {
    prop::collection::vec(
        (
            prop::collection::vec((1usize..5, 0usize..200, any::<bool>()), 0..6),
            0usize..4,
            1u64..900,
        ),
        1..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Two replicas trade leadership every round; the deposed leader
    /// truncates by leader epoch and both end byte-identical, with the same
    /// epoch cache and the same idempotent producer state.
    #[test]
    fn failovers_with_epoch_truncation_converge(rounds in rounds(), seg in 500u64..3000, lat in any::<bool>()) {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let mut logs = [
            open_with(dirs[0].path(), config(seg, lat), false),
            open_with(dirs[1].path(), config(seg, lat), false),
        ];
        for (epoch, (appends, fetches, max_bytes)) in rounds.iter().enumerate() {
            let epoch = epoch as i32;
            let l = epoch as usize % 2;
            let (a, b) = logs.split_at_mut(1);
            let (leader, follower) = if l == 0 { (&mut a[0], &mut b[0]) } else { (&mut b[0], &mut a[0]) };
            // the new leader starts its epoch, the deposed one truncates
            leader.assign_leader_epoch(epoch, leader.log_end_offset()).unwrap();
            truncate_follower(leader, follower);
            for &(n, v, idem) in appends {
                // producer 7 continues from what this leader has of it (a real
                // producer whose unreplicated batches were lost would get
                // OUT_OF_ORDER_SEQUENCE and reset: not this test's subject)
                let (pid, seq) = if idem {
                    let last = leader.producer_state().entry(7).map_or(-1, |e| e.last_seq());
                    (7, last + 1)
                } else {
                    (-1, -1)
                };
                let info = leader.append(&batch(n, v, pid, seq), epoch, NOW).unwrap();
                prop_assert_eq!(info.duplicate_count, 0);
            }
            for _ in 0..*fetches {
                fetch_once(leader, follower, *max_bytes);
            }
        }
        // final: the last follower truncates and catches up fully
        let last = (rounds.len() - 1) % 2;
        let (a, b) = logs.split_at_mut(1);
        let (leader, follower) = if last == 0 { (&mut a[0], &mut b[0]) } else { (&mut b[0], &mut a[0]) };
        truncate_follower(leader, follower);
        catch_up(leader, follower, 700);
        prop_assert_eq!(log_bytes(dirs[0].path()), log_bytes(dirs[1].path()));
        prop_assert_eq!(epochs(follower), expected_follower_epochs(leader));
        // Same producer state, except that a replica which truncated reloaded
        // a snapshot, which keeps only each producer's last batch (Kafka's
        // format): the shorter batch list is a suffix of the longer one.
        let (fe, le) = (follower.producer_state().entry(7), leader.producer_state().entry(7));
        prop_assert_eq!(fe.map(|e| e.epoch), le.map(|e| e.epoch));
        if let (Some(fe), Some(le)) = (fe, le) {
            let n = fe.batches.len().min(le.batches.len());
            prop_assert!(n >= 1);
            let tail = |e: &pybroker_log::producer_state::ProducerEntry| {
                e.batches.iter().skip(e.batches.len() - n).copied().collect::<Vec<_>>()
            };
            prop_assert_eq!(tail(fe), tail(le));
        }
        for e in -1..rounds.len() as i32 + 1 {
            let want = leader.end_offset_for_epoch(e).unwrap();
            let got = follower.end_offset_for_epoch(e).unwrap();
            if leader.latest_epoch() == follower.latest_epoch() {
                prop_assert_eq!(got, want, "epoch {}", e);
            }
        }
        // the follower reopened after a kill holds the same cache and state
        let expect = epochs(follower);
        let dir = if last == 0 { dirs[1].path() } else { dirs[0].path() };
        drop(logs);
        let reopened = open_with(dir, config(seg, lat), false);
        prop_assert_eq!(epochs(&reopened), expect);
    }
}
