//! Zero-copy transfer of a file range to a socket with sendfile(2).
//!
//! No on-disk state. The file offset is passed explicitly, so the file's
//! own cursor (used by appends) is untouched and slices can be sent from
//! several threads at once.
//!
//! Errors come back as the raw `io::Error`; [`is_socket_error`] tells the
//! peer's doing (a reset or closed connection: the client's problem) from
//! the file's (a storage error: the broker's).

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};

use crate::error::{LogError, Result};

/// Sends up to `len` bytes of `file` starting at `position` to `sock_fd`.
/// Returns the bytes written (possibly fewer than asked, 0 when len is 0);
/// EAGAIN before any byte is [`LogError::WouldBlock`]; EINTR is retried.
pub fn sendfile(sock_fd: RawFd, file: &File, position: u64, len: u64) -> Result<u64> {
    if len == 0 {
        return Ok(0);
    }
    let mut off = position as libc::off_t;
    let count = len.min(0x7fff_f000) as usize;
    loop {
        // SAFETY: `off` is a valid, exclusively borrowed off_t; the file
        // descriptor is kept open by `file` for the call; an invalid
        // `sock_fd` only makes the kernel return EBADF.
        let n = unsafe { libc::sendfile(sock_fd, file.as_raw_fd(), &mut off, count) };
        if n >= 0 {
            return Ok(n as u64);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Err(LogError::WouldBlock),
            _ => return Err(err.into()),
        }
    }
}

/// send(2) of `bytes` to `sock_fd` (a slice whose bytes were read when it
/// was made): the same contract as [`sendfile`]. MSG_NOSIGNAL: a closed peer
/// is EPIPE, not a signal.
pub fn send_bytes(sock_fd: RawFd, bytes: &[u8]) -> Result<u64> {
    if bytes.is_empty() {
        return Ok(0);
    }
    loop {
        // SAFETY: `bytes` is valid for reads of its length for the call; an
        // invalid `sock_fd` only makes the kernel return EBADF/ENOTSOCK.
        let n = unsafe {
            libc::send(
                sock_fd,
                bytes.as_ptr().cast::<libc::c_void>(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Ok(n as u64);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Err(LogError::WouldBlock),
            _ => return Err(err.into()),
        }
    }
}

/// True when a sendfile(2) error comes from the socket side: the peer reset
/// or closed the connection, or the network path to it failed. Such errors
/// end one connection; they say nothing about the log file.
pub fn is_socket_error(err: &std::io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::ECONNRESET
                | libc::EPIPE
                | libc::ENOTCONN
                | libc::ETIMEDOUT
                | libc::ECONNABORTED
                | libc::ESHUTDOWN
                | libc::EHOSTUNREACH
                | libc::EHOSTDOWN
                | libc::ENETUNREACH
                | libc::ENETDOWN
                | libc::ENETRESET
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn sends_a_range_and_reports_would_block() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        assert_eq!(sendfile(a.as_raw_fd(), &f, 2, 5).unwrap(), 5);
        let mut got = [0u8; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"23456");
        assert_eq!(send_bytes(a.as_raw_fd(), b"ab").unwrap(), 2);
        let mut got = [0u8; 2];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ab");
        a.set_nonblocking(true).unwrap();
        let big = vec![7u8; 1 << 20];
        f.write_all(&big).unwrap();
        let mut saw_block = false;
        for _ in 0..100 {
            match sendfile(a.as_raw_fd(), &f, 0, 1 << 20) {
                Err(LogError::WouldBlock) => {
                    saw_block = true;
                    break;
                }
                Ok(_) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert!(saw_block);
    }

    #[test]
    fn a_closed_peer_is_a_socket_error() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        match sendfile(a.as_raw_fd(), &f, 0, 10) {
            Err(LogError::Io(e)) => assert!(is_socket_error(&e), "{e}"),
            other => panic!("expected EPIPE, got {other:?}"),
        }
        match send_bytes(a.as_raw_fd(), b"0123") {
            Err(LogError::Io(e)) => assert!(is_socket_error(&e), "{e}"),
            other => panic!("expected EPIPE, got {other:?}"),
        }
        let eio = std::io::Error::from_raw_os_error(libc::EIO);
        assert!(!is_socket_error(&eio));
    }
}
