//! A follower's reading of a Fetch response frame (v12, the version the
//! replica fetcher speaks), so the fetcher's hot path walks the answer
//! without building Python objects per partition.
//!
//! The message is declared once, as data, in Python
//! (`pybroker/protocol/messages/fetch.py`); this walk reads only the fields a
//! follower uses and skips the rest by their wire types, and a Python test
//! checks it against frames the Python codec encodes. Layout, after the
//! 4-byte size prefix (not part of `frame`):
//!
//! ```text
//! correlation_id int32, header tagged fields            (response header v1)
//! throttle_time_ms int32, error_code int16, session_id int32
//! responses: compact array of
//!   topic compact string
//!   partitions: compact array of
//!     partition_index int32, error_code int16, high_watermark int64,
//!     last_stable_offset int64, log_start_offset int64,
//!     aborted_transactions compact nullable array of
//!       (producer_id int64, first_offset int64, tagged fields)
//!     preferred_read_replica int32
//!     records compact nullable bytes
//!     tagged fields (diverging_epoch 0, current_leader 1, snapshot_id 2)
//!   tagged fields
//! tagged fields (node_endpoints 0, v16+)
//! ```
//!
//! Records stay where they are: a partition gives the byte range of its
//! records in `frame`. Every length is checked against the bytes left before
//! it is used, so a malformed frame is an error, never a panic or a large
//! allocation.

use std::ops::Range;

use crate::error::{LogError, Result};

/// The one Fetch version this walk reads.
pub const FETCH_RESPONSE_VERSION: i16 = 12;

/// One partition of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// Index into [`FetchResponse::topics`].
    pub topic: usize,
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Where the partition's records are in the frame (empty when null or none).
    pub records: Range<usize>,
}

/// The fields of a Fetch response a follower needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    pub correlation_id: i32,
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub session_id: i32,
    pub topics: Vec<String>,
    pub partitions: Vec<FetchedPartition>,
}

/// Reads `frame` (a Fetch v12 response without its size prefix).
pub fn parse(frame: &[u8]) -> Result<FetchResponse> {
    let mut r = Reader { buf: frame, pos: 0 };
    let correlation_id = r.i32()?;
    r.skip_tagged_fields()?;
    let throttle_time_ms = r.i32()?;
    let error_code = r.i16()?;
    let session_id = r.i32()?;
    let mut topics = Vec::new();
    let mut partitions = Vec::new();
    // each element takes at least one byte: a count above the bytes left is malformed
    let topic_count = r.compact_len(1)?.unwrap_or(0);
    for _ in 0..topic_count {
        let name = r.compact_string()?;
        let topic = topics.len();
        topics.push(name);
        let count = r.compact_len(1)?.unwrap_or(0);
        for _ in 0..count {
            let partition = r.i32()?;
            let error_code = r.i16()?;
            let high_watermark = r.i64()?;
            let last_stable_offset = r.i64()?;
            let log_start_offset = r.i64()?;
            let aborted = r.compact_len(1)?.unwrap_or(0);
            for _ in 0..aborted {
                r.take(16)?;
                r.skip_tagged_fields()?;
            }
            let _preferred_read_replica = r.i32()?;
            let records = match r.compact_len(1)? {
                None => r.pos..r.pos,
                Some(n) => {
                    let start = r.pos;
                    r.take(n)?;
                    start..start + n
                }
            };
            r.skip_tagged_fields()?;
            partitions.push(FetchedPartition {
                topic,
                partition,
                error_code,
                high_watermark,
                last_stable_offset,
                log_start_offset,
                records,
            });
        }
        r.skip_tagged_fields()?;
    }
    r.skip_tagged_fields()?;
    Ok(FetchResponse {
        correlation_id,
        throttle_time_ms,
        error_code,
        session_id,
        topics,
        partitions,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn malformed(what: &str, at: usize) -> LogError {
    LogError::Corrupt(format!("malformed Fetch response: {what} at byte {at}"))
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| malformed("truncated", self.pos))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn uvarint(&mut self) -> Result<u64> {
        let at = self.pos;
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("varint longer than 5 bytes", at))
    }

    /// A compact length (stored plus one; 0 is null), each element at least
    /// `min_element` bytes, so it cannot exceed what is left.
    fn compact_len(&mut self, min_element: usize) -> Result<Option<usize>> {
        let at = self.pos;
        let raw = self.uvarint()?;
        if raw == 0 {
            return Ok(None);
        }
        let n = usize::try_from(raw - 1).map_err(|_| malformed("length", at))?;
        let left = self.buf.len() - self.pos;
        if n.checked_mul(min_element).is_none_or(|bytes| bytes > left) {
            return Err(malformed("length past the end", at));
        }
        Ok(Some(n))
    }

    fn compact_string(&mut self) -> Result<String> {
        let at = self.pos;
        let n = self
            .compact_len(1)?
            .ok_or_else(|| malformed("null topic name", at))?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| malformed("topic name not UTF-8", at))
    }

    fn skip_tagged_fields(&mut self) -> Result<()> {
        let at = self.pos;
        let count = self.uvarint()?;
        if count > (self.buf.len() - self.pos) as u64 {
            return Err(malformed("tagged field count past the end", at));
        }
        for _ in 0..count {
            self.uvarint()?; // the tag
            let size = self.uvarint()?;
            let size = usize::try_from(size).map_err(|_| malformed("tagged field size", at))?;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uvarint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// One topic "t" with the given partitions (index, records).
    fn frame(parts: &[(i32, Option<&[u8]>)]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend(7i32.to_be_bytes());
        f.push(0);
        f.extend(0i32.to_be_bytes());
        f.extend(0i16.to_be_bytes());
        f.extend(42i32.to_be_bytes());
        uvarint(&mut f, 2);
        uvarint(&mut f, 2);
        f.push(b't');
        uvarint(&mut f, parts.len() as u64 + 1);
        for (index, records) in parts {
            f.extend(index.to_be_bytes());
            f.extend(0i16.to_be_bytes());
            f.extend(100i64.to_be_bytes());
            f.extend(99i64.to_be_bytes());
            f.extend(3i64.to_be_bytes());
            uvarint(&mut f, 2); // one aborted transaction
            f.extend(5i64.to_be_bytes());
            f.extend(6i64.to_be_bytes());
            f.push(0);
            f.extend((-1i32).to_be_bytes());
            match records {
                None => f.push(0),
                Some(r) => {
                    uvarint(&mut f, r.len() as u64 + 1);
                    f.extend(*r);
                }
            }
            // a tagged diverging_epoch the walk skips
            uvarint(&mut f, 1);
            uvarint(&mut f, 0);
            uvarint(&mut f, 13);
            f.extend([0u8; 13]);
        }
        f.push(0);
        f.push(0);
        f
    }

    #[test]
    fn reads_the_fields_and_the_records_ranges() {
        let f = frame(&[(0, Some(b"abcd")), (1, None), (2, Some(b""))]);
        let r = parse(&f).unwrap();
        assert_eq!((r.correlation_id, r.session_id, r.error_code), (7, 42, 0));
        assert_eq!(r.topics, vec!["t".to_string()]);
        assert_eq!(r.partitions.len(), 3);
        let p = &r.partitions[0];
        assert_eq!(
            (
                p.partition,
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset
            ),
            (0, 100, 99, 3)
        );
        assert_eq!(&f[p.records.clone()], b"abcd");
        assert!(r.partitions[1].records.is_empty());
        assert!(r.partitions[2].records.is_empty());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let f = frame(&[(0, Some(b"abcd")), (1, None)]);
        for end in 0..f.len() {
            assert!(parse(&f[..end]).is_err(), "prefix of {end} bytes parsed");
        }
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating() {
        let mut f = Vec::new();
        f.extend(7i32.to_be_bytes());
        f.push(0);
        f.extend([0u8; 10]);
        uvarint(&mut f, u32::MAX as u64);
        assert!(matches!(parse(&f), Err(LogError::Corrupt(_))));
    }
}
