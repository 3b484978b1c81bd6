//! Decompression (and, for the cleaner, compression) of batch payloads and
//! a minimal record iterator.
//!
//! Codecs (attributes bits 0-2): 1 gzip (RFC 1952, possibly multi-member),
//! 2 snappy — the xerial framing Kafka's Java client writes
//! (`82 'SNAPPY' 00`, i32 version, i32 compatible version, then chunks of
//! `i32 length | raw snappy block`) and also a plain raw snappy block —
//! 3 lz4 (the LZ4 frame format), 4 zstd (frame format).
//!
//! Decompressed output is bounded by `max_bytes` (an error past it): a small
//! compressed batch cannot make the broker allocate without limit.
//!
//! [`RecordIter`] is the one decoder of the v2 record layout (see
//! `builder.rs`): strict, as Kafka's `DefaultRecord`, and zero-copy over a
//! records section. The append path (`validate.rs`) walks every produced
//! batch with it; timestamp lookup, compaction and the columnar reader
//! use it too. This module does no file I/O.

use std::io::Read;

use crate::batch::{BatchHeader, HEADER_SIZE};
use crate::error::{LogError, Result};

/// Default bound on one batch's decompressed size.
pub const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";

fn corrupt(what: &str, e: impl std::fmt::Display) -> LogError {
    LogError::Corrupt(format!("{what}: {e}"))
}

/// Initial output capacity per compressed byte, so that the output Vec is
/// not regrown (and copied) from empty on every batch (`cargo bench --bench
/// engine -- validate`: lz4 and zstd ~5% faster).
const EXPANSION_GUESS: usize = 4;

fn read_bounded(
    r: impl Read,
    what: &str,
    compressed_len: usize,
    max_bytes: usize,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(
        compressed_len
            .saturating_mul(EXPANSION_GUESS)
            .min(max_bytes),
    );
    r.take(max_bytes as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(what, e))?;
    if out.len() > max_bytes {
        return Err(LogError::Corrupt(format!(
            "{what}: decompresses past {max_bytes} bytes"
        )));
    }
    Ok(out)
}

fn snappy_raw(data: &[u8], out: &mut Vec<u8>, max_bytes: usize) -> Result<()> {
    let n = snap::raw::decompress_len(data).map_err(|e| corrupt("snappy", e))?;
    if out.len() + n > max_bytes {
        return Err(LogError::Corrupt(format!(
            "snappy: decompresses past {max_bytes} bytes"
        )));
    }
    let start = out.len();
    out.resize(start + n, 0);
    snap::raw::Decoder::new()
        .decompress(data, &mut out[start..])
        .map_err(|e| corrupt("snappy", e))?;
    Ok(())
}

fn snappy(data: &[u8], max_bytes: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if data.len() >= 16 && data.starts_with(XERIAL_MAGIC) {
        let mut pos = 16;
        while pos < data.len() {
            if pos + 4 > data.len() {
                return Err(LogError::Corrupt(
                    "snappy: truncated xerial chunk length".into(),
                ));
            }
            let n = u32::from_be_bytes(data[pos..pos + 4].try_into().unwrap()) as usize;
            pos += 4;
            let chunk = data
                .get(pos..pos + n)
                .ok_or_else(|| LogError::Corrupt("snappy: truncated xerial chunk".into()))?;
            snappy_raw(chunk, &mut out, max_bytes)?;
            pos += n;
        }
    } else {
        snappy_raw(data, &mut out, max_bytes)?;
    }
    Ok(out)
}

/// Decompresses `data` compressed with `codec` (0 returns a copy).
pub fn decompress(codec: u8, data: &[u8], max_bytes: usize) -> Result<Vec<u8>> {
    match codec {
        0 => Ok(data.to_vec()),
        1 => read_bounded(
            flate2::read::MultiGzDecoder::new(data),
            "gzip",
            data.len(),
            max_bytes,
        ),
        2 => snappy(data, max_bytes),
        3 => read_bounded(
            lz4_flex::frame::FrameDecoder::new(data),
            "lz4",
            data.len(),
            max_bytes,
        ),
        4 => {
            let d = zstd::stream::read::Decoder::new(data).map_err(|e| corrupt("zstd", e))?;
            read_bounded(d, "zstd", data.len(), max_bytes)
        }
        c => Err(LogError::Corrupt(format!("unknown compression codec {c}"))),
    }
}

/// Input bytes per xerial snappy chunk (Kafka's default block size).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// Compresses a records section with `codec` (0 returns a copy), as the
/// cleaner rewrites compacted batches: gzip (default level), snappy with
/// the xerial framing Kafka writes, lz4 frame, zstd (level 3).
pub fn compress(codec: u8, data: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    match codec {
        0 => Ok(data.to_vec()),
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data)?;
            Ok(e.finish()?)
        }
        2 => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK_BYTES) {
                let c = enc.compress_vec(chunk).map_err(|e| corrupt("snappy", e))?;
                out.extend_from_slice(&(c.len() as i32).to_be_bytes());
                out.extend_from_slice(&c);
            }
            Ok(out)
        }
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data)?;
            e.finish().map_err(|e| corrupt("lz4", e))
        }
        4 => Ok(zstd::stream::encode_all(data, 3)?),
        c => Err(LogError::Corrupt(format!("unknown compression codec {c}"))),
    }
}

/// The records section of a whole batch, decompressed when needed.
pub fn batch_records(batch: &[u8], max_bytes: usize) -> Result<(BatchHeader, Vec<u8>)> {
    let h = crate::batch::check_framing(batch)?;
    let body = &batch[HEADER_SIZE..h.size()];
    Ok((h, decompress(h.codec(), body, max_bytes)?))
}

/// Reads a zigzag varint/varlong at `*pos` (up to 10 bytes; lenient about
/// the declared width, for readers of trusted data).
pub fn get_varlong(b: &[u8], pos: &mut usize) -> Result<i64> {
    let mut z: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *b
            .get(*pos)
            .ok_or_else(|| LogError::Corrupt("truncated varint".into()))?;
        *pos += 1;
        z |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    Err(LogError::Corrupt("varint longer than 10 bytes".into()))
}

fn invalid(msg: impl Into<String>) -> LogError {
    LogError::InvalidRecord(msg.into())
}

/// Reads a zigzag varint of at most 5 bytes (an int32 field), as Kafka's
/// `ByteUtils.readVarint`: a continuation bit in the 5th byte is an error;
/// bits past the 32nd are dropped.
pub fn read_varint(b: &[u8], pos: &mut usize) -> Result<i32> {
    let mut z: u32 = 0;
    for i in 0..5 {
        let byte = *b
            .get(*pos)
            .ok_or_else(|| invalid("record ends inside a varint"))?;
        *pos += 1;
        z |= ((byte & 0x7f) as u32) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(((z >> 1) as i32) ^ -((z & 1) as i32));
        }
    }
    Err(invalid("varint longer than 5 bytes"))
}

/// Reads a zigzag varlong of at most 10 bytes (an int64 field), as Kafka's
/// `ByteUtils.readVarlong`.
pub fn read_varlong(b: &[u8], pos: &mut usize) -> Result<i64> {
    let mut z: u64 = 0;
    for i in 0..10 {
        let byte = *b
            .get(*pos)
            .ok_or_else(|| invalid("record ends inside a varlong"))?;
        *pos += 1;
        z |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    Err(invalid("varlong longer than 10 bytes"))
}

/// A varint length then that many bytes; any negative length is null (as
/// Kafka's `Utils.readBytes`). The bytes must lie inside `b`.
fn read_bytes<'a>(b: &'a [u8], pos: &mut usize, what: &str) -> Result<Option<&'a [u8]>> {
    let n = read_varint(b, pos)?;
    if n < 0 {
        return Ok(None);
    }
    let s = b
        .get(*pos..*pos + n as usize)
        .ok_or_else(|| invalid(format!("{what} length {n} runs past the record")))?;
    *pos += n as usize;
    Ok(Some(s))
}

/// The headers of one record, already checked by [`RecordIter`]: `count`
/// entries of `keyLength varint | key | valueLength varint | value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a> {
    data: &'a [u8],
    count: usize,
}

impl<'a> Headers<'a> {
    pub fn len(&self) -> usize {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// (key, value) of each header; value None is a null header value.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> {
        let data = self.data;
        let mut pos = 0usize;
        (0..self.count).map_while(move |_| {
            // cannot fail: RecordIter decoded these bytes before handing them out
            let key = read_bytes(data, &mut pos, "header key").ok()??;
            let value = read_bytes(data, &mut pos, "header value").ok()?;
            Some((key, value))
        })
    }
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The whole record as stored, its length varint included.
    pub raw: &'a [u8],
    pub attributes: i8,
    pub offset_delta: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Headers<'a>,
}

/// Iterates the records of a (decompressed) records section — the one
/// record decoder of the crate. Strict, as Kafka's `DefaultRecord.readFrom`
/// and `DefaultRecordBatch.RecordIterator` (errors are
/// [`LogError::InvalidRecord`], after which the iterator ends):
///
/// * varints at most 5 bytes (int32 fields), varlongs at most 10 (the
///   timestamp delta);
/// * a record length must be >= 0, lie inside the section and equal the
///   bytes its fields take; a key, value or header may not run past it;
/// * a header count may not be negative nor exceed the bytes left, a
///   header key length may not be negative (any negative key, value or
///   header value length is null);
/// * exactly `recordCount` records: the section may neither end early nor
///   hold bytes after the last one (a negative count is an error).
///
/// It does not look at offset deltas (a compacted batch has gaps); the
/// append-time rules on them are in `validate.rs`.
pub struct RecordIter<'a> {
    header: BatchHeader,
    data: &'a [u8],
    pos: usize,
    read: i32,
    done: bool,
}

impl<'a> RecordIter<'a> {
    pub fn new(header: BatchHeader, data: &'a [u8]) -> RecordIter<'a> {
        RecordIter {
            header,
            data,
            pos: 0,
            read: 0,
            done: false,
        }
    }

    fn decode(&mut self) -> Result<RecordView<'a>> {
        let d = self.data;
        let start = self.pos;
        if start == d.len() {
            return Err(invalid(format!(
                "the batch ends after {} of its {} records",
                self.read - 1,
                self.header.record_count
            )));
        }
        let mut p = start;
        let len = read_varint(d, &mut p)?;
        let body = p;
        if len < 0 || len as usize > d.len() - body {
            return Err(invalid(format!(
                "record length {len} with {} bytes left in the batch",
                d.len() - body
            )));
        }
        let end = body + len as usize;
        let r = &d[..end];
        let attributes =
            *r.get(p)
                .ok_or_else(|| invalid("record length 0 leaves no attributes"))? as i8;
        p += 1;
        let timestamp_delta = read_varlong(r, &mut p)?;
        let offset_delta = read_varint(r, &mut p)?;
        let key = read_bytes(r, &mut p, "key")?;
        let value = read_bytes(r, &mut p, "value")?;
        let count = read_varint(r, &mut p)?;
        if count < 0 || count as usize > end - p {
            return Err(invalid(format!(
                "header count {count} with {} bytes left in the record",
                end - p
            )));
        }
        let headers_at = p;
        for _ in 0..count {
            let key_len = read_varint(r, &mut p)?;
            if key_len < 0 {
                return Err(invalid(format!("negative header key length {key_len}")));
            }
            p = p
                .checked_add(key_len as usize)
                .filter(|e| *e <= end)
                .ok_or_else(|| {
                    invalid(format!("header key length {key_len} runs past the record"))
                })?;
            read_bytes(r, &mut p, "header value")?;
        }
        if p != end {
            return Err(invalid(format!(
                "record length {len} but its fields take {} bytes",
                p - body
            )));
        }
        self.pos = end;
        let h = &self.header;
        let timestamp = if h.is_log_append_time() {
            h.max_timestamp
        } else {
            h.base_timestamp.wrapping_add(timestamp_delta)
        };
        Ok(RecordView {
            raw: &d[start..end],
            attributes,
            offset_delta,
            offset: h.base_offset.wrapping_add(offset_delta as i64),
            timestamp,
            key,
            value,
            headers: Headers {
                data: &d[headers_at..end],
                count: count as usize,
            },
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let count = self.header.record_count;
        if self.done || self.read >= count.max(0) {
            if !self.done && count < 0 {
                self.done = true;
                return Some(Err(invalid(format!("record count {count}"))));
            }
            return None;
        }
        self.read += 1;
        let mut r = self.decode();
        if r.is_ok() && self.read == count && self.pos != self.data.len() {
            r = Err(invalid(format!(
                "{} bytes after the last of {count} records",
                self.data.len() - self.pos
            )));
        }
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Record};
    use std::io::Write;

    fn sample() -> BatchBuilder {
        let mut b = BatchBuilder::new(10, 1000);
        b.push(Record::new(1000, Some(b"k"), Some(b"hello")));
        b.push(Record::new(990, None, None));
        b.push(Record::new(1005, Some(b""), Some(b"x")));
        b
    }

    fn check(batch: &[u8]) {
        let (h, data) = batch_records(batch, DECOMPRESSED_BYTES_MAX).unwrap();
        let recs: Vec<_> = RecordIter::new(h, &data).map(|r| r.unwrap()).collect();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].offset, 10);
        assert_eq!(recs[0].key, Some(&b"k"[..]));
        assert_eq!(recs[0].value, Some(&b"hello"[..]));
        assert_eq!(recs[1].timestamp, 990);
        assert_eq!((recs[1].key, recs[1].value), (None, None));
        assert_eq!((recs[2].offset, recs[2].timestamp), (12, 1005));
    }

    #[test]
    fn uncompressed_records() {
        check(&sample().build());
    }

    #[test]
    fn every_codec_round_trips() {
        let b = sample();
        let raw = b.encode_records();
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        };
        let snappy_raw = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&1i32.to_be_bytes());
        xerial.extend_from_slice(&1i32.to_be_bytes());
        for chunk in raw.chunks(7) {
            let c = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(c.len() as i32).to_be_bytes());
            xerial.extend_from_slice(&c);
        }
        let lz4 = {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(&raw).unwrap();
            e.finish().unwrap()
        };
        let zst = zstd::stream::encode_all(&raw[..], 1).unwrap();
        for (codec, data) in [(1, gz), (2, snappy_raw), (2, xerial), (3, lz4), (4, zst)] {
            check(&b.build_with_records(&data, codec, 3));
        }
    }

    #[test]
    fn compress_round_trips_every_codec() {
        let raw: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for codec in 0..=4 {
            let c = compress(codec, &raw).unwrap();
            assert_eq!(
                decompress(codec, &c, 1 << 20).unwrap(),
                raw,
                "codec {codec}"
            );
        }
        assert!(compress(2, &raw).unwrap().starts_with(XERIAL_MAGIC));
        assert!(compress(5, &raw).is_err());
    }

    #[test]
    fn decompression_is_bounded() {
        let raw = vec![0u8; 10_000];
        let zst = zstd::stream::encode_all(&raw[..], 1).unwrap();
        assert!(decompress(4, &zst, 1000).is_err());
        assert_eq!(decompress(4, &zst, 10_000).unwrap().len(), 10_000);
        assert!(decompress(7, &zst, 10_000).is_err());
    }

    #[test]
    fn log_append_time_records_take_max_timestamp() {
        let mut b = sample().build();
        let (head, rest) = b.split_at_mut(HEADER_SIZE);
        crate::batch::set_log_append_time(head, rest, 4242);
        let (h, data) = batch_records(&b, DECOMPRESSED_BYTES_MAX).unwrap();
        assert!(RecordIter::new(h, &data).all(|r| r.unwrap().timestamp == 4242));
    }
}
