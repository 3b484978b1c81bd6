//! Fuzzing the produce-path validator (`validate.rs`) and the record decoder
//! (`codec::RecordIter`) with mutated batches: bit flips, truncation, bytes
//! added or cut, huge / negative lengths, over-long varints, header fields
//! changed. Every mutated batch gets a correct batchLength and CRC-32C, so the
//! record-level checks are what decides.
//!
//! Properties: the validator never panics; it accepts a batch exactly when an
//! independent reference decoder (written here, differently, from Kafka's
//! `DefaultRecord` rules) decodes every record of it; and an accepted batch is
//! fully decoded by the crate's readers (`RecordIter`, the columnar decoder).
//! Bounded (a few thousand small cases) so `cargo test` stays fast.

use proptest::prelude::*;

use pybroker_log::batch::{self, CRC_AT, HEADER_SIZE, LENGTH_AT, LOG_OVERHEAD};
use pybroker_log::builder::{put_varlong, BatchBuilder, Record};
use pybroker_log::codec::{self, RecordIter};
use pybroker_log::columnar;
use pybroker_log::validate::{self, Rules};

const DECOMPRESSED_MAX: usize = 1 << 20;

fn rules() -> Rules {
    Rules {
        decompressed_bytes_max: DECOMPRESSED_MAX,
        ..Rules::default()
    }
}

/// The validator as `Log::append` runs it on one batch.
fn validator_accepts(b: &[u8]) -> bool {
    let Ok(h) = batch::check_batch(b, usize::MAX) else {
        return false;
    };
    validate::check_records(b, &h, &rules()).is_ok()
}

// --- reference decoder ------------------------------------------------------

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&mut self) -> Option<u8> {
        let x = *self.b.get(self.at)?;
        self.at += 1;
        Some(x)
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn unsigned(&mut self, width: usize) -> Option<u128> {
        let mut v: u128 = 0;
        for i in 0..width {
            let x = self.byte()?;
            v |= u128::from(x & 0x7f) << (7 * i);
            if x & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn int32(&mut self) -> Option<i32> {
        let u = self.unsigned(5)? as u32;
        Some((u >> 1) as i32 ^ -((u & 1) as i32))
    }
    fn int64(&mut self) -> Option<i64> {
        let u = self.unsigned(10)? as u64;
        Some((u >> 1) as i64 ^ -((u & 1) as i64))
    }
    fn nullable(&mut self) -> Option<()> {
        let n = self.int32()?;
        if n >= 0 {
            self.take(n as usize)?;
        }
        Some(())
    }
    fn done(&self) -> bool {
        self.at == self.b.len()
    }
}

fn be32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// Decodes a batch by Kafka's rules (with the append-time rules of
/// `Rules::default()`); Some(record count) when every byte is accounted for.
fn reference(b: &[u8]) -> Option<usize> {
    if b.len() < HEADER_SIZE || b[16] != 2 {
        return None;
    }
    if be32(b, LENGTH_AT) as i64 + LOG_OVERHEAD as i64 != b.len() as i64 {
        return None;
    }
    if crc32c::crc32c(&b[21..]) != u32::from_be_bytes(b[17..21].try_into().unwrap()) {
        return None;
    }
    let attributes = i16::from_be_bytes([b[21], b[22]]);
    let count = be32(b, 57);
    let producer_id = i64::from_be_bytes(b[43..51].try_into().unwrap());
    let sequence = be32(b, 53);
    let codec = (attributes & 7) as u8;
    if count <= 0 || be32(b, 23) != count - 1 || codec > 4 || attributes & 0x20 != 0 {
        return None;
    }
    if (producer_id >= 0 && sequence < 0) || (attributes & 0x10 != 0 && producer_id < 0) {
        return None;
    }
    let data = codec::decompress(codec, &b[HEADER_SIZE..], DECOMPRESSED_MAX).ok()?;
    let mut c = Cursor { b: &data, at: 0 };
    for i in 0..count {
        let len = c.int32()?;
        let mut r = Cursor {
            b: c.take(usize::try_from(len).ok()?)?,
            at: 0,
        };
        r.byte()?;
        r.int64()?;
        if r.int32()? != i {
            return None;
        }
        r.nullable()?;
        r.nullable()?;
        let headers = r.int32()?;
        if headers < 0 {
            return None;
        }
        for _ in 0..headers {
            let key = r.int32()?;
            r.take(usize::try_from(key).ok()?)?;
            r.nullable()?;
        }
        if !r.done() {
            return None;
        }
    }
    c.done().then_some(count as usize)
}

// --- batches and mutations ---------------------------------------------------

type Rec = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn record() -> impl Strategy<Value = Rec> {
    let bytes = |n| proptest::option::of(proptest::collection::vec(any::<u8>(), 0..n));
    let header = ("[a-z]{0,3}", bytes(4));
    (bytes(6), bytes(12), proptest::collection::vec(header, 0..3))
}

/// A valid batch's header fields and its (uncompressed) records section.
fn valid(recs: &[Rec]) -> BatchBuilder {
    let mut b = BatchBuilder::new(0, 1_000);
    for (i, (k, v, hs)) in recs.iter().enumerate() {
        let mut r = Record::new(1_000 + i as i64, k.as_deref(), v.as_deref());
        r.headers = hs.clone();
        b.push(r);
    }
    b
}

#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(usize, u8),
    SetByte(usize, u8),
    Truncate(usize),
    Cut(usize, usize),
    Append(Vec<u8>),
    /// Overwrite with the zigzag varint of a (possibly huge/negative) value.
    Varint(usize, i64),
    /// Insert `n` continuation bytes: the same value in a longer varint.
    Widen(usize, usize),
    /// recordCount (and lastOffsetDelta with it) plus `d`.
    Count(i32),
    Attributes(i16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<prop::sample::Index>().prop_map(|i| i.index(1 << 16));
    let huge = prop_oneof![
        Just(-1i64),
        Just(-2),
        Just(i32::MAX as i64),
        Just(i32::MIN as i64),
        Just(i64::MAX),
        Just(i64::MIN),
        -300i64..300,
    ];
    prop_oneof![
        (at.clone(), 0u8..8).prop_map(|(p, b)| Mutation::FlipBit(p, b)),
        (at.clone(), any::<u8>()).prop_map(|(p, b)| Mutation::SetByte(p, b)),
        at.clone().prop_map(Mutation::Truncate),
        (at.clone(), 1usize..6).prop_map(|(p, n)| Mutation::Cut(p, n)),
        proptest::collection::vec(any::<u8>(), 1..6).prop_map(Mutation::Append),
        (at.clone(), huge).prop_map(|(p, v)| Mutation::Varint(p, v)),
        (at, 1usize..8).prop_map(|(p, n)| Mutation::Widen(p, n)),
        (-2i32..3).prop_map(Mutation::Count),
        (0i16..64).prop_map(Mutation::Attributes),
    ]
}

fn apply(records: &mut Vec<u8>, count: &mut i32, attributes: &mut i16, m: &Mutation) {
    let n = records.len();
    let at = |p: usize| if n == 0 { 0 } else { p % n };
    match *m {
        Mutation::FlipBit(p, b) if n > 0 => records[at(p)] ^= 1 << b,
        Mutation::SetByte(p, b) if n > 0 => records[at(p)] = b,
        Mutation::Truncate(p) => records.truncate(at(p)),
        Mutation::Cut(p, k) => {
            let s = at(p);
            records.drain(s..(s + k).min(n));
        }
        Mutation::Append(ref extra) => records.extend_from_slice(extra),
        Mutation::Varint(p, v) => {
            let mut enc = Vec::new();
            put_varlong(&mut enc, v);
            let s = at(p);
            let e = (s + enc.len()).min(n);
            records.splice(s..e, enc);
        }
        Mutation::Widen(p, k) if n > 0 => {
            // find the end of the varint at p, then re-encode it k bytes longer
            let s = at(p);
            let mut e = s;
            while e < n && records[e] & 0x80 != 0 {
                e += 1;
            }
            if e < n {
                let last = records[e];
                records[e] = last | 0x80;
                let mut pad = vec![0x80u8; k - 1];
                pad.push(0);
                records.splice(e + 1..e + 1, pad);
            }
        }
        Mutation::Count(d) => *count = count.wrapping_add(d),
        Mutation::Attributes(a) => *attributes = a,
        _ => {}
    }
}

/// The mutated batch, with a correct batchLength and CRC.
fn rebuild(b: &BatchBuilder, records: &[u8], count: i32, attributes: i16) -> Vec<u8> {
    let count = count.max(1); // the builder asserts; a bad count is mutated below
    let mut out = b.build_with_records(records, attributes, count);
    let len = (out.len() - LOG_OVERHEAD) as i32;
    out[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&len.to_be_bytes());
    let crc = batch::compute_crc(&out);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

fn set_count(batch: &mut [u8], count: i32) {
    batch[57..61].copy_from_slice(&count.to_be_bytes());
    batch[23..27].copy_from_slice(&(count.wrapping_sub(1)).to_be_bytes());
    let crc = batch::compute_crc(batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// The properties, for one batch.
fn check(b: &[u8]) -> Result<(), TestCaseError> {
    let accepted = validator_accepts(b);
    let expected = reference(b);
    prop_assert_eq!(
        accepted,
        expected.is_some(),
        "validator vs reference decoder"
    );
    if let Some(n) = expected {
        let (h, data) = codec::batch_records(b, DECOMPRESSED_MAX).unwrap();
        let all: Result<Vec<_>, _> = RecordIter::new(h, &data).collect();
        let all = all.map_err(|e| TestCaseError::fail(format!("RecordIter: {e}")))?;
        prop_assert_eq!(all.len(), n);
        for r in &all {
            prop_assert_eq!(r.headers.iter().count(), r.headers.len());
        }
        let cols = columnar::decode_columns(b, 0, i64::MAX, true, usize::MAX)
            .map_err(|e| TestCaseError::fail(format!("columnar: {e}")))?;
        prop_assert_eq!(cols.len(), n);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1500,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_batches(
        recs in proptest::collection::vec(record(), 1..5),
        codec in 0u8..=4,
        // mutate the records before compression (the decoder behind the
        // decompressor) or the bytes on the wire
        inner in any::<bool>(),
        mutations in proptest::collection::vec(mutation(), 0..3),
    ) {
        let b = valid(&recs);
        let mut records = b.encode_records();
        let mut count = recs.len() as i32;
        let mut attributes = codec as i16;
        if codec == 0 || inner {
            for m in &mutations {
                apply(&mut records, &mut count, &mut attributes, m);
            }
            if codec != 0 {
                records = codec::compress(codec, &records).unwrap();
            }
        } else {
            records = codec::compress(codec, &records).unwrap();
            for m in &mutations {
                apply(&mut records, &mut count, &mut attributes, m);
            }
        }
        let mut batch = rebuild(&b, &records, count, attributes);
        if count < 1 {
            set_count(&mut batch, count);
        }
        check(&batch)?;
    }
}

/// Every single-bit flip of the records section of a small batch.
#[test]
fn every_bit_flip_of_a_small_batch() {
    let mut b = BatchBuilder::new(0, 1_000);
    let mut r = Record::new(1_000, Some(b"key"), Some(b"value"));
    r.headers = vec![("h".into(), Some(b"1".to_vec())), ("z".into(), None)];
    b.push(r);
    b.push(Record::new(1_001, None, Some(b"")));
    let records = b.encode_records();
    let mut accepted = 0;
    for i in 0..records.len() {
        for bit in 0..8 {
            let mut m = records.clone();
            m[i] ^= 1 << bit;
            let batch = rebuild(&b, &m, 2, 0);
            check(&batch).unwrap();
            accepted += usize::from(validator_accepts(&batch));
        }
    }
    // flips inside keys and values keep the batch valid; most others do not
    assert!(accepted > 0 && accepted < records.len() * 8);
}
