//! Reading one response frame (size prefix included) from a non-blocking
//! socket into a buffer the caller keeps, with as many reads as the bytes
//! already there allow: the replica fetcher's receive (`pybroker._core`'s
//! FetchChannel, issue 26). The caller waits for readiness between calls;
//! the answer is to the one request in flight, so bytes past it are an error.

use std::io::{self, ErrorKind, Read};
use std::mem::ManuallyDrop;
use std::net::TcpStream;
use std::os::fd::FromRawFd;

/// Where the answer being read ends in the buffer, once its size prefix is there.
pub fn frame_end(buf: &[u8], have: usize, max_frame_bytes: usize) -> io::Result<Option<usize>> {
    if have < 4 {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 4 || size as usize > max_frame_bytes {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!("response size {size}"),
        ));
    }
    Ok(Some(4 + size as usize))
}

/// Reads from `fd` until the answer is whole or the socket has nothing more;
/// the bytes still wanted (0: whole). Before the size prefix is known it
/// reads as much as the buffer holds: one request is in flight, so anything
/// past the answer is a broken peer.
pub fn fill(
    fd: i32,
    buf: &mut Vec<u8>,
    have: &mut usize,
    max_frame_bytes: usize,
) -> io::Result<usize> {
    // SAFETY: the caller's socket object keeps `fd` open for this call; the
    // stream is never dropped, so the fd is not closed here.
    let sock = ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd) });
    loop {
        let end = frame_end(buf, *have, max_frame_bytes)?;
        let limit = match end {
            Some(end) if *have > end => {
                return Err(io::Error::new(
                    ErrorKind::InvalidData,
                    "bytes past the answer to the one request in flight",
                ));
            }
            Some(end) if *have == end => return Ok(0),
            Some(end) => end,
            None => buf.len(),
        };
        if buf.len() < limit {
            // zeroed once per growth, not per round
            buf.resize(limit.max(2 * buf.len()).min(max_frame_bytes + 4), 0);
        }
        match (&*sock).read(&mut buf[*have..limit]) {
            Ok(0) => {
                return Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "connection closed by the peer",
                ))
            }
            Ok(n) => *have += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                return Ok(match end {
                    Some(end) => end - *have,
                    None => 4 - *have,
                });
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        client.set_nonblocking(true).unwrap();
        (client, server)
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    fn wait_for(client: &TcpStream, buf: &mut Vec<u8>, have: &mut usize) -> usize {
        // bounded: the bytes are on loopback already or within a few ms
        for _ in 0..2000 {
            let left = fill(client.as_raw_fd(), buf, have, 1 << 20).unwrap();
            if left == 0 {
                return 0;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        fill(client.as_raw_fd(), buf, have, 1 << 20).unwrap()
    }

    #[test]
    fn an_answer_sent_in_pieces_is_read_whole_and_says_what_is_missing() {
        let (client, mut server) = pair();
        let mut buf = vec![0u8; 8];
        let mut have = 0;
        assert_eq!(
            fill(client.as_raw_fd(), &mut buf, &mut have, 1 << 20).unwrap(),
            4
        );
        let frame = framed(&[7u8; 100]);
        server.write_all(&frame[..2]).unwrap();
        server.flush().unwrap();
        // the prefix half there: 2 bytes of it still wanted
        for _ in 0..2000 {
            if fill(client.as_raw_fd(), &mut buf, &mut have, 1 << 20).unwrap() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(have, 2);
        server.write_all(&frame[2..50]).unwrap();
        for _ in 0..2000 {
            if have == 50 {
                break;
            }
            fill(client.as_raw_fd(), &mut buf, &mut have, 1 << 20).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            fill(client.as_raw_fd(), &mut buf, &mut have, 1 << 20).unwrap(),
            54
        );
        server.write_all(&frame[50..]).unwrap();
        assert_eq!(wait_for(&client, &mut buf, &mut have), 0);
        assert_eq!(&buf[..have], &frame[..]); // the buffer grew past its 8 bytes
    }

    #[test]
    fn bytes_past_the_answer_a_bad_size_and_a_close_are_errors() {
        let (client, mut server) = pair();
        let mut buf = vec![0u8; 64];
        let mut have = 0;
        let mut two = framed(&[1u8; 8]);
        two.extend(framed(&[2u8; 8]));
        server.write_all(&two).unwrap();
        let mut err = None;
        for _ in 0..2000 {
            match fill(client.as_raw_fd(), &mut buf, &mut have, 1 << 20) {
                Err(e) => {
                    err = Some(e);
                    break;
                }
                Ok(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        assert_eq!(err.unwrap().kind(), ErrorKind::InvalidData);

        let (client, mut server) = pair();
        let mut have = 0;
        server.write_all(&(2_000_000i32).to_be_bytes()).unwrap();
        let mut err = None;
        for _ in 0..2000 {
            match fill(client.as_raw_fd(), &mut buf, &mut have, 1 << 20) {
                Err(e) => {
                    err = Some(e);
                    break;
                }
                Ok(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        assert_eq!(err.unwrap().kind(), ErrorKind::InvalidData);

        let (client, server) = pair();
        let mut have = 0;
        drop(server);
        let mut err = None;
        for _ in 0..2000 {
            match fill(client.as_raw_fd(), &mut buf, &mut have, 1 << 20) {
                Err(e) => {
                    err = Some(e);
                    break;
                }
                Ok(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        assert_eq!(err.unwrap().kind(), ErrorKind::UnexpectedEof);
    }
}
