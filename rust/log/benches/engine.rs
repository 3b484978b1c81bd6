//! Micro-benchmarks of the log engine's hot paths (criterion):
//! CRC-32C throughput, append throughput to the page cache, offset lookup
//! latency (segment + sparse index + header scan), the recovery scan and the
//! record validation of a produced batch per codec (`validate.rs`).
//!
//! Run: `cargo bench -p pybroker-log --bench engine` (figures go to
//! bench/RESULTS.md by hand, with the command and machine).

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::{Log, LogConfig, OpenState};

const MIB: usize = 1 << 20;

/// One producer batch of `count` records of `value_len` bytes.
fn batch(count: usize, value_len: usize) -> Vec<u8> {
    let value = vec![b'x'; value_len];
    let mut builder = BatchBuilder::new(0, 1_700_000_000_000);
    for _ in 0..count {
        builder.push(Record::new(1_700_000_000_000, None, Some(&value)));
    }
    builder.build()
}

fn open(dir: &Path, clean_shutdown: bool) -> Log {
    let state = OpenState {
        recovery_point: 0,
        clean_shutdown,
        log_start_offset: 0,
        now_ms: 1_700_000_000_000,
    };
    Log::open(dir, LogConfig::default(), state).expect("open log")
}

fn crc(c: &mut Criterion) {
    let data = vec![0xA5u8; MIB];
    let mut group = c.benchmark_group("crc32c");
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.bench_function("1MiB", |b| b.iter(|| crc32c::crc32c(black_box(&data))));
    group.finish();
}

fn append(c: &mut Criterion) {
    // ~1 MiB batches of 1 KiB records, as a linger/batch.size producer sends them
    let one = batch(1000, 1000);
    let mut group = c.benchmark_group("append");
    group.throughput(Throughput::Bytes(one.len() as u64));
    group.bench_function("1MiB_batch", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                // a fresh log every 256 MiB keeps the benchmark's disk use bounded
                let dir = tempfile::tempdir().expect("tempdir");
                let mut log = open(dir.path(), true);
                let round = (iters - done).min(256);
                let start = Instant::now();
                for _ in 0..round {
                    log.append(black_box(&one), 0, 1_700_000_000_000)
                        .expect("append");
                }
                spent += start.elapsed();
                done += round;
            }
            spent
        })
    });
    group.finish();
}

fn lookup(c: &mut Criterion) {
    // 64 MiB of small batches (10 records of 100 B): a sparse index entry every 4 KiB
    let small = batch(10, 100);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true);
    while log.size_bytes() < 64 * MIB as u64 {
        log.append(&small, 0, 1_700_000_000_000).expect("append");
    }
    let end = log.log_end_offset();
    let mut offset = 0i64;
    c.bench_function("lookup/read_at_offset", |b| {
        b.iter(|| {
            // a stride co-prime with the record count visits offsets all over the log
            offset = (offset + 7_919) % end;
            log.read(black_box(offset), 1, true, None).expect("read")
        })
    });
}

fn recovery(c: &mut Criterion) {
    let one = batch(1000, 1000);
    let dir = tempfile::tempdir().expect("tempdir");
    let size = {
        let mut log = open(dir.path(), true);
        for _ in 0..256 {
            log.append(&one, 0, 1_700_000_000_000).expect("append");
        }
        log.close().expect("close");
        log.size_bytes()
    };
    let mut group = c.benchmark_group("recovery");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(size));
    group.bench_function("scan_256MiB", |b| {
        b.iter(|| {
            let mut log = open(dir.path(), false);
            log.close().expect("close");
        })
    });
    group.finish();
}

fn validate(c: &mut Criterion) {
    use pybroker_log::{batch, codec, validate};
    // ~1 MiB of 1 KiB records, each half pseudo-random and half zeros (about 2:1)
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut builder = BatchBuilder::new(0, 1_700_000_000_000);
    for _ in 0..1000 {
        let mut value = vec![0u8; 1000];
        for b in &mut value[..500] {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = seed as u8;
        }
        builder.push(Record::new(1_700_000_000_000, None, Some(&value)));
    }
    let raw = builder.encode_records();
    let rules = validate::Rules {
        now_ms: 1_700_000_000_000,
        timestamp_after_max_ms: 3_600_000,
        ..validate::Rules::default()
    };
    let mut group = c.benchmark_group("validate");
    group.throughput(Throughput::Bytes(raw.len() as u64));
    for (name, id) in [
        ("none", 0u8),
        ("gzip", 1),
        ("snappy", 2),
        ("lz4", 3),
        ("zstd", 4),
    ] {
        let records = codec::compress(id, &raw).expect("compress");
        let one = builder.build_with_records(&records, id as i16, 1000);
        let h = batch::check_batch(&one, usize::MAX).expect("valid batch");
        group.bench_function(format!("1MiB_{name}"), |b| {
            b.iter(|| validate::check_records(black_box(&one), &h, &rules).expect("valid"))
        });
    }
    group.finish();
}

criterion_group!(benches, crc, append, lookup, recovery, validate);
criterion_main!(benches);
