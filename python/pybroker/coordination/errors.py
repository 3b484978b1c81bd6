"""What coordination raises besides KafkaError (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION).

Every backend raises the same exceptions for the same situations, so callers never
see a kazoo or msgspec exception."""

from __future__ import annotations

from pybroker.errors import ErrorCode, KafkaError


class CoordinationError(Exception):
    """Base of the coordination layer's own errors."""


class CoordinationUnavailable(CoordinationError):
    """ZooKeeper could not be reached, or the session expired while the call was in
    flight. The write may or may not have happened; the caller retries or gives up."""


class MalformedZNode(CoordinationError):
    """A znode (or the embedded metadata file) holds data that does not decode to the
    expected payload. Carries the path and the raw bytes for the operator."""

    def __init__(self, path: str, data: bytes | None, reason: str) -> None:
        shown = data if data is None or len(data) <= 200 else data[:200] + b"..."
        super().__init__(f"malformed data at {path}: {reason} (data: {shown!r})")
        self.path = path
        self.data = data
        self.reason = reason


class ControllerMoved(CoordinationError, KafkaError):
    """A write fenced by a controller lease failed: the controller epoch changed since
    the lease was taken, so another broker is (or was) controller. Kafka's
    ControllerMovedException; on the wire it is NOT_CONTROLLER."""

    def __init__(self, message: str) -> None:
        KafkaError.__init__(self, ErrorCode.NOT_CONTROLLER, message)


class StaleVersion(CoordinationError):
    """A conditional write expected a znode version that is no longer current (ZooKeeper's
    BadVersion): someone else wrote in between. Re-read and decide again."""

    def __init__(self, path: str, expected_version: int) -> None:
        super().__init__(f"{path} is no longer at version {expected_version}")
        self.path = path
        self.expected_version = expected_version


class BrokerIdInUse(CoordinationError):
    """Another live broker (another session) is registered with this broker.id; Kafka
    refuses to start with NodeExistsException in that case."""

    def __init__(self, broker_id: int, path: str) -> None:
        super().__init__(
            f"Error while creating ephemeral at {path}, node already exists and is owned by "
            f"another session: broker.id {broker_id} is in use by a live broker")
        self.broker_id = broker_id
        self.path = path
