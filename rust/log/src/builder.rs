//! A small encoder of uncompressed v2 record batches.
//!
//! Used by tests and by broker-internal writers (e.g. control or offset
//! commit records). Producer batches are never re-encoded. Layout of each
//! record (varints are zigzag, -1 length = null):
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value | headerCount varint | headers
//! ```

use crate::batch::{self, HEADER_SIZE};

/// One record to encode.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Record {
    pub fn new(timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Record {
        Record {
            timestamp,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
        }
    }
}

/// Appends a zigzag varint (used for both varint and varlong fields).
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// Builds one uncompressed batch.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    base_offset: i64,
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    attributes: i16,
    records: Vec<Record>,
}

impl BatchBuilder {
    pub fn new(base_offset: i64, base_timestamp: i64) -> BatchBuilder {
        BatchBuilder {
            base_offset,
            base_timestamp,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            attributes: 0,
            records: Vec::new(),
        }
    }

    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> BatchBuilder {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets the attributes (codec bits must stay 0: records are not compressed).
    pub fn attributes(mut self, attributes: i16) -> BatchBuilder {
        self.attributes = attributes & !batch::CODEC_MASK;
        self
    }

    pub fn push(&mut self, r: Record) -> &mut BatchBuilder {
        self.records.push(r);
        self
    }

    /// Encodes the records (without the header) as they sit after it.
    pub fn encode_records(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut body = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            body.clear();
            body.push(0);
            put_varlong(&mut body, r.timestamp - self.base_timestamp);
            put_varlong(&mut body, i as i64);
            put_bytes(&mut body, r.key.as_deref());
            put_bytes(&mut body, r.value.as_deref());
            put_varlong(&mut body, r.headers.len() as i64);
            for (k, v) in &r.headers {
                put_bytes(&mut body, Some(k.as_bytes()));
                put_bytes(&mut body, v.as_deref());
            }
            put_varlong(&mut out, body.len() as i64);
            out.extend_from_slice(&body);
        }
        out
    }

    /// Encodes the batch with a valid CRC. Panics when it holds no record.
    pub fn build(&self) -> Vec<u8> {
        let records = self.encode_records();
        self.build_with_records(&records, self.attributes, self.records.len() as i32)
    }

    /// Encodes a header around already encoded (possibly compressed) records.
    pub fn build_with_records(&self, records: &[u8], attributes: i16, count: i32) -> Vec<u8> {
        assert!(count > 0, "a batch holds at least one record");
        let max_ts = self
            .records
            .iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(self.base_timestamp);
        let mut b = Vec::with_capacity(HEADER_SIZE + records.len());
        b.extend_from_slice(&self.base_offset.to_be_bytes());
        b.extend_from_slice(
            &((HEADER_SIZE - batch::LOG_OVERHEAD + records.len()) as i32).to_be_bytes(),
        );
        b.extend_from_slice(&0i32.to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&attributes.to_be_bytes());
        b.extend_from_slice(&(count - 1).to_be_bytes());
        b.extend_from_slice(&self.base_timestamp.to_be_bytes());
        b.extend_from_slice(&max_ts.to_be_bytes());
        b.extend_from_slice(&self.producer_id.to_be_bytes());
        b.extend_from_slice(&self.producer_epoch.to_be_bytes());
        b.extend_from_slice(&self.base_sequence.to_be_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        b.extend_from_slice(records);
        let crc = batch::compute_crc(&b);
        b[batch::CRC_AT..batch::CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_varints() {
        let enc = |v| {
            let mut o = Vec::new();
            put_varlong(&mut o, v);
            o
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(-1), [1]);
        assert_eq!(enc(1), [2]);
        assert_eq!(enc(63), [126]);
        assert_eq!(enc(64), [0x80, 1]);
        assert_eq!(enc(-65), [0x81, 1]);
    }
}
