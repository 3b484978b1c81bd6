"""Authorized operations (KIP-430): the bitfield of what a principal may do with a
resource, as Kafka's AuthHelper.authorizedOperations: each operation the resource type
supports (AclEntry.supportedOperations) that the authorizer allows, every one of them
without an authorizer; bit n is the operation whose code is n."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.security.acls import Operation, ResourceType
from pybroker.security.session import ANONYMOUS

if TYPE_CHECKING:
    from pybroker.security.authorizer import Authorizer
    from pybroker.server.connection import Connection

#: Kafka's "authorized operations not asked for" (INT32_MIN)
NOT_REQUESTED = -2147483648

SUPPORTED: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
                         Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE,
                         Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                           Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.USER: (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS),
}


def authorized_operations(authorizer: Authorizer | None, conn: Connection,
                          resource_type: ResourceType, name: str) -> int:
    """The bitfield of ``resource_type`` ``name``'s operations the connection's
    principal may perform."""
    session = getattr(conn, "session", None)
    principal = session.principal if session is not None else ANONYMOUS
    allowed = [op for op in SUPPORTED[resource_type]
               if authorizer is None
               or authorizer.authorize(principal, conn.host, op, resource_type, name)]
    return sum(1 << int(op) for op in allowed)
