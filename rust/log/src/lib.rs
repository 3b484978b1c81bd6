//! pybroker's log engine: Kafka's on-disk log format (record batch v2,
//! `.log` / `.index` / `.timeindex` segments), recovery and sendfile.
//! Pure Rust, no Python; `rust/core-py` is the binding.

pub mod batch;
pub mod builder;
pub mod cleaner;
pub mod codec;
pub mod columnar;
pub mod error;
pub mod fetch_response;
pub mod file_cache;
pub mod frame_read;
mod index_file;
pub mod leader_epoch;
pub mod log;
pub mod offset_index;
pub mod producer_state;
pub mod recovery;
mod replication;
pub mod reserver;
pub mod segment;
pub mod sendfile;
pub mod time_index;
pub mod txn;
pub mod txn_index;
pub mod validate;

pub use error::{LogError, Result};
pub use file_cache::FileCache;
pub use log::{AppendInfo, FileSlice, Log, LogConfig, OpenState};
