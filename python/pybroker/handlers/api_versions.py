"""ApiVersions (18): the versions of every API this broker handles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.handlers.registry import handles

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request


@handles(18, (0, 4))
async def handle_api_versions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    from pybroker.server.dispatch import api_versions_body

    return api_versions_body()
