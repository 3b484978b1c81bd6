"""DescribeCluster (60): the cluster id, the controller and the live brokers with
their racks, from the metadata cache (what Metadata gives, without topics)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import ErrorCode
from pybroker.handlers.controller_only import advertised_controller
from pybroker.handlers.registry import handles
from pybroker.security.acls import CLUSTER_NAME, ResourceType
from pybroker.security.authorizer import authorizer_for
from pybroker.security.operations import NOT_REQUESTED, authorized_operations

if TYPE_CHECKING:
    from pybroker.handlers.context import BrokerContext
    from pybroker.server.dispatch import Request

#: DescribeCluster v1's endpoint types: a broker answers for brokers only
ENDPOINT_BROKERS = 1


@handles(60, (0, 1))
async def handle_describe_cluster(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    metadata = ctx.metadata
    answer: dict[str, Any] = {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None,
        "endpoint_type": ENDPOINT_BROKERS, "cluster_id": metadata.cluster_id,
        "controller_id": advertised_controller(ctx), "brokers": [],
        "cluster_authorized_operations": NOT_REQUESTED,
    }
    if request.body["endpoint_type"] != ENDPOINT_BROKERS:
        answer["error_code"] = int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)
        answer["error_message"] = "The broker only supports the BROKER endpoint type"
        return answer
    answer["brokers"] = [{"broker_id": b.node_id, "host": b.host, "port": b.port,
                          "rack": b.rack} for _, b in sorted(metadata.brokers.items())]
    if request.body["include_cluster_authorized_operations"]:
        answer["cluster_authorized_operations"] = authorized_operations(
            authorizer_for(ctx.config, ctx.admin.backend), request.connection,
            ResourceType.CLUSTER, CLUSTER_NAME)
    return answer
