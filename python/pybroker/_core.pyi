"""Typed surface of the Rust extension (rust/core-py). The contract between the
Python control plane and the Rust log engine; keep it small."""

from typing import Any, final

from typing_extensions import Buffer

class CorruptRecordError(Exception):
    """A batch failed length/magic/CRC checks (Kafka CORRUPT_MESSAGE, 2)."""

class InvalidRecordError(Exception):
    """A batch is well formed but breaks a rule (Kafka INVALID_RECORD, 87).
    When records of a batch broke per-record rules (a keyless record on a
    compacted topic), `record_errors` lists (index in the batch, message) of each,
    in order: the Produce response's record_errors (KIP-467)."""

    record_errors: list[tuple[int, str]]

class InvalidTimestampError(Exception):
    """A record (or batch max) timestamp is outside [now - timestamp_before_max_ms,
    now + timestamp_after_max_ms] on a CreateTime log, or a producer set the
    LogAppendTime attribute (Kafka INVALID_TIMESTAMP, 32). `record_errors` as in
    InvalidRecordError when records were refused (any refused for its timestamp
    makes the batch's error this one)."""

    record_errors: list[tuple[int, str]]

class UnsupportedCompressionTypeError(Exception):
    """A batch names a compression codec other than 0-4 (Kafka
    UNSUPPORTED_COMPRESSION_TYPE, 76)."""

class RecordTooLargeError(Exception):
    """A batch exceeds max_message_bytes (Kafka MESSAGE_TOO_LARGE, 10)."""

class OffsetOutOfRangeError(Exception):
    """The offset is below the log start or above the log end (Kafka 1)."""

class OutOfOrderSequenceError(Exception):
    """An idempotent producer's first sequence does not follow its last one,
    or a new epoch does not start at 0 (Kafka OUT_OF_ORDER_SEQUENCE_NUMBER, 45)."""

class InvalidProducerEpochError(Exception):
    """An idempotent producer's epoch is older than its last one (Kafka
    INVALID_PRODUCER_EPOCH, 47)."""

class InvalidTxnStateError(Exception):
    """A producer with an open transaction in this partition wrote a
    non-transactional batch (Kafka INVALID_TXN_STATE, 48)."""

class TransactionCoordinatorFencedError(Exception):
    """A transaction marker carries a coordinator epoch lower than the one the
    partition recorded for the producer (Kafka TRANSACTION_COORDINATOR_FENCED, 52)."""

class UnexpectedAppendOffsetError(Exception):
    """PartitionLog.append_as_follower got a batch that does not start at/after
    the log end offset, or after the previous batch (Kafka's
    UnexpectedAppendOffsetException / OffsetsOutOfOrderException). The follower
    should truncate (OffsetForLeaderEpoch) and fetch again."""

class StorageError(Exception):
    """An I/O error on the log (Kafka KAFKA_STORAGE_ERROR, 56)."""

@final
class AppendResult:
    base_offset: int
    last_offset: int
    #: the broker time stamped on the batches when log_append_time, else -1
    log_append_time_ms: int
    #: records / batches written (duplicates excluded)
    record_count: int
    batch_count: int
    #: batches not written: they repeat one of their producer's last 5 batches.
    #: base_offset / last_offset then cover their original offsets.
    duplicate_count: int

@final
class CleanStats:
    """What one PartitionLog.clean did."""

    bytes_read: int
    bytes_written: int
    records_removed: int
    #: input segments replaced by cleaned ones
    segments_cleaned: int
    #: the new cleaner checkpoint (cleaner-offset-checkpoint): next clean starts here
    first_dirty_offset: int

@final
class FileSlice:
    """Whole batches of one segment file: [position, position+length). A slice of
    up to 16 KiB (or any slice once too many are in flight) carries its bytes, read
    when it was made; a larger one holds the segment file open until dropped, so the
    open-file budget of the log files may close the segment meanwhile."""

    @property
    def length(self) -> int: ...
    @property
    def position(self) -> int:
        """Byte position of the slice in its segment's .log file."""
    def __len__(self) -> int: ...
    def sendfile(self, sock_fd: int, sent: int) -> int:
        """sendfile(2) bytes [sent, length) of the slice to a non-blocking socket
        (send(2) when the slice carries its bytes).
        Returns how many bytes this call wrote (may be fewer than asked);
        raises BlockingIOError if the socket would block before any byte, an
        OSError subclass (ConnectionResetError, BrokenPipeError, TimeoutError,
        ...) with its errno when the socket side fails (the peer reset or
        closed the connection), and StorageError when reading the file fails."""
    def read(self) -> bytes:
        """The slice's bytes, copied (tests, small responses)."""

@final
class PartitionLog:
    """One partition directory `<topic>-<n>/` of Kafka segment files."""

    def __init__(
        self,
        path: str,
        *,
        segment_bytes: int = 1073741824,
        segment_ms: int = 604800000,
        index_interval_bytes: int = 4096,
        segment_index_bytes: int = 10485760,
        max_message_bytes: int = 1048588,
        log_append_time: bool = False,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        log_start_offset: int = 0,
        timestamp_before_max_ms: int = 9223372036854775807,
        timestamp_after_max_ms: int = 9223372036854775807,
        compact: bool = False,
    ) -> None:
        """Open (creating if needed) the directory. Unless clean_shutdown, every
        segment from the one holding recovery_point on is scanned, validated and
        truncated at the first bad byte, and its indexes rebuilt. The
        leader-epoch cache is read from `leader-epoch-checkpoint` and cut to
        [log_start_offset, log_end_offset]; it is rebuilt from the batch headers
        when the file is missing, malformed, or lacks the last batch's epoch."""
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def recovery_point(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def truncated_at_open(self) -> int:
        """Bytes the open's recovery cut off (a torn or corrupt tail and the segments
        after it, after an unclean shutdown); 0 when nothing was cut."""
    @property
    def segment_count(self) -> int: ...
    def append(self, records: Buffer, leader_epoch: int, now_ms: int) -> AppendResult:
        """Validate every batch in `records` (one produce partition's bytes),
        then append all of them or none. Header checks (length, magic, size,
        CRC-32C, count) raise CorruptRecordError / InvalidRecordError /
        RecordTooLargeError; then every record is checked as Kafka's
        LogValidator does (rust/log/src/validate.rs): structure (lengths,
        varint widths, headers, exact record count), offset deltas 0..n-1, no
        control batch, transactional needs a producer id, keys on a compact
        log -> InvalidRecordError; codec 5-7 -> UnsupportedCompressionTypeError;
        a payload that does not decompress -> CorruptRecordError; a CreateTime
        timestamp outside [now_ms - timestamp_before_max_ms, now_ms +
        timestamp_after_max_ms] or a LogAppendTime batch from the producer ->
        InvalidTimestampError. Assigns offsets from log_end_offset,
        writes base offset and leader epoch in place; with log_append_time also
        sets max timestamp to now_ms and recomputes the CRC. Rolls the active
        segment first when segment_bytes / segment_ms / a full index require.

        Batches with a producer id >= 0 are checked against the producer state
        first (all or none still): a batch repeating one of the producer's last
        5 (same epoch, same first/last sequence) is skipped and reported with
        its original offsets (a request of duplicates only writes nothing and
        returns the original base offset); an older epoch raises
        InvalidProducerEpochError; a sequence gap, or a new epoch not starting
        at 0, raises OutOfOrderSequenceError. A producer without state accepts
        any sequence. The state is persisted in `<offset>.snapshot` files
        (Kafka's format) on roll and close, and rebuilt on open.

        Transactions: a transactional batch (attributes bit 4) opens the
        producer's transaction at its first offset unless one is open (see
        first_unstable_offset); a non-transactional batch from a producer with
        an open transaction raises InvalidTxnStateError. Only
        append_end_txn_marker ends one."""
    def append_as_follower(self, records: Buffer) -> AppendResult:
        """Append batches a follower fetched from its leader (one partition's
        records of a Fetch response), all of them or none, keeping the leader's
        bytes: base offsets, partition leader epochs, timestamps, CRCs unchanged.

        Each batch is checked as on recovery (length, magic 2, CRC-32C, record
        count; not max_message_bytes, not record by record: the leader did that);
        CorruptRecordError / InvalidRecordError otherwise. A trailing partial
        batch is ignored (as Kafka does); with no whole batch nothing happens and
        the result has base_offset == last_offset == -1 and zero counts.
        Offsets: each batch must start at or after log_end_offset and after the
        previous batch, else UnexpectedAppendOffsetError; gaps are accepted
        (compaction removes whole batches on the leader). An empty log
        (log_start_offset == log_end_offset) given the batch holding its start
        offset restarts at that batch's base offset (Kafka's repair after
        DeleteRecords left the leader's log start inside a batch).

        Indexes, rolls, the producer state (each producer's last 5 batches, so a
        retry is recognised as a duplicate once this replica leads; no sequence
        or duplicate checks here) and the leader-epoch cache (an entry per new
        partition leader epoch) are updated as for a leader append.
        duplicate_count is 0 and log_append_time_ms -1."""
    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that leader epoch `epoch` starts at `start_offset`: called by a
        broker becoming leader, with its log_end_offset (Kafka's
        maybeAssignEpochStartOffset). A no-op when `epoch` is already the latest
        epoch starting at or before that offset; entries with an epoch >= it or a
        start offset >= it are dropped first. Written to `leader-epoch-checkpoint`
        (Kafka's format: version 0, count, `epoch start_offset` lines; tmp file,
        fsync, rename). ValueError for negative arguments. Leader and follower
        appends add entries themselves, for each batch with a new epoch."""
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end_offset) answering OffsetForLeaderEpoch, as Kafka's
        LeaderEpochFileCache.endOffsetFor: the largest cached epoch <= `epoch` and
        the start offset of the first epoch above it; log_end_offset when `epoch`
        is the latest; (epoch, start of the first entry) when `epoch` is below
        every cached epoch; (-1, -1) (UNDEFINED) for epoch -1, an empty cache or
        an epoch above the latest. A returning follower truncates to
        min(this end_offset, its own log_end_offset)."""
    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch in the cache (what a follower sends in
        OffsetForLeaderEpoch); None when the cache is empty."""
    def read(
        self, offset: int, max_bytes: int, *, min_one: bool, max_offset: int | None = None
    ) -> FileSlice | None:
        """Whole batches from the one holding `offset`, at most max_bytes
        (or the first batch whole when min_one), none at/after max_offset.
        None when offset == log_end_offset (or max_offset), or when no whole
        batch fits in max_bytes and not min_one. A batch is included only when
        its last offset is < max_offset (a batch straddling max_offset is not).
        Raises OffsetOutOfRangeError outside [log_start_offset, log_end_offset]."""
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= timestamp_ms."""
    def append_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
        now_ms: int,
    ) -> AppendResult:
        """Append the COMMIT (commit=True) or ABORT control batch ending the
        producer's transaction (Kafka's EndTransactionMarker: one record, key =
        version 0 + type, value = version 0 + coordinator_epoch), as the leader
        does for WriteTxnMarkers. An epoch lower than the producer's raises
        InvalidProducerEpochError; a coordinator_epoch lower than the one the
        partition recorded for the producer raises
        TransactionCoordinatorFencedError. Ending an open ABORTed transaction
        adds (producer id, first offset, marker offset, last stable offset) to
        the marker segment's `.txnindex`. A marker without an open transaction
        is written all the same (it ends nothing)."""
    def last_stable_offset(self, high_watermark: int) -> int:
        """min(high_watermark, first offset of every open transaction, first
        offset of every ended transaction whose marker is at/after
        high_watermark): where read_committed reads stop."""
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of the aborted transactions (from the
        `.txnindex` files) with data in [start_offset, end_offset): the
        aborted_transactions of a read_committed fetch, oldest first."""
    def flush(self) -> None:
        """fsync log and index files up to log_end_offset; advances recovery_point."""
    @property
    def roll_flush_pending(self) -> bool:
        """A roll (by an append or roll()) left fsyncs to do: call flush_rolled."""
    def flush_rolled(self) -> bool:
        """fsync what the rolls so far left (their producer snapshots, the directory)
        without holding the log (GIL released). False when there was nothing to do."""
    def roll(self) -> None:
        """Start a new segment at log_end_offset (no-op if the active one is empty)."""
    def truncate_to(self, offset: int) -> None:
        """Remove every record at/after `offset` (replica truncation). The cut is
        at the start of the batch holding `offset`, and log_end_offset becomes
        that batch's base offset, so the next fetch gets the batch whole again
        (Kafka cuts at the same byte but sets the log end to `offset`; truncation
        targets, epoch end offsets and high watermarks, are batch boundaries
        anyway). Indexes are rebuilt for the cut segment, later segments deleted,
        the producer state rebuilt from the newest snapshot below the cut, and
        leader-epoch entries starting at or after the new end dropped. Below
        log_start_offset the log is emptied, the epoch cache cleared, and the
        log restarts at `offset`. At/after log_end_offset only leader-epoch
        entries starting at/after `offset` (assigned, no batch yet) are dropped,
        so repeated epoch-based truncation always progresses."""
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the empty log at `offset`
        (log_start_offset == log_end_offset == offset, above or below the old
        end): Kafka's truncateFullyAndStartAt, for a follower whose leader's log
        starts past this log's end (retention there). The producer state and the
        leader-epoch cache are cleared. ValueError for a negative offset."""
    def advance_log_start_offset(self, offset: int) -> int:
        """Raise log_start_offset (DeleteRecords, retention) and delete segments
        whose offsets all lie below it, never the active one. The leader-epoch
        cache then starts at the new log start (Kafka's truncateFromStart). Returns how many
        were deleted. OffsetOutOfRangeError above log_end_offset. Deletion is
        crash-safe: the files are renamed to `*.deleted`, then removed (open
        handles keep serving fetches in flight); recovery removes leftovers."""
    def clean(
        self,
        first_dirty_offset: int,
        *,
        now_ms: int | None = None,
        delete_retention_ms: int = 86400000,
        min_compaction_lag_ms: int = 0,
        max_bytes_per_second: float = 0.0,
        offset_map_bytes: int = 134217728,
    ) -> CleanStats:
        """Compact the log as Kafka's cleaner does (cleanup.policy=compact).

        Dirty range: [max(first_dirty_offset, log_start_offset), end) where end
        is the active segment's base, or the base of the first segment holding
        a record newer than now - min_compaction_lag_ms (segment max timestamp).
        A key -> latest offset map of the dirty range (at most
        offset_map_bytes / 32 keys; the range stops early at a segment boundary
        when full) decides which records of every segment below end are kept:
        the newest per key; keyless records are dropped; a tombstone (null
        value) is dropped once its batch's max timestamp is older than
        now - delete_retention_ms. Offsets never change; a batch keeps its base
        offset, lastOffsetDelta, producer fields and codec (recompressed).
        Control batches and each producer's last batch are kept whole. Segments
        are rewritten in groups fitting segment_bytes and swapped atomically
        (.cleaned -> .swap -> .log); crash-safe at every step. The log lock is
        not held while reading/writing, so appends continue; at most one clean
        per log at a time. max_bytes_per_second > 0 throttles the I/O (sleeps
        with the GIL released). Returns the stats; first_dirty_offset is the
        new checkpoint."""
    @property
    def producer_count(self) -> int:
        """Producer ids with idempotence state in this partition."""
    def producers(self) -> list[tuple[int, int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, coordinator epoch,
        first offset of its open transaction or -1) of every producer with state
        here, by producer id (DescribeProducers)."""
    def remove_expired_producers(self, now_ms: int, max_age_ms: int) -> int:
        """Forget producers whose last write is older than now_ms - max_age_ms
        (producer.id.expiration.ms); returns how many were forgotten."""
    def set_config(
        self,
        *,
        segment_bytes: int,
        segment_ms: int,
        index_interval_bytes: int,
        segment_index_bytes: int,
        max_message_bytes: int,
        log_append_time: bool,
        timestamp_before_max_ms: int = 9223372036854775807,
        timestamp_after_max_ms: int = 9223372036854775807,
        compact: bool = False,
    ) -> None:
        """Replace the settings of the open log (a topic config change); they
        apply from the next append / roll."""
    def segment_infos(self) -> list[tuple[int, int, int]]:
        """(base_offset, size_bytes, max_timestamp) per segment, oldest first."""
    def close(self) -> None:
        """Flush, trim the active segment's indexes to their entries, release files.
        Idempotent; afterwards the properties keep their last values and other
        methods raise StorageError."""
    def abandon(self) -> None:
        """Stop using the log of a deleted topic: nothing is flushed or written, and
        every later method raises StorageError as after close(). Its files are never
        reopened by path, so nothing late lands in a topic created again under the
        same name. Waits for an append in progress on another thread. Idempotent."""

@final
class FetchedPartition:
    """One partition of a Fetch response the follower applied (apply_fetch_response)."""

    topic: str
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    #: bytes of records the leader sent (what a replication quota counts)
    records_bytes: int
    #: whether the records went to a log given in `logs`
    appended: bool
    #: records appended (0 when none or on an error)
    record_count: int
    #: the log's end after the append; -1 when nothing was appended
    log_end_offset: int
    #: the exception the append would have raised (UnexpectedAppendOffsetError,
    #: CorruptRecordError, StorageError, ...), None when it succeeded or did not run
    error: BaseException | None

@final
class FetchApplied:
    """A Fetch response as the follower applied it."""

    correlation_id: int
    throttle_time_ms: int
    error_code: int
    session_id: int
    partitions: list[FetchedPartition]

def apply_fetch_response(
    frame: Buffer, api_version: int, logs: dict[tuple[str, int], PartitionLog]
) -> FetchApplied:
    """The replica fetcher's per-response work in one call, without the GIL: walk
    `frame` (a Fetch response without its size prefix; only version 12, the
    fetcher's, else ValueError) and append the records of every partition answered
    without an error to `logs[(topic, partition)]` with append_as_follower (no
    copy of the records). A partition not in `logs` is reported, not appended. A
    malformed frame raises CorruptRecordError and appends nothing; a failed append
    is reported in its partition's `error` and the others go on."""

class FetchChannel:
    """The follower's side of a Fetch round trip on a plaintext connection
    (issue 26): the request encoded, the answer read from the socket into a buffer
    the channel keeps, and applied as apply_fetch_response does. Python keeps the
    socket and the event loop's readiness wait between reads."""

    def __init__(self, client_id: str, max_frame_bytes: int) -> None: ...
    def encode_fetch(self, correlation_id: int, body: dict[str, Any]) -> bytes:
        """The Fetch v12 request of `body` (keyed as the Python codec's), size prefix
        included; starts a round (an answer half read is dropped). ValueError for a
        missing required field."""
    def receive(self, fd: int) -> int:
        """Read what the non-blocking socket `fd` holds of the answer, without the
        GIL: 0 once it is whole, else how many bytes are still wanted. OSError when
        the socket fails, the peer closed or the size is wrong."""
    def apply(self, correlation_id: int,
              logs: dict[tuple[str, int], PartitionLog]) -> FetchApplied:
        """Walk the whole answer and append its records as apply_fetch_response does.
        ConnectionError when it is not the answer to `correlation_id` or not whole;
        CorruptRecordError when malformed."""

class FetchRequestDecoder:
    """A Fetch request body (v4-17) decoded in one call into the dict the Python
    codec's generated decoder gives for it (issue 26: a Fetch on every follower round
    trip and consumer poll). The message stays declared in protocol/messages/fetch.py;
    tests/protocol/test_fetch_request_native.py checks this against that decoder."""

    def __init__(self, version: int, uuid_of: Any, zero_uuid: Any) -> None:
        """`uuid_of(bytes) -> uuid.UUID` makes the topic ids; `zero_uuid` is the
        default of the uuid fields. ValueError outside v4-17."""
    def __call__(self, buf: Buffer, pos: int) -> tuple[dict[str, Any], int]:
        """The body at `pos` of the frame `buf`: (its dict, the position past it).
        ValueError when malformed; nothing is read past the frame."""

def assign_leader_epochs(
    logs: list[PartitionLog], epochs: list[int], writers: int
) -> list[BaseException | None]:
    """assign_leader_epoch(epochs[i], its log end offset) for each of `logs`,
    `writers` at a time, without the GIL for the whole call (a broker taking over
    many leaderships). Each log's exception (as that call would raise it) or None;
    a failure does not stop the others. ValueError for a negative epoch or
    lists of different lengths."""

def read_small_files(
    paths: list[str], max_bytes: int, threads: int
) -> list[bytes | None | OSError]:
    """Each file's first `max_bytes` bytes, None when it does not exist, or the
    OSError reading it raised; `threads` files at a time, without the GIL for the
    whole call (a start reads one partition.metadata per log)."""

def open_logs(
    paths: list[str],
    recovery_points: list[int],
    log_starts: list[int],
    clean_shutdowns: list[bool],
    threads: int,
    *,
    segment_bytes: int = 1073741824,
    segment_ms: int = 604800000,
    index_interval_bytes: int = 4096,
    segment_index_bytes: int = 10485760,
    max_message_bytes: int = 1048588,
    log_append_time: bool = False,
    timestamp_before_max_ms: int = 9223372036854775807,
    timestamp_after_max_ms: int = 9223372036854775807,
    compact: bool = False,
) -> list[PartitionLog | BaseException]:
    """PartitionLog(paths[i], recovery_point=recovery_points[i],
    log_start_offset=log_starts[i], clean_shutdown=clean_shutdowns[i], **options)
    for each path, `threads` at a time, without the GIL for the whole call (a start
    opens thousands of logs). Each log, or the exception its open raised; a failure
    does not stop the others. ValueError for lists of different lengths."""

def crc32c(data: Buffer) -> int:
    """CRC-32C (Castagnoli) of any contiguous buffer."""

# -- columnar decoding for pybroker.spark (rust/core-py/src/columnar.rs) ----------------

@final
class RecordColumns:
    """Rows decoded by decode_columns, in Arrow layout. Immutable; its buffers live
    as long as the object (wrap them with pyarrow.foreign_buffer(..., base=cols))."""

    def __len__(self) -> int: ...
    @property
    def next_offset(self) -> int:
        """Where to continue: the offset after the last batch consumed."""
    def buffers(self) -> dict[str, tuple[int, int] | int]:
        """name -> (address, size in bytes): key_/value_ offsets (i32), data,
        validity (bitmap); offset (i64), timestamp (i64 microseconds),
        timestamp_type (i32); with headers: headers_offsets (i32), headers_validity
        (null = no headers), header_key_*, header_value_*. Plus *_null_count and
        header_count (ints)."""

def decode_columns(
    buf: Buffer,
    start_offset: int,
    end_offset: int,
    *,
    include_headers: bool = False,
    max_rows: int = 1048576,
    aborted: list[tuple[int, int]] | None = None,
) -> RecordColumns:
    """Decode the whole v2 batches in `buf` (a Fetch response's records; a trailing
    partial batch is ignored): every codec, CRC checked, control batches skipped,
    records outside [start_offset, end_offset) dropped. Stops before a batch that
    would exceed max_rows. With `aborted` ((producer_id, first_offset) pairs of a
    read_committed Fetch response) aborted transactions are dropped too.
    Raises CorruptRecordError."""

def build_batch(
    keys: list[bytes | None],
    values: list[bytes | None],
    timestamp_ms: int,
    headers: list[list[tuple[str, bytes | None]] | None] | None = None,
) -> bytes:
    """One uncompressed v2 record batch (base offset 0, CreateTime timestamp_ms)."""

def build_batch_arrow(
    values: tuple[Buffer | None, Buffer, Buffer, int, int],
    timestamp_ms: int,
    keys: tuple[Buffer | None, Buffer, Buffer, int, int] | None = None,
) -> bytes:
    """build_batch straight from Arrow binary arrays, each given as (validity or None,
    offsets (i32), data, array offset, length): no Python object per record."""

def key_partitions(keys: list[bytes | None], num_partitions: int) -> list[int]:
    """Kafka's default partitioner per key: (murmur2(key) & 0x7fffffff) % n; -1 for None."""

def decode_batch(
    batch: Buffer,
) -> list[tuple[int, int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """The records of one whole v2 batch, decompressed: (offset, timestamp,
    sequence, key, value, headers) each. For tools, never the request path.
    CorruptRecordError on bad framing or a bad records section."""
