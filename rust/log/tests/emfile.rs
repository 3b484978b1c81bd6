//! EMFILE when a log reopens a segment file the open-file budget closed:
//! the operation fails with a storage error (KAFKA_STORAGE_ERROR), nothing is
//! written or skipped, and the log works again once descriptors are free.
//!
//! Its own test binary (one process, one test): it fills the descriptor table.

use std::fs::File;
use std::sync::Arc;

use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::{FileCache, Log, LogConfig, LogError, OpenState};

const NOW: i64 = 1_700_000_000_000;

fn record(value: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, NOW);
    b.push(Record::new(NOW, Some(b"k"), Some(value)));
    b.build()
}

fn open(dir: &std::path::Path, files: &Arc<FileCache>) -> Log {
    let state = OpenState {
        now_ms: NOW,
        ..OpenState::default()
    };
    Log::open_with_files(dir, LogConfig::default(), state, files.clone()).unwrap()
}

fn is_emfile(e: &LogError) -> bool {
    matches!(e, LogError::Io(io) if io.raw_os_error() == Some(libc::EMFILE))
}

#[test]
fn emfile_on_reopen_fails_the_operation_and_loses_nothing() {
    let files = FileCache::new(1, 4);
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = open(da.path(), &files);
    a.append(&record(b"first"), 0, NOW).unwrap();
    let mut b = open(db.path(), &files);
    assert!(!a.segments().any(|s| s.is_file_open()));
    // b's file dirty and held by a slice: the budget cannot close it
    b.append(&record(&[7u8; 40_000]), 0, NOW).unwrap();
    let held = b.read(0, 1 << 20, true, None).unwrap().unwrap();
    assert!(held.file().is_some());

    let mut fillers: Vec<File> = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(f) => fillers.push(f),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
            Err(e) => panic!("{e}"),
        }
    }
    let e = a.append(&record(b"second"), 0, NOW).unwrap_err();
    assert!(is_emfile(&e), "{e:?}");
    assert_eq!(e.kafka_error_code(), 56, "KAFKA_STORAGE_ERROR");
    assert_eq!(a.log_end_offset(), 1, "nothing assigned");
    let e = a.read(0, 1 << 20, true, None).unwrap_err();
    assert!(is_emfile(&e), "{e:?}");
    drop(fillers);

    a.append(&record(b"second"), 0, NOW).unwrap();
    a.flush().unwrap();
    let slice = a.read(0, 1 << 20, true, None).unwrap().unwrap();
    let bytes = slice.read().unwrap();
    let offsets: Vec<(i64, i64)> = {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = pybroker_log::batch::check_batch(&bytes[pos..], usize::MAX).unwrap();
            out.push((h.base_offset, h.last_offset()));
            pos += h.size();
        }
        out
    };
    assert_eq!(offsets, vec![(0, 0), (1, 1)]);
    drop(held);
}
