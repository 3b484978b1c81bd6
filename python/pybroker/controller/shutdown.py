"""Controlled shutdown, the stopping broker's side (Kafka's
KafkaServer.controlledShutdown): before it stops serving, a broker asks the
controller (ControlledShutdown, API 7) to move its leaderships to other ISR
members and to take it out of the ISRs, so clients see a metadata change rather
than a dead leader. It tries controlled.shutdown.max.retries times, pausing
controlled.shutdown.retry.backoff.ms, while partitions remain; then it stops
anyway, as Kafka does."""

from __future__ import annotations

import logging

import anyio

from pybroker.client.connection import BrokerUnreachable
from pybroker.client.peer import connect_peer
from pybroker.config import BrokerConfig
from pybroker.controller.controller import Controller
from pybroker.coordination.errors import CoordinationError
from pybroker.errors import ErrorCode, KafkaError
from pybroker.metadata.cache import MetadataCache

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN = 7
CONTROLLED_SHUTDOWN_VERSION = 3
#: a request to the controller waits at most this long
REQUEST_TIMEOUT_S = 30.0


async def controlled_shutdown(broker_id: int, config: BrokerConfig, metadata: MetadataCache,
                              controller: Controller) -> bool:
    """True when the controller moved everything away; False after the retries."""
    attempts = config["controlled.shutdown.max.retries"] + 1
    backoff_s = config["controlled.shutdown.retry.backoff.ms"] / 1000
    for attempt in range(attempts):
        if attempt:
            await anyio.sleep(backoff_s)
        try:
            remaining = await _ask(broker_id, config, metadata, controller)
        except (KafkaError, BrokerUnreachable, CoordinationError) as exc:
            log.warning("controlled shutdown attempt %d failed: %s; trying again",
                        attempt + 1, exc)
            continue
        if not remaining:
            log.info("controlled shutdown succeeded")
            return True
        log.warning("controlled shutdown attempt %d: %d partition(s) remaining: %s",
                    attempt + 1, len(remaining), ", ".join(f"{t}-{p}" for t, p in remaining[:10]))
    log.warning("proceeding to do an unclean shutdown as all the controlled shutdown "
                "attempts failed")
    return False


async def _ask(broker_id: int, config: BrokerConfig, metadata: MetadataCache,
               controller: Controller) -> list[tuple[str, int]]:
    # this broker's registration epoch, read again: the store re-registers a broker
    # whose session expired, with a new epoch, and the controller checks it. Its own
    # registration alone (one read), not every broker's (a listing and a read of each)
    broker_epoch = await controller.backend.broker_epoch(broker_id)
    if broker_epoch is None:
        broker_epoch = -1
    if controller.is_active:  # this broker is the controller: no need for the network
        return await controller.controlled_shutdown(broker_id, broker_epoch)
    controller_id = metadata.controller_id
    endpoint = metadata.broker(controller_id) if controller_id >= 0 else None
    if endpoint is None:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller is known")
    connection = connect_peer(config, endpoint, f"broker-{broker_id}-shutdown", REQUEST_TIMEOUT_S)
    try:
        response = await connection.request(CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION,
                                            {"broker_id": broker_id, "broker_epoch": broker_epoch})
    finally:
        await connection.close()
    code = ErrorCode(response["error_code"])
    if code != ErrorCode.NONE:
        raise KafkaError(code, f"controller {controller_id} answered {code.name}")
    return [(p["topic_name"], p["partition_index"]) for p in response["remaining_partitions"]]
