"""Connection framing and memory over real loopback sockets: frames of every size
arrive whole, a size prefix alone costs no memory, idle connections hold no
buffer, and a request memory pool pauses reads instead of failing them."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import psutil
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from pybroker._core import FileSlice, PartitionLog
from pybroker.server import memory
from pybroker.server.connection import (
    SMALL_FRAME_BYTES,
    SMALL_SLICE_BYTES,
    Connection,
    ConnectionClosed,
)
from pybroker.server.memory import RequestMemoryPool

MAX_REQUEST = 104_857_600
WAIT_S = 10


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main, backend="asyncio")


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """(server side, client side) of a loopback TCP connection."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    return server, client


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def send(sock: socket.socket, data: bytes) -> None:
    await anyio.to_thread.run_sync(sock.sendall, data)


def test_frames_of_every_size_arrive_whole_split_or_pipelined() -> None:
    sizes = [0, 1, 100, SMALL_FRAME_BYTES - 1, SMALL_FRAME_BYTES, SMALL_FRAME_BYTES + 1,
             200_000, 3, (1 << 20) + 17, 5]
    payloads = [os.urandom(n) for n in sizes]
    stream = b"".join(framed(p) for p in payloads)

    async def main() -> None:
        server, client = tcp_pair()
        conn = Connection(server, MAX_REQUEST)
        try:
            async with anyio.create_task_group() as tg:
                async def trickle() -> None:
                    # odd-sized pieces, so frames and size prefixes straddle reads
                    pos = 0
                    for step in (3, 7, 65536, 1, 100_000, 4096):
                        await send(client, stream[pos:pos + step])
                        pos += step
                        await anyio.sleep(0.01)
                    await send(client, stream[pos:])
                tg.start_soon(trickle)
                for want in payloads:
                    with anyio.fail_after(WAIT_S):
                        got = await conn.read_frame()
                    assert bytes(got) == want
        finally:
            conn.close()
            client.close()
    run(main)


def test_size_prefix_alone_costs_no_memory_and_the_buffer_grows_with_the_bytes() -> None:
    claimed = 100_000_000
    body = os.urandom(3 * (1 << 20) + 123)  # what the client really sends, then stops

    async def main() -> None:
        pairs = [tcp_pair() for _ in range(10)]
        conns = [Connection(s, MAX_REQUEST) for s, _ in pairs]
        proc = psutil.Process()
        rss_before = proc.memory_info().rss
        try:
            async with anyio.create_task_group() as tg:
                for conn, (_, client) in zip(conns, pairs, strict=True):
                    tg.start_soon(conn.read_frame)
                    await send(client, struct.pack(">i", claimed) + body)
                # every reader has taken all the bytes there are and waits for more
                with anyio.fail_after(WAIT_S):
                    while any(_has_data(c) for c in conns):
                        await anyio.sleep(0.01)
                await anyio.sleep(0.2)
                grown = proc.memory_info().rss - rss_before
                # 10 claims of 100 MB: what was sent (~31 MB) plus slack, not 1 GB
                assert grown < 100 * (1 << 20), f"RSS grew by {grown >> 20} MiB"
                tg.cancel_scope.cancel()
        finally:
            for conn, (_, client) in zip(conns, pairs, strict=True):
                conn.close()
                client.close()
    run(main)


def _has_data(conn: Connection) -> bool:
    try:
        return bool(conn.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


def test_idle_connection_gives_its_read_buffer_back() -> None:
    async def main() -> None:
        server, client = tcp_pair()
        conn = Connection(server, MAX_REQUEST)
        try:
            await send(client, framed(b"one") + framed(b"two"))
            assert bytes(await conn.read_frame()) == b"one"
            assert conn._buf is not None  # "two" is still buffered
            assert bytes(await conn.read_frame()) == b"two"
            async with anyio.create_task_group() as tg:
                tg.start_soon(conn.read_frame)
                await anyio.sleep(0.05)
                assert conn._buf is None, "a connection waiting for bytes holds a buffer"
                tg.cancel_scope.cancel()
        finally:
            conn.close()
            client.close()
    run(main)


def test_read_buffers_are_reused_not_reallocated() -> None:
    async def main() -> None:
        server, client = tcp_pair()
        conn = Connection(server, MAX_REQUEST)
        try:
            seen = set()
            for i in range(5):
                await send(client, framed(b"x" * i))
                assert bytes(await conn.read_frame()) == b"x" * i
                # a small last frame is copied out: the buffer is back in the cache already
                assert conn._buf is None
                seen.add(id(memory._free_read_buffers[-1]))
            assert len(seen) == 1
            big = os.urandom(memory.READ_BUFFER_BYTES // 2)
            await send(client, framed(big))
            assert bytes(await conn.read_frame()) == big  # parsed in place
            assert conn._buf is not None and id(conn._buf) in seen
            assert len(memory._free_read_buffers) <= memory.READ_BUFFERS_KEPT
        finally:
            conn.close()
            client.close()
    run(main)


def test_memory_pool_pauses_reads_until_a_request_is_done() -> None:
    size = 700_000

    async def main() -> None:
        pool = RequestMemoryPool(1 << 20)
        pairs = [tcp_pair() for _ in range(2)]
        first, second = (Connection(s, MAX_REQUEST, pool=pool) for s, _ in pairs)
        try:
            for _, client in pairs:
                await send(client, framed(b"a" * size) + framed(b"next"))
            with anyio.fail_after(WAIT_S):
                assert len(await first.read_frame()) == size
            assert pool.available == (1 << 20) - size
            got: list[int] = []
            async with anyio.create_task_group() as tg:
                async def read_second() -> None:
                    got.append(len(await second.read_frame()))
                tg.start_soon(read_second)
                # the pool still has memory: the second request is admitted (non-strict,
                # as Kafka's pool) and takes it below zero
                with anyio.fail_after(WAIT_S):
                    while not got:
                        await anyio.sleep(0.01)
            assert pool.available == (1 << 20) - 2 * size
            third_pair = tcp_pair()
            pairs.append(third_pair)
            third = Connection(third_pair[0], MAX_REQUEST, pool=pool)
            await send(third_pair[1], framed(b"c" * size))
            async with anyio.create_task_group() as tg:
                async def read_third() -> None:
                    got.append(len(await third.read_frame()))
                tg.start_soon(read_third)
                await anyio.sleep(0.2)
                assert pool.waiting == 1 and len(got) == 1, "reads did not pause"
                # the first request is done (its connection reads on): memory comes back
                assert bytes(await first.read_frame()) == b"next"
                with anyio.fail_after(WAIT_S):
                    while len(got) < 2:
                        await anyio.sleep(0.01)
            assert got == [size, size]
            for conn in (second, third):
                conn.close()
            assert pool.available == 1 << 20
        finally:
            for conn in (first, second):
                conn.close()
            for _, client in pairs:
                client.close()
    run(main)


def test_peer_reset_while_reading_a_large_frame_is_a_closed_connection() -> None:
    async def main() -> None:
        server, client = tcp_pair()
        conn = Connection(server, MAX_REQUEST)
        await send(client, struct.pack(">i", 5_000_000) + b"x" * 100_000)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        try:
            with anyio.fail_after(WAIT_S):
                try:
                    await conn.read_frame()
                except ConnectionClosed:
                    pass
                else:
                    raise AssertionError("read_frame returned a frame from a reset peer")
        finally:
            conn.close()
    run(main)


# --- writing: file slices by sendfile (a follower's fetch of a megabyte) ----------------------
def log_slice(tmp_path: Path, nbytes: int, per_batch: int = 100) -> FileSlice:
    """A file slice of about `nbytes` of real record batches (`per_batch` 1 KiB records
    a batch)."""
    log = PartitionLog(str(tmp_path / "t-0"))
    offset = 0
    while offset * 1100 < nbytes:
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(per_batch):
            builder.append(i, timestamp=1_000, key=None, value=os.urandom(1024), headers=[])
        log.append(bytes(builder.build()), offset, 0)
        offset += per_batch
    file_slice = log.read(0, nbytes, min_one=True)
    assert file_slice is not None and file_slice.length > SMALL_SLICE_BYTES
    return file_slice


def test_a_large_slice_reaches_a_slow_reader_whole_between_its_header_and_trailer(
        tmp_path: Path) -> None:
    """The socket's buffer fills many times over: each time the write waits until the
    reader takes more, and the bytes arrive whole and in order. Afterwards no writer
    callback is left behind on the loop (a writable socket would wake it endlessly)."""
    file_slice = log_slice(tmp_path, 3 << 20)
    header, trailer = os.urandom(30), os.urandom(40)

    async def main() -> None:
        server, client = tcp_pair()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        conn = Connection(server, MAX_REQUEST)
        received = bytearray()
        want = header + file_slice.read() + trailer
        try:
            async with anyio.create_task_group() as tg:
                async def slow_reader() -> None:
                    while len(received) < len(want):
                        received.extend(
                            await anyio.to_thread.run_sync(client.recv, 65536))
                        await anyio.sleep(0.001)
                tg.start_soon(slow_reader)
                with anyio.fail_after(WAIT_S * 3):
                    await conn.write([header, file_slice, trailer])
            assert bytes(received) == want
            assert not asyncio.get_running_loop().remove_writer(conn.fd)
        finally:
            conn.close()
            client.close()
    run(main)


def test_a_write_cancelled_while_the_buffer_is_full_leaves_no_writer_behind(
        tmp_path: Path) -> None:
    file_slice = log_slice(tmp_path, 2 << 20)

    async def main() -> None:
        server, client = tcp_pair()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        conn = Connection(server, MAX_REQUEST)
        try:
            with anyio.move_on_after(0.3) as scope:
                await conn.write([b"header", file_slice])  # nobody reads: it must wait
            assert scope.cancelled_caught
            assert not asyncio.get_running_loop().remove_writer(conn.fd)
        finally:
            conn.close()
            client.close()
    run(main)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TCP_INFO segment count")
def test_a_header_goes_out_in_one_segment_with_the_slice_after_it(tmp_path: Path) -> None:
    """A response's header (sendmsg) is held for the file slice sent after it (sendfile):
    the peer gets one segment, not a small one for the header that wakes it alone."""
    file_slice = log_slice(tmp_path, 30_000, per_batch=20)
    assert file_slice.length < 60_000  # one loopback segment holds it all

    def segments_out(sock: socket.socket) -> int:
        # struct tcp_info: tcpi_segs_out, a u32 at byte 136 (Linux 4.2+)
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 144)
        return int(struct.unpack_from("I", info, 136)[0])

    async def main() -> None:
        server, client = tcp_pair()
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the acceptor does
        conn = Connection(server, MAX_REQUEST)
        try:
            before = segments_out(server)
            with anyio.fail_after(WAIT_S):
                await conn.write([b"h" * 30, file_slice])
            assert segments_out(server) - before == 1
            want = 30 + file_slice.length
            got = bytearray()
            while len(got) < want:
                got += client.recv(want - len(got))
            assert bytes(got) == b"h" * 30 + file_slice.read()
        finally:
            conn.close()
            client.close()
    run(main)
