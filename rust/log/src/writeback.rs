//! Writeback of a segment's older data, started by the log itself as the segment
//! grows (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), on a worker thread of its own.
//!
//! Without it the page cache keeps every appended byte dirty until the kernel's
//! flusher takes it: after a bulk load of a few GB that is ~2 GB dirty (the
//! background threshold, 10 % of memory), which the flusher then writes back all at
//! once while the broker serves the next load: the cores and the disk go to that
//! writeback just when a latency-sensitive produce comes in (issue 26). Started here a
//! few MiB at a time, behind the append position, the writeback follows the appends
//! instead, and the dirty pages of a busy log stay at a few MiB a segment.
//!
//! Only writeback is started: nothing waits for it, and it promises nothing about
//! durability (that stays `flush()`'s fsync, per `log.flush.interval.*`). The pages
//! stay in the page cache, clean, so reads and sendfile still find them. The range
//! stops a MiB short of the append position, on a page boundary: the pages still
//! being filled are not written out only to be dirtied again.
//!
//! The worker is apart from the reserver's (`reserver.rs`): a writeback may wait for
//! the device's queue while GBs are in flight, and the blocks reserved ahead of the
//! appends must not wait behind it. Jobs run in order; a range past the file's end
//! (the segment truncated since) writes nothing.

use std::fs::File;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The writeback of a segment's data is started once this much lies behind...
pub(crate) const WRITEBACK_CHUNK: u64 = 4 << 20;
/// ... this far behind its append position (the pages still being filled).
pub(crate) const WRITEBACK_LAG: u64 = 1 << 20;
const PAGE: u64 = 4096;

enum Job {
    /// sync_file_range(WRITE) of `[from, from + len)`.
    Write {
        file: Arc<File>,
        from: u64,
        len: u64,
    },
    /// Answers once every job queued before it has run.
    Settle(Sender<()>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // a panic elsewhere must not stop the writeback (it is best effort)
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held by the worker around each job; a test holds it to show the appends do not
/// wait for the worker.
static RUNNING: Mutex<()> = Mutex::new(());

fn queue() -> &'static Mutex<Sender<Job>> {
    static QUEUE: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("log-writeback".into())
            .spawn(move || {
                for job in rx {
                    let _running = lock(&RUNNING);
                    run(job);
                }
            })
            .expect("start the log's writeback thread");
        Mutex::new(tx)
    })
}

fn send(job: Job) {
    // the worker never ends while the process lives; if a send failed, the job is
    // dropped and the kernel's flusher writes the range back as it would have
    let _ = lock(queue()).send(job);
}

fn run(job: Job) {
    match job {
        Job::Write { file, from, len } => start_writeback(&file, from, len),
        Job::Settle(done) => {
            let _ = done.send(());
        }
    }
}

/// Where the data of a segment of `size` bytes may be written back up to now: a
/// page boundary at least [`WRITEBACK_LAG`] behind its end.
pub(crate) fn settled_end(size: u64) -> u64 {
    size.saturating_sub(WRITEBACK_LAG) / PAGE * PAGE
}

/// The start of the page holding `position` (a range asked from there on covers it).
pub(crate) fn page_start(position: u64) -> u64 {
    position / PAGE * PAGE
}

/// Queues the start of the writeback of `[from, until)` of `file`.
pub(crate) fn write_back(file: Arc<File>, from: u64, until: u64) {
    if until > from {
        #[cfg(test)]
        tests::record(&file, from, until);
        send(Job::Write {
            file,
            from,
            len: until - from,
        });
    }
}

/// Waits until every job queued so far has run.
pub fn settle() {
    let (tx, rx) = mpsc::channel();
    send(Job::Settle(tx));
    let _ = rx.recv();
}

/// Holds the worker between jobs until the guard is dropped (tests).
#[cfg(test)]
pub(crate) fn hold() -> MutexGuard<'static, ()> {
    lock(&RUNNING)
}

#[cfg(target_os = "linux")]
fn start_writeback(file: &File, from: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor, no memory passed
    let rc = unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            from as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        )
    };
    // best effort: on a failure the kernel's flusher writes the range back later
    let _ = rc;
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _from: u64, _len: u64) {}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::path::PathBuf;
    use std::sync::Mutex;

    /// The ranges asked for, by file path (tests run in parallel, each in a temp dir
    /// of its own; an inode number may be reused as soon as a test's dir is removed).
    type Ranges = HashMap<PathBuf, Vec<(u64, u64)>>;
    static ASKED: Mutex<Option<Ranges>> = Mutex::new(None);

    fn key(file: &File) -> PathBuf {
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap()
    }

    pub(crate) fn record(file: &File, from: u64, until: u64) {
        let mut asked = super::lock(&ASKED);
        asked
            .get_or_insert_with(HashMap::new)
            .entry(key(file))
            .or_default()
            .push((from, until));
    }

    /// The ranges whose writeback was asked for `file`, in order.
    pub(crate) fn asked(file: &File) -> Vec<(u64, u64)> {
        super::lock(&ASKED)
            .as_ref()
            .and_then(|m| m.get(&key(file)).cloned())
            .unwrap_or_default()
    }

    #[test]
    fn the_settled_end_is_a_page_a_mib_behind() {
        assert_eq!(super::settled_end(0), 0);
        assert_eq!(super::settled_end(super::WRITEBACK_LAG), 0);
        assert_eq!(super::settled_end(super::WRITEBACK_LAG + 4095), 0);
        assert_eq!(super::settled_end(super::WRITEBACK_LAG + 4096), 4096);
        assert_eq!(super::settled_end(10 << 20), 9 << 20);
    }
}
