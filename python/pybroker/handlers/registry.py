"""The table of request handlers: API key -> (advertised versions, function).

ApiVersions answers from this table, so an API is advertised exactly when a
handler for it is registered."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

Body = dict[str, Any]
HandlerFn = Callable[["BrokerContext", "Request"], Awaitable["Body | None"]]


@dataclasses.dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    #: the versions handled; a request of any other version closes the connection
    min_version: int
    max_version: int
    fn: HandlerFn
    #: the lowest version ApiVersions lists, when below min_version (Produce: see there)
    advertised_min: int | None = None

    @property
    def advertised(self) -> tuple[int, int]:
        low = self.min_version if self.advertised_min is None else self.advertised_min
        return low, self.max_version


HANDLERS: dict[int, HandlerSpec] = {}


def handles(api_key: int, versions: tuple[int, int], *,
            advertise_from: int | None = None) -> Callable[[HandlerFn], HandlerFn]:
    """Register `fn` for api_key, handling and advertising versions (min, max) in
    ApiVersions (from ``advertise_from`` when that is lower)."""

    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in HANDLERS:
            raise RuntimeError(f"two handlers for API key {api_key}")
        HANDLERS[api_key] = HandlerSpec(api_key, versions[0], versions[1], fn, advertise_from)
        return fn

    return register
