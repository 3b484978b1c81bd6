"""What the controller-only APIs share: finding the active controller, and taking a
client's request to it from whichever broker the client asked.

Kafka 4.0 never names its controller to clients: Metadata and DescribeCluster answer
a live broker as `controller_id`, and that broker forwards what only the controller
does. pybroker answers itself (see `advertised_controller`) and forwards the same way.
A client therefore never waits on a controller that has just died: librdkafka's admin
client, given a dead controller's id, waits for that broker to come back until its
request times out (30 s), even after the cluster elected another."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pybroker.client.connection import BrokerUnreachable
from pybroker.client.peer import connect_peer
from pybroker.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from pybroker.controller.controller import Controller
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

log = logging.getLogger(__name__)

#: ends the client id of a request one broker forwards to the controller: the broker it
#: reaches serves it or refuses it (NOT_CONTROLLER), never forwards it again, so two
#: brokers that each believe the other is the controller cannot pass it back and forth
FORWARDED_SUFFIX = "-forwarded"
#: Kafka's message for NOT_CONTROLLER
NOT_THE_CONTROLLER = "This is not the correct controller for this cluster."
#: how long a forwarded request may take (Kafka's request.timeout.ms default)
FORWARD_TIMEOUT_S = 30.0


def advertised_controller(ctx: BrokerContext) -> int:
    """The `controller_id` Metadata and DescribeCluster answer: this broker once it is
    registered (it is alive, it serves the controller's APIs by forwarding them), as
    Kafka 4.0 answers a live broker rather than its controller; before that, the
    controller it knows (-1 when none)."""
    if ctx.broker_id in ctx.metadata.brokers:
        return ctx.broker_id
    return ctx.metadata.controller_id


def active_controller(ctx: BrokerContext) -> Controller:
    """This broker's controller when it is the elected one; else NOT_CONTROLLER (the
    client looks the controller up in Metadata and asks it)."""
    controller = _elected(ctx)
    if controller is None:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, NOT_THE_CONTROLLER)
    return controller


def _elected(ctx: BrokerContext) -> Controller | None:
    """This broker's controller when it is the elected one."""
    controller = ctx.controller
    return controller if controller is not None and controller.is_active else None


async def forwarded(ctx: BrokerContext, request: Request) -> dict[str, Any] | None:
    """None when this broker is the active controller (the handler serves the request);
    else the active controller's own answer to the same request. The request was
    authorized here already; the controller authorizes the forwarding broker's
    principal again, so a forward can be refused there but never allowed by it alone.
    NOT_CONTROLLER (retriable: the client asks again) when no controller is known or
    it cannot be reached, or when the request was itself forwarded to this broker."""
    if _elected(ctx) is not None:
        return None
    client_id = request.header.client_id or ""
    target = ctx.metadata.controller_id
    endpoint = ctx.metadata.broker(target) if target >= 0 else None
    if client_id.endswith(FORWARDED_SUFFIX) or endpoint is None or target == ctx.broker_id:
        raise KafkaError(ErrorCode.NOT_CONTROLLER, NOT_THE_CONTROLLER)
    connection = connect_peer(ctx.config, endpoint, f"broker-{ctx.broker_id}{FORWARDED_SUFFIX}",
                              FORWARD_TIMEOUT_S)
    try:
        return await connection.request(request.header.api_key, request.version,
                                         request.body)
    except (BrokerUnreachable, OSError, TimeoutError) as exc:
        log.info("forwarding API %d to controller %d failed: %s", request.header.api_key,
                 target, exc)
        raise KafkaError(ErrorCode.NOT_CONTROLLER,
                         f"the controller (broker {target}) could not be reached") from None
    finally:
        await connection.close()
