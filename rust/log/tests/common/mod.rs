//! Shared helpers of the integration tests.
#![allow(dead_code)]

use pybroker_log::builder::{BatchBuilder, Record};

/// An uncompressed batch of `count` records of `value_len` bytes, timestamps
/// from `ts`.
pub fn batch(count: usize, value_len: usize, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, ts);
    for i in 0..count {
        b.push(Record::new(
            ts + i as i64,
            Some(b"key"),
            Some(&vec![b'v'; value_len]),
        ));
    }
    b.build()
}

/// (base offset, last offset) of every batch in `data`.
pub fn offsets(data: &[u8]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let h = pybroker_log::batch::check_batch(&data[pos..], usize::MAX).unwrap();
        out.push((h.base_offset, h.last_offset()));
        pos += h.size();
    }
    out
}
