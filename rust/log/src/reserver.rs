//! The blocks reserved ahead of active segments (see `Segment::preallocate_ahead`),
//! reserved and given back by one worker thread of the process instead of by the
//! appending thread.
//!
//! A `fallocate` that reserves a chunk takes the inode's i_data_sem on ext4, which
//! the kernel's writeback holds while it allocates the same file's blocks: right
//! after a bulk load (GBs of dirty pages being written back) one such call on the
//! append path waited as long as the appends it was meant to spare (issue 26). Here
//! the appending thread only queues the job; the worker waits instead. The cut at a
//! roll (giving back what lies past the rolled segment's data, an ftruncate that
//! takes the same lock) is queued too.
//!
//! Order: jobs run one at a time in the order queued, so a segment's cut comes after
//! its reservations. A cut still queued when its segment is truncated (a follower
//! truncating into a rolled segment, which then takes appends again) is not made:
//! the truncation's own cut frees the blocks, and the queued one would cut the new
//! data or extend the file. A reservation still queued when its segment stops being active
//! (rolled, truncated, dropped) is skipped: each segment's jobs share a [`Ticket`],
//! which the segment marks spent under the same lock the worker holds while it
//! reserves; so nothing is reserved past data once the segment has given its blocks
//! back. [`settle`] waits for everything queued so far (a log's close uses it, so a
//! cleanly closed log leaves nothing reserved).

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Whether a segment's queued reservations may still run (not once the segment
/// gave its blocks back or is gone).
#[derive(Debug)]
pub(crate) struct Ticket {
    live: AtomicBool,
    /// Held by the worker while it reserves for this segment.
    running: Mutex<()>,
}

impl Ticket {
    pub(crate) fn new() -> Arc<Ticket> {
        Arc::new(Ticket {
            live: AtomicBool::new(true),
            running: Mutex::new(()),
        })
    }

    /// No reservation of this ticket starts from now on (one running goes on).
    pub(crate) fn retire(&self) {
        self.live.store(false, Ordering::Release);
    }

    /// [`Ticket::retire`], and returns once no reservation of it is running: the
    /// caller's own cut of the file is then the last word on its blocks.
    pub(crate) fn spend(&self) {
        self.retire();
        drop(lock(&self.running));
    }
}

enum Job {
    /// fallocate(KEEP_SIZE) of `len` bytes at `from`, unless the ticket is spent.
    Reserve {
        file: Arc<File>,
        from: u64,
        len: u64,
        ticket: Arc<Ticket>,
    },
    /// Cuts the file to `size` (ext4 frees the blocks past the end even at the
    /// same size) unless the ticket is spent (the segment was truncated since, and
    /// may hold other data now), then gives a chunk back to the budget when
    /// `give_back`.
    Cut {
        file: Arc<File>,
        size: u64,
        give_back: bool,
        ticket: Arc<Ticket>,
    },
    /// Answers once every job queued before it has run.
    Settle(Sender<()>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // a panic elsewhere must not stop the reservations (they are best effort)
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
            .name("log-reserver".into())
            .spawn(move || {
                for job in rx {
                    let _running = lock(&RUNNING);
                    run(job);
                }
            })
            .expect("start the log's block reserver thread");
        Mutex::new(tx)
    })
}

fn send(job: Job) {
    // the worker never ends while the process lives, so the send cannot fail; if it
    // did, the job is dropped: reservations are best effort, and a cut not made
    // leaves blocks past the data (see `Segment::release_preallocated`)
    let _ = lock(queue()).send(job);
}

fn run(job: Job) {
    match job {
        Job::Reserve {
            file,
            from,
            len,
            ticket,
        } => {
            let _running = lock(&ticket.running);
            if ticket.live.load(Ordering::Acquire) {
                fallocate_keep_size(&file, from, len);
            }
        }
        Job::Cut {
            file,
            size,
            give_back,
            ticket,
        } => {
            let running = lock(&ticket.running);
            if ticket.live.load(Ordering::Acquire) {
                // a failure leaves the blocks past the data, as a kill before the cut does
                let _ = file.set_len(size);
            }
            drop(running);
            if give_back {
                crate::segment::give_back_chunk();
            }
        }
        Job::Settle(done) => {
            let _ = done.send(());
        }
    }
}

/// Queues a reservation of `[from, from + len)` of `file` for `ticket`'s segment.
pub(crate) fn reserve(file: Arc<File>, from: u64, len: u64, ticket: Arc<Ticket>) {
    send(Job::Reserve {
        file,
        from,
        len,
        ticket,
    });
}

/// Queues the cut of `file` to `size` (after the reservations queued before it);
/// it is not made once `ticket` is spent.
pub(crate) fn cut(file: Arc<File>, size: u64, give_back: bool, ticket: Arc<Ticket>) {
    send(Job::Cut {
        file,
        size,
        give_back,
        ticket,
    });
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
fn fallocate_keep_size(file: &File, from: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor, no memory passed
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            from as libc::off_t,
            len as libc::off_t,
        )
    };
    // best effort: a file system without fallocate, or a full disk, gets plain appends
    let _ = rc;
}

#[cfg(not(target_os = "linux"))]
fn fallocate_keep_size(_file: &File, _from: u64, _len: u64) {}
