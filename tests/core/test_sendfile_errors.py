"""FileSlice.sendfile's error mapping: the socket side failing (the peer reset or
closed the connection) is an OSError subclass with its errno, the connection's end;
never StorageError, which means the log's storage failed."""

from __future__ import annotations

import errno
import socket
import select
import struct

from pybroker._core import PartitionLog, StorageError, build_batch


def a_slice(tmp_path):  # type: ignore[no-untyped-def]
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append(build_batch([None], [b"v" * 200_000], 1_000), 0, 0)
    file_slice = log.read(0, 1 << 20, min_one=True)
    assert file_slice is not None
    return log, file_slice


def test_sendfile_to_a_closed_peer_is_broken_pipe(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _log, file_slice = a_slice(tmp_path)
    a, b = socket.socketpair()
    b.close()
    try:
        file_slice.sendfile(a.fileno(), 0)
    except BrokenPipeError as exc:
        assert exc.errno == errno.EPIPE
        assert not isinstance(exc, StorageError)
    else:
        raise AssertionError("sendfile to a closed peer did not fail")
    finally:
        a.close()


def test_sendfile_to_a_reset_peer_is_connection_reset(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _log, file_slice = a_slice(tmp_path)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    theirs.close()
    poller = select.poll()  # wait for the RST to arrive, without consuming its error
    poller.register(ours, select.POLLIN | select.POLLERR | select.POLLHUP)
    assert poller.poll(5000), "no RST within 5 s"
    try:
        file_slice.sendfile(ours.fileno(), 0)
    except ConnectionResetError as exc:
        assert exc.errno == errno.ECONNRESET
    else:
        raise AssertionError("sendfile to a reset peer did not fail")
    finally:
        ours.close()
