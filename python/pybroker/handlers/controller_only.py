"""What the controller-only APIs share: finding the active controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from pybroker.controller.controller import Controller
    from pybroker.handlers.context import BrokerContext


def active_controller(ctx: BrokerContext) -> Controller:
    """This broker's controller when it is the elected one; else NOT_CONTROLLER (the
    client looks the controller up in Metadata and asks it)."""
    controller = ctx.controller
    if controller is None or not controller.is_active:
        raise KafkaError(ErrorCode.NOT_CONTROLLER,
                         "This is not the correct controller for this cluster.")
    return controller
