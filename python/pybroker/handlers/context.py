"""What a request handler may use: the broker's parts, each with one job,
rather than the whole broker."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pybroker.admin.broker_configs import DynamicBrokerConfigs
from pybroker.admin.group_configs import GroupConfigs
from pybroker.admin.topics import TopicAdmin
from pybroker.config import BrokerConfig
from pybroker.fetch.sessions import FetchSessionCache
from pybroker.controller.controller import Controller
from pybroker.group.coordinator import GroupCoordinator
from pybroker.log.manager import LogManager
from pybroker.metadata.cache import BrokerEndpoint, MetadataCache
from pybroker.metrics import BrokerMetrics
from pybroker.producer.ids import ProducerIdAllocator
from pybroker.purgatory import Purgatory
from pybroker.replica.manager import ReplicaManager

if TYPE_CHECKING:
    from pybroker.transaction.coordinator import TransactionCoordinator


@dataclasses.dataclass(frozen=True)
class BrokerContext:
    broker_id: int
    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    purgatory: Purgatory
    admin: TopicAdmin
    groups: GroupCoordinator
    producer_ids: ProducerIdAllocator
    logs: LogManager
    metrics: BrokerMetrics
    #: the transaction coordinator (None where a test builds a context without one)
    txn: TransactionCoordinator | None = None
    #: dynamic broker configs (None: every broker key is static, as in unit tests)
    broker_configs: DynamicBrokerConfigs | None = None
    #: group configs (GROUP config resources; None: not available, as in unit tests)
    group_configs: GroupConfigs | None = None
    #: incremental fetch sessions (KIP-227)
    fetch_sessions: FetchSessionCache = dataclasses.field(
        default_factory=lambda: FetchSessionCache(1000))
    #: this broker's controller candidate (serves controller-only APIs while elected)
    controller: Controller | None = None

    @property
    def endpoint(self) -> BrokerEndpoint:
        """This broker as clients reach it (its advertised listener)."""
        endpoint = self.metadata.broker(self.broker_id)
        if endpoint is None:
            raise RuntimeError("the broker has not registered its listener yet")
        return endpoint
