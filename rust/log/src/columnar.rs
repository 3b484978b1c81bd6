//! Decoding record batches into columns (Arrow layout), for readers that
//! hand records to a columnar engine (the Spark data source).
//!
//! Input: a run of whole v2 batches as a Fetch response carries them (it may
//! end in a partial batch, which is ignored, and may start with a batch that
//! holds offsets before the one asked for). Every codec of `codec.rs` is
//! handled (records decoded by `codec::RecordIter`, strict); control batches
//! are skipped; records outside `[start, end)` are dropped; the CRC of each
//! batch is checked (like a consumer's check.crcs).
//!
//! Output buffers follow the Arrow columnar format so Python can wrap them
//! without copying (`pyarrow.foreign_buffer` + `Array.from_buffers`):
//!
//! ```text
//! key, value       binary: offsets i32[n+1], data u8[], validity bitmap (LSB first)
//! offset           i64[n]
//! timestamp        i64[n] microseconds since the epoch (Spark's timestamp unit)
//! timestamp_type   i32[n] 0 CreateTime, 1 LogAppendTime
//! headers          list offsets i32[n+1] over header entries; entry key
//!                  (string, never null) and value (binary, nullable)
//! ```
//!
//! Limits: decoding stops before a batch that would push either binary data
//! buffer past [`COLUMN_BYTES_MAX`] (i32 offsets) or the row count past
//! `max_rows`; `next_offset` then tells the caller where to continue. This
//! module does no I/O.

use crate::batch::{self, HEADER_SIZE};
use crate::codec;
use crate::error::{LogError, Result};

/// Bound on one binary column's data buffer (Arrow i32 offsets).
pub const COLUMN_BYTES_MAX: usize = 1 << 30;

/// A nullable binary column in Arrow layout.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BinaryColumn {
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    /// Validity bitmap, bit i set when row i is not null (LSB first).
    pub validity: Vec<u8>,
    pub null_count: usize,
}

impl BinaryColumn {
    fn new() -> BinaryColumn {
        BinaryColumn {
            offsets: vec![0],
            ..BinaryColumn::default()
        }
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn push(&mut self, v: Option<&[u8]>) {
        let i = self.len();
        if i.is_multiple_of(8) {
            self.validity.push(0);
        }
        match v {
            Some(b) => {
                self.data.extend_from_slice(b);
                self.validity[i / 8] |= 1 << (i % 8);
            }
            None => self.null_count += 1,
        }
        self.offsets.push(self.data.len() as i32);
    }

    /// The value of row `i` (tests and small callers).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if self.validity[i / 8] & (1 << (i % 8)) == 0 {
            return None;
        }
        Some(&self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }
}

/// Record headers: a list per row of (key, value) entries; null (like Spark's
/// Kafka source) for a record without headers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HeaderColumns {
    /// Entry offsets per row, i32[n+1].
    pub list_offsets: Vec<i32>,
    /// Validity bitmap of the lists (bit clear: no headers).
    pub validity: Vec<u8>,
    pub null_count: usize,
    pub keys: BinaryColumn,
    pub values: BinaryColumn,
}

/// The decoded rows of a run of batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordColumns {
    pub keys: BinaryColumn,
    pub values: BinaryColumn,
    pub offsets: Vec<i64>,
    pub timestamps_us: Vec<i64>,
    pub timestamp_types: Vec<i32>,
    pub headers: Option<HeaderColumns>,
    /// Where to continue: the offset after the last batch consumed (control
    /// and filtered batches included), or `start` when none was.
    pub next_offset: i64,
}

impl RecordColumns {
    pub fn len(&self) -> usize {
        self.offsets.len()
    }
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// Decodes the records of the whole batches in `buf` with offsets in
/// `[start, end)`. See the module doc.
pub fn decode_columns(
    buf: &[u8],
    start: i64,
    end: i64,
    include_headers: bool,
    max_rows: usize,
) -> Result<RecordColumns> {
    decode_columns_committed(buf, start, end, include_headers, max_rows, &[])
}

/// One aborted transaction of a Fetch response (read_committed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// True when the control batch holds an ABORT marker (control record key:
/// version i16, type i16 with 0 = abort, 1 = commit).
fn is_abort_marker(whole: &[u8]) -> Result<bool> {
    let (h, data) = codec::batch_records(whole, codec::DECOMPRESSED_BYTES_MAX)?;
    match codec::RecordIter::new(h, &data).next() {
        Some(r) => Ok(matches!(r?.key, Some(k) if k.len() >= 4 && k[2..4] == [0, 0])),
        None => Ok(false),
    }
}

/// [`decode_columns`] for read_committed: also drops the batches of the
/// `aborted` transactions, as Kafka's consumer does — a transactional batch of
/// producer P is aborted when an aborted entry of P with first offset <= the
/// batch's last offset has been reached and P's ABORT marker has not.
pub fn decode_columns_committed(
    buf: &[u8],
    start: i64,
    end: i64,
    include_headers: bool,
    max_rows: usize,
    aborted: &[AbortedTxn],
) -> Result<RecordColumns> {
    let mut pending: Vec<AbortedTxn> = aborted.to_vec();
    pending.sort_by_key(|a| std::cmp::Reverse(a.first_offset));
    let mut aborting: Vec<i64> = Vec::new();
    let mut out = RecordColumns {
        keys: BinaryColumn::new(),
        values: BinaryColumn::new(),
        offsets: Vec::new(),
        timestamps_us: Vec::new(),
        timestamp_types: Vec::new(),
        headers: include_headers.then(|| HeaderColumns {
            list_offsets: vec![0],
            keys: BinaryColumn::new(),
            values: BinaryColumn::new(),
            ..HeaderColumns::default()
        }),
        next_offset: start,
    };
    let mut pos = 0usize;
    while pos + HEADER_SIZE <= buf.len() && out.next_offset < end {
        let h = batch::BatchHeader::parse(&buf[pos..]);
        if h.size() > buf.len() - pos {
            break; // a partial batch at the end of a fetch response
        }
        let whole = &buf[pos..pos + h.size()];
        let h = batch::check_framing(whole)?;
        let mut skip = false;
        if h.is_control() {
            if aborting.contains(&h.producer_id) && is_abort_marker(whole)? {
                aborting.retain(|p| *p != h.producer_id);
            }
        } else if h.is_transactional() && !aborted.is_empty() {
            while let Some(a) = pending
                .last()
                .copied()
                .filter(|a| a.first_offset <= h.last_offset())
            {
                pending.pop();
                aborting.push(a.producer_id);
            }
            skip = aborting.contains(&h.producer_id);
        }
        if skip || h.next_offset() <= out.next_offset || h.is_control() {
            pos += h.size();
            out.next_offset = out.next_offset.max(h.next_offset());
            continue;
        }
        if batch::compute_crc(whole) != h.crc {
            return Err(LogError::Corrupt(format!(
                "crc mismatch in batch at offset {}",
                h.base_offset
            )));
        }
        let body = &whole[HEADER_SIZE..];
        let owned;
        let data: &[u8] = if h.codec() == 0 {
            body
        } else {
            owned = codec::decompress(h.codec(), body, codec::DECOMPRESSED_BYTES_MAX)?;
            &owned
        };
        if !out.is_empty()
            && (out.len() + h.record_count.max(0) as usize > max_rows
                || out.keys.data.len() + data.len() > COLUMN_BYTES_MAX
                || out.values.data.len() + data.len() > COLUMN_BYTES_MAX)
        {
            break;
        }
        if data.len() > COLUMN_BYTES_MAX {
            return Err(LogError::Corrupt(format!(
                "batch at offset {} decompresses to {} bytes",
                h.base_offset,
                data.len()
            )));
        }
        decode_batch(&h, data, start, end, &mut out)?;
        pos += h.size();
        out.next_offset = out.next_offset.max(h.next_offset());
    }
    Ok(out)
}

fn decode_batch(
    h: &batch::BatchHeader,
    data: &[u8],
    start: i64,
    end: i64,
    out: &mut RecordColumns,
) -> Result<()> {
    let ts_type = i32::from(h.is_log_append_time());
    for r in codec::RecordIter::new(*h, data) {
        let r = r?;
        if r.offset < start || r.offset >= end {
            continue;
        }
        if let Some(hc) = out.headers.as_mut() {
            let row = hc.list_offsets.len() - 1;
            if row.is_multiple_of(8) {
                hc.validity.push(0);
            }
            if r.headers.is_empty() {
                hc.null_count += 1;
            } else {
                hc.validity[row / 8] |= 1 << (row % 8);
            }
            for (k, v) in r.headers.iter() {
                hc.keys.push(Some(k));
                hc.values.push(v);
            }
            hc.list_offsets.push(hc.keys.len() as i32);
        }
        out.keys.push(r.key);
        out.values.push(r.value);
        out.offsets.push(r.offset);
        out.timestamps_us.push(r.timestamp.saturating_mul(1000));
        out.timestamp_types.push(ts_type);
    }
    Ok(())
}

/// Kafka's default partitioner hash (murmur2, seed 0x9747b28c), as the Java
/// client computes it for keyed records: `(murmur2(key) & 0x7fffffff) % n`.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Record};
    use std::io::Write;

    fn batch(base: i64, n: usize) -> BatchBuilder {
        let mut b = BatchBuilder::new(base, 1_000);
        for i in 0..n {
            let mut r = Record::new(1_000 + i as i64, None, Some(format!("v{i}").as_bytes()));
            if i % 2 == 0 {
                r.key = Some(format!("k{i}").into_bytes());
                r.headers = vec![("h".into(), Some(b"x".to_vec())), ("n".into(), None)];
            }
            b.push(r);
        }
        b
    }

    #[test]
    fn decodes_keys_values_and_headers() {
        let buf = batch(10, 5).build();
        let c = decode_columns(&buf, 0, i64::MAX, true, usize::MAX).unwrap();
        assert_eq!(c.offsets, [10, 11, 12, 13, 14]);
        assert_eq!(c.timestamps_us[1], 1_001_000);
        assert_eq!(c.keys.get(0), Some(&b"k0"[..]));
        assert_eq!(c.keys.get(1), None);
        assert_eq!(c.keys.null_count, 2);
        assert_eq!(c.values.get(4), Some(&b"v4"[..]));
        let h = c.headers.unwrap();
        assert_eq!(h.list_offsets, [0, 2, 2, 4, 4, 6]);
        assert_eq!((h.validity.clone(), h.null_count), (vec![0b10101], 2));
        assert_eq!(h.keys.get(1), Some(&b"n"[..]));
        assert_eq!(h.values.get(1), None);
        assert_eq!(c.next_offset, 15);
    }

    #[test]
    fn filters_range_control_batches_and_partial_tail() {
        let mut buf = batch(0, 4).build();
        buf.extend(batch(4, 1).attributes(batch::CONTROL_BIT).build());
        buf.extend(batch(5, 4).build());
        let tail = batch(9, 4).build();
        buf.extend_from_slice(&tail[..tail.len() - 3]);
        let c = decode_columns(&buf, 2, 7, false, usize::MAX).unwrap();
        assert_eq!(c.offsets, [2, 3, 5, 6]);
        assert!(c.headers.is_none());
        assert_eq!(c.next_offset, 9);
        let c = decode_columns(&buf, 0, 100, false, 5).unwrap();
        assert_eq!(c.offsets, [0, 1, 2, 3]);
        assert_eq!(c.next_offset, 5);
    }

    #[test]
    fn every_codec() {
        let b = batch(0, 3);
        let raw = b.encode_records();
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        };
        let snappy = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        let lz4 = {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        };
        let zst = zstd::stream::encode_all(&raw[..], 1).unwrap();
        for (codec, data) in [(1, gz), (2, snappy), (3, lz4), (4, zst)] {
            let buf = b.build_with_records(&data, codec, 3);
            let c = decode_columns(&buf, 0, 3, false, usize::MAX).unwrap();
            assert_eq!(c.values.get(2), Some(&b"v2"[..]), "codec {codec}");
        }
    }

    #[test]
    fn murmur2_matches_kafka() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    #[test]
    fn read_committed_drops_aborted_transactions() {
        let txn = batch::TRANSACTIONAL_BIT;
        let control = |base: i64, pid: i64, kind: u8| {
            let mut b = BatchBuilder::new(base, 1_000).producer(pid, 0, -1);
            b.push(Record::new(1_000, Some(&[0, 0, 0, kind]), Some(b"")));
            b.attributes(txn | batch::CONTROL_BIT).build()
        };
        let data = |base: i64, pid: i64| {
            let mut b = BatchBuilder::new(base, 1_000).producer(pid, 0, 0);
            b.push(Record::new(1_000, None, Some(b"v")));
            b.push(Record::new(1_000, None, Some(b"w")));
            b.attributes(txn).build()
        };
        let mut buf = data(0, 7); // 0-1 aborted (pid 7)
        buf.extend(data(2, 8)); // 2-3 committed (pid 8)
        buf.extend(control(4, 7, 0)); // abort 7
        buf.extend(control(5, 8, 1)); // commit 8
        buf.extend(data(6, 7)); // 6-7: a new, committed transaction of 7
        buf.extend(control(8, 7, 1));
        let aborted = [AbortedTxn {
            producer_id: 7,
            first_offset: 0,
        }];
        let c = decode_columns_committed(&buf, 0, 100, false, usize::MAX, &aborted).unwrap();
        assert_eq!(c.offsets, [2, 3, 6, 7]);
        assert_eq!(c.next_offset, 9);
        let c = decode_columns(&buf, 0, 100, false, usize::MAX).unwrap();
        assert_eq!(c.offsets, [0, 1, 2, 3, 6, 7]);
        // resuming inside the buffer (max_rows) keeps the abort state right
        let c = decode_columns_committed(&buf, 3, 100, false, usize::MAX, &aborted).unwrap();
        assert_eq!(c.offsets, [3, 6, 7]);
    }

    #[test]
    fn bad_crc_is_corrupt() {
        let mut buf = batch(0, 2).build();
        let n = buf.len();
        buf[n - 1] ^= 1;
        assert!(decode_columns(&buf, 0, 10, false, usize::MAX).is_err());
    }
}
