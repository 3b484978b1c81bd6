"""ACL bindings as Kafka has them: a resource pattern (type, name, LITERAL or
PREFIXED) and an entry (principal, host, operation, ALLOW/DENY), with the wire
codes of the ACL APIs and the names Kafka writes in ZooKeeper."""

from __future__ import annotations

import dataclasses
import enum


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: the cluster resource's one name
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"

# ZooKeeper's spelling (Kafka's ResourceType.toString / AclOperation in camel case)
RESOURCE_ZK = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group",
               ResourceType.CLUSTER: "Cluster", ResourceType.TRANSACTIONAL_ID: "TransactionalId",
               ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}
RESOURCE_FROM_ZK = {v: k for k, v in RESOURCE_ZK.items()}
OPERATION_ZK = {op: "".join(w.capitalize() for w in op.name.split("_"))
                for op in Operation if op > Operation.ANY}
OPERATION_FROM_ZK = {v: k for k, v in OPERATION_ZK.items()}
PERMISSION_ZK = {Permission.ALLOW: "Allow", Permission.DENY: "Deny"}
PERMISSION_FROM_ZK = {v: k for k, v in PERMISSION_ZK.items()}

#: operations that imply DESCRIBE (and ALTER_CONFIGS implies DESCRIBE_CONFIGS), as Kafka
IMPLIES = {Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE,
                                Operation.ALTER),
           Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,)}


@dataclasses.dataclass(frozen=True, order=True)
class Pattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclasses.dataclass(frozen=True, order=True)
class Entry:
    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclasses.dataclass(frozen=True)
class Filter:
    """A DescribeAcls / DeleteAcls filter; None (or ANY) matches anything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches_pattern(self, pattern: Pattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            # the patterns that would apply to a resource of this name
            return self.name is None or pattern.matches(pattern.resource_type, self.name)
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: Entry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (Operation.ANY, entry.operation)
                and self.permission in (Permission.ANY, entry.permission))
