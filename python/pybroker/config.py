"""Broker and topic configuration: Kafka's names and defaults, in one table.

Every key the broker understands is declared once in `BROKER_CONFIGS`. A broker
key that has a per-topic form names it in `topic_name` (Kafka's
`log.segment.bytes` -> `segment.bytes`), so topic defaults come from the broker
config and DescribeConfigs can show where a value came from."""

from __future__ import annotations

import dataclasses
import difflib
import enum
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647
#: the only replica.selector.class pybroker has (Kafka's class name, accepted as is)
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3 config_type codes."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ config_source codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class ConfigError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str
    topic_name: str | None = None
    #: allowed values for STRING keys with a fixed set (cleanup.policy is a LIST of these)
    choices: tuple[str, ...] | None = None
    minimum: int | None = None


def _k(name: str, type_: ConfigType, default: Any, doc: str, **kw: Any) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, **kw)


T = ConfigType
BROKER_CONFIGS: tuple[ConfigKey, ...] = (
    # --- server identity and network ---
    _k("broker.id", T.INT, 0, "The id of this broker."),
    _k("node.id", T.INT, -1, "KRaft name of broker.id; used when broker.id is unset."),
    _k("broker.rack", T.STRING, None, "The broker's rack, for rack-aware replica placement."),
    _k("listeners", T.STRING, "PLAINTEXT://127.0.0.1:9092", "Addresses the broker listens on."),
    _k("advertised.listeners", T.STRING, None, "Addresses given to clients; default listeners."),
    # --- listener security (issue 16): PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL ---
    _k("listener.security.protocol.map", T.STRING,
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       "Listener name -> security protocol (NAME:PROTOCOL,...)."),
    # TLS (pybroker.security.tls); each also as listener.name.<listener>.<key>
    _k("ssl.keystore.type", T.STRING, "JKS", "Keystore format: PEM or PKCS12 (JKS is refused).",
       choices=("JKS", "PKCS12", "PEM")),
    _k("ssl.keystore.location", T.STRING, None,
       "The broker's key and certificate chain (PEM: the key, encrypted PKCS#8 or not, and "
       "the chain in one file)."),
    _k("ssl.keystore.password", T.PASSWORD, None, "Password of a PKCS12 keystore."),
    _k("ssl.key.password", T.PASSWORD, None, "Password of the private key in the keystore."),
    _k("ssl.truststore.type", T.STRING, "JKS", "Truststore format: PEM or PKCS12.",
       choices=("JKS", "PKCS12", "PEM")),
    _k("ssl.truststore.location", T.STRING, None, "CA certificates client certificates are "
       "verified against."),
    _k("ssl.truststore.password", T.PASSWORD, None, "Password of a PKCS12 truststore."),
    _k("ssl.client.auth", T.STRING, "none",
       "Client certificates on SSL listeners: none, requested or required (SASL_SSL "
       "listeners only take it with a listener.name.<l>. prefix).",
       choices=("none", "requested", "required")),
    _k("ssl.enabled.protocols", T.LIST, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted."),
    _k("ssl.cipher.suites", T.LIST, [], "TLS 1.2 cipher suites (OpenSSL names); empty: "
       "OpenSSL's defaults."),
    # SASL (pybroker.security.sasl)
    _k("sasl.enabled.mechanisms", T.LIST, ["GSSAPI"],
       "SASL mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI and OAUTHBEARER "
       "are not)."),
    _k("connections.max.reauth.ms", T.LONG, 0,
       "Lifetime of a SASL session; a connection not re-authenticated by then is closed. "
       "0: sessions never expire.", minimum=0),
    _k("security.inter.broker.protocol", T.STRING, "PLAINTEXT",
       "Security protocol between brokers (when inter.broker.listener.name is unset).",
       choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    _k("inter.broker.listener.name", T.STRING, None, "The listener brokers talk to each "
       "other on."),
    _k("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI",
       "SASL mechanism between brokers."),
    # Kerberos (GSSAPI): Kafka's keys, accepted (statically and dynamically) and shown so
    # Kafka's tools and configs work; pybroker does not serve GSSAPI, they tune nothing
    _k("sasl.kerberos.service.name", T.STRING, None, "Kerberos principal name Kafka runs as "
       "(no effect: GSSAPI is not served)."),
    _k("sasl.kerberos.kinit.cmd", T.STRING, "/usr/bin/kinit", "Kerberos kinit command path "
       "(no effect: GSSAPI is not served)."),
    _k("sasl.kerberos.ticket.renew.window.factor", T.DOUBLE, 0.8,
       "Fraction of a ticket's lifetime before renewal (no effect: GSSAPI is not served)."),
    _k("sasl.kerberos.ticket.renew.jitter", T.DOUBLE, 0.05,
       "Random jitter added to the renewal time (no effect: GSSAPI is not served)."),
    _k("sasl.kerberos.min.time.before.relogin", T.LONG, 60000,
       "Login thread sleep time between refresh attempts (no effect: GSSAPI is not served)."),
    _k("sasl.kerberos.principal.to.local.rules", T.LIST, ["DEFAULT"],
       "Rules mapping principal names to short names (no effect: GSSAPI is not served)."),
    # authorization (pybroker.security.authorizer)
    _k("authorizer.class.name", T.STRING, "", "Kafka's authorizer class names select the ACL "
       "authorizer (StandardAuthorizer, AclAuthorizer); empty: no authorization."),
    _k("super.users", T.STRING, "", "Principals allowed everything (User:a;User:b)."),
    _k("allow.everyone.if.no.acl.found", T.BOOLEAN, False,
       "Allow a resource no ACL matches."),
    # client quotas (pybroker.security.quotas)
    _k("quota.window.num", T.INT, 11, "Samples client quota rates are averaged over.",
       minimum=1),
    _k("quota.window.size.seconds", T.INT, 1, "Length of one quota sample.", minimum=1),
    _k("socket.request.max.bytes", T.INT, 104857600, "Largest request frame accepted.",
       minimum=1),
    _k("socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF of client sockets (-1: OS)."),
    _k("socket.receive.buffer.bytes", T.INT, 102400, "SO_RCVBUF of client sockets (-1: OS)."),
    # connection limits and request memory (pybroker.server)
    _k("connections.max.idle.ms", T.LONG, 600000,
       "Close connections idle longer than this (no bytes read or written and no request "
       "in progress); -1 never closes them."),
    _k("max.connections", T.INT, INT_MAX,
       "Connections allowed in the broker at any time; at the limit new connections wait "
       "to be accepted until one closes.", minimum=0),
    _k("max.connections.per.ip", T.INT, INT_MAX,
       "Connections allowed from each IP address; new connections from an address at its "
       "limit are closed. 0 only with max.connections.per.ip.overrides.", minimum=0),
    _k("max.connections.per.ip.overrides", T.STRING, "",
       "Per-IP or hostname overrides of max.connections.per.ip, e.g. hostName:100,127.0.0.1:200."),
    _k("queued.max.request.bytes", T.LONG, -1,
       "Request bytes allowed in flight before no more requests are read (reads pause); "
       "-1 is unbounded. At least socket.request.max.bytes when set."),
    _k("zookeeper.connect", T.STRING, None, "ZooKeeper connect string; enables cluster mode."),
    _k("metrics.port", T.INT, 0,
       "Port of the Prometheus endpoint (http://<first listener host>:<port>/metrics); "
       "0 disables it.", minimum=0),
    _k("event.loop.stall.report.ms", T.INT, 0,
       "Log, at WARNING, every event-loop stall at least this long with the loop "
       "thread's stack sampled during it (pybroker's own key: Kafka has no event loop); "
       "0 turns the reporter off.", minimum=0),
    # --- topics ---
    _k("log.dirs", T.LIST, None, "Directories holding partition logs (default log.dir)."),
    _k("log.dir", T.STRING, "./pybroker-data", "Log directory used when log.dirs is unset."),
    _k("num.partitions", T.INT, 1, "Partitions of auto-created topics.", minimum=1),
    _k("default.replication.factor", T.INT, 1, "Replication factor of auto-created topics."),
    _k("auto.create.topics.enable", T.BOOLEAN, True, "Create unknown topics on metadata/produce."),
    _k("delete.topic.enable", T.BOOLEAN, True, "Allow DeleteTopics."),
    # --- log segments and indexes ---
    _k("log.segment.bytes", T.INT, 1073741824, "Largest segment file.", topic_name="segment.bytes",
       minimum=14),
    _k("log.roll.ms", T.LONG, None, "Roll a segment after this long (default log.roll.hours)."),
    _k("log.roll.hours", T.INT, 168, "Roll a segment after this many hours.",
       topic_name="segment.ms"),
    _k("log.index.size.max.bytes", T.INT, 10485760, "Size of a segment's index files.",
       topic_name="segment.index.bytes", minimum=4),
    _k("log.index.interval.bytes", T.INT, 4096, "Bytes of log between index entries.",
       topic_name="index.interval.bytes", minimum=0),
    _k("message.max.bytes", T.INT, 1048588, "Largest record batch accepted.",
       topic_name="max.message.bytes", minimum=0),
    _k("log.message.timestamp.type", T.STRING, "CreateTime", "CreateTime or LogAppendTime.",
       topic_name="message.timestamp.type", choices=("CreateTime", "LogAppendTime")),
    # KIP-937 bounds on CreateTime timestamps, checked per record on produce
    # (rust/log/src/validate.rs); Kafka 4.0 defaults (KIP-1030 lowered after.max.ms
    # to one hour). Kafka 4.0 removed the older symmetric
    # log.message.timestamp.difference.max.ms (KAFKA-17997): it is not a key here
    # either, so a broker property of that name is kept as unknown and ignored and
    # the topic form is refused as an unknown topic config, as Kafka 4.0 does.
    _k("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX,
       "How far in the past a CreateTime record timestamp may be.",
       topic_name="message.timestamp.before.max.ms", minimum=0),
    _k("log.message.timestamp.after.max.ms", T.LONG, 3600000,
       "How far in the future a CreateTime record timestamp may be.",
       topic_name="message.timestamp.after.max.ms", minimum=0),
    _k("log.preallocate", T.BOOLEAN, False, "Preallocate segment files.", topic_name="preallocate"),
    _k("log.segment.delete.delay.ms", T.LONG, 60000, "Delay before a deleted segment's files go.",
       topic_name="file.delete.delay.ms"),
    # --- retention ---
    _k("log.retention.ms", T.LONG, None, "Retention by time (default log.retention.minutes)."),
    _k("log.retention.minutes", T.INT, None, "Retention by time (default log.retention.hours)."),
    _k("log.retention.hours", T.INT, 168, "Retention by time in hours.",
       topic_name="retention.ms"),
    _k("log.retention.bytes", T.LONG, -1, "Retention by partition size; -1 is unlimited.",
       topic_name="retention.bytes"),
    _k("log.retention.check.interval.ms", T.LONG, 300000, "How often retention is checked."),
    _k("log.cleanup.policy", T.LIST, ["delete"], "delete, compact or both.",
       topic_name="cleanup.policy", choices=("delete", "compact")),
    # --- flush ---
    _k("log.flush.interval.messages", T.LONG, LONG_MAX, "fsync after this many messages.",
       topic_name="flush.messages", minimum=1),
    _k("log.flush.interval.ms", T.LONG, None, "fsync after this long (default scheduler interval).",
       topic_name="flush.ms"),
    _k("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX, "How often the flusher checks logs."),
    _k("log.flush.offset.checkpoint.interval.ms", T.INT, 60000,
       "How often the recovery point checkpoint is written."),
    _k("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000,
       "How often the log start offset checkpoint is written."),
    # --- Kafka's Java thread pools: accepted (statically and dynamically) and shown so
    # Kafka's tools and configs work; pybroker's event loop and tasks have no such pools
    _k("num.io.threads", T.INT, 8, "Kafka's request handler threads (no effect here).",
       minimum=1),
    _k("num.network.threads", T.INT, 3, "Kafka's network threads (no effect here).", minimum=1),
    _k("num.replica.fetchers", T.INT, 1, "Fetchers per source broker (Kafka's fetcher "
       "threads): each has its own connection and one fetch in flight; a partition's is "
       "fixed by its name.", minimum=1),
    _k("num.recovery.threads.per.data.dir", T.INT, 2, "Logs opened (and recovered after an "
       "unclean shutdown) at a time per data dir, when a batch of them is opened.",
       minimum=1),
    _k("background.threads", T.INT, 10, "Kafka's background task threads (no effect here).",
       minimum=1),
    _k("log.cleaner.threads", T.INT, 1, "Kafka's log cleaner threads (no effect here).",
       minimum=0),
    # --- idempotent producer state ---
    _k("producer.id.expiration.ms", T.INT, 86400000,
       "How long a partition keeps the state of a producer id that stopped writing.", minimum=1),
    _k("producer.id.expiration.check.interval.ms", T.INT, 600000,
       "How often idle producer ids are looked for.", minimum=1),
    # --- compaction ---
    _k("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner."),
    _k("log.cleaner.delete.retention.ms", T.LONG, 86400000, "How long tombstones are kept.",
       topic_name="delete.retention.ms"),
    _k("log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Records younger than this are not cleaned.",
       topic_name="min.compaction.lag.ms"),
    _k("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX,
       "Records older than this are cleaned.", topic_name="max.compaction.lag.ms"),
    _k("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Dirty ratio that triggers cleaning.",
       topic_name="min.cleanable.dirty.ratio"),
    _k("log.cleaner.io.max.bytes.per.second", T.DOUBLE, 1.7976931348623157e308,
       "Cleaner I/O throttle."),
    _k("log.cleaner.backoff.ms", T.LONG, 15000, "Sleep when there is nothing to clean."),
    _k("log.cleaner.dedupe.buffer.size", T.LONG, 134217728,
       "Memory of the cleaner's key -> offset map.", minimum=1024),
    # --- replication (cluster mode) ---
    _k("min.insync.replicas", T.INT, 1, "Replicas that must ack an acks=all produce.",
       topic_name="min.insync.replicas", minimum=1),
    _k("unclean.leader.election.enable", T.BOOLEAN, False, "Allow out-of-sync leaders.",
       topic_name="unclean.leader.election.enable"),
    _k("compression.type", T.STRING, "producer", "Topic compression; producer keeps the batch.",
       topic_name="compression.type",
       choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    _k("replica.lag.time.max.ms", T.LONG, 30000, "Followers lagging longer leave the ISR."),
    _k("replica.fetch.wait.max.ms", T.INT, 500, "Longest a follower's fetch waits at the leader."),
    _k("replica.fetch.min.bytes", T.INT, 1, "Bytes a follower's fetch waits for.", minimum=1),
    _k("replica.fetch.max.bytes", T.INT, 1048576, "Bytes a follower fetches per partition.",
       minimum=0),
    _k("replica.fetch.response.max.bytes", T.INT, 10485760,
       "Bytes a follower fetches per request.", minimum=0),
    _k("replica.fetch.backoff.ms", T.INT, 1000,
       "How long a follower leaves a partition out of its fetches after the leader "
       "answered it with an error (the others go on being fetched).", minimum=0),
    _k("replica.socket.timeout.ms", T.INT, 30000, "Timeout of a follower's requests."),
    # KIP-392: which replica a consumer with client.rack is sent to; Kafka's class name,
    # unset (null) keeps every consumer on the leader
    _k("replica.selector.class", T.STRING, None,
       "Replica selector for consumer fetches; "
       "org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer to a "
       "replica in its client.rack.", choices=(RACK_AWARE_SELECTOR,)),
    _k("max.request.partition.size.limit", T.INT, 2000,
       "Partitions one DescribeTopicPartitions answer holds at most.", minimum=1),
    # --- fetch sessions (KIP-227) ---
    _k("max.incremental.fetch.session.cache.slots", T.INT, 1000,
       "Incremental fetch sessions the broker keeps.", minimum=0),
    # --- operating a cluster (issue 15): reassignment throttles, leaders, shutdown ---
    _k("leader.replication.throttled.rate", T.LONG, LONG_MAX,
       "Bytes/s a leader serves to followers of throttled replicas.", minimum=0),
    _k("follower.replication.throttled.rate", T.LONG, LONG_MAX,
       "Bytes/s a follower fetches for throttled replicas.", minimum=0),
    # topic-level only in Kafka (no broker default beyond the empty list)
    _k("leader.replication.throttled.replicas", T.LIST, [],
       "partition:broker pairs (or *) whose leader-side replication is throttled.",
       topic_name="leader.replication.throttled.replicas"),
    _k("follower.replication.throttled.replicas", T.LIST, [],
       "partition:broker pairs (or *) whose follower-side replication is throttled.",
       topic_name="follower.replication.throttled.replicas"),
    _k("auto.leader.rebalance.enable", T.BOOLEAN, True,
       "Move leadership back to preferred replicas when brokers are imbalanced."),
    _k("leader.imbalance.per.broker.percentage", T.INT, 10,
       "Share of a broker's preferred partitions led elsewhere that triggers a rebalance.",
       minimum=0),
    _k("leader.imbalance.check.interval.seconds", T.LONG, 300,
       "How often the controller checks leader imbalance.", minimum=1),
    _k("controlled.shutdown.enable", T.BOOLEAN, True,
       "Move leaderships away (ControlledShutdown) before a broker stops."),
    _k("controlled.shutdown.max.retries", T.INT, 3,
       "Attempts of a controlled shutdown before stopping anyway.", minimum=0),
    _k("controlled.shutdown.retry.backoff.ms", T.LONG, 5000,
       "Pause between controlled shutdown attempts.", minimum=0),
    _k("zookeeper.session.timeout.ms", T.INT, 18000, "ZooKeeper session timeout."),
    _k("zookeeper.connection.timeout.ms", T.INT, None,
       "Wait for a ZooKeeper connection (default zookeeper.session.timeout.ms)."),
    # --- groups ---
    _k("offsets.topic.num.partitions", T.INT, 50, "Partitions of __consumer_offsets."),
    _k("offsets.topic.replication.factor", T.SHORT, 3, "Replication of __consumer_offsets."),
    _k("offsets.topic.segment.bytes", T.INT, 104857600, "Segment size of __consumer_offsets.",
       minimum=1),
    _k("offsets.retention.minutes", T.INT, 10080, "Committed offsets of empty groups expire."),
    _k("offsets.commit.timeout.ms", T.INT, 5000,
       "Longest an offset commit waits for the offsets partition's ISR.", minimum=1),
    _k("group.initial.rebalance.delay.ms", T.INT, 3000, "Wait for members of a new group."),
    _k("group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout allowed."),
    _k("group.max.session.timeout.ms", T.INT, 1800000, "Largest session timeout allowed."),
    _k("offset.metadata.max.bytes", T.INT, 4096, "Largest metadata of a committed offset."),
    _k("offsets.retention.check.interval.ms", T.LONG, 600000,
       "How often expired committed offsets are removed."),
    # --- transactions ---
    _k("transaction.state.log.num.partitions", T.INT, 50,
       "Partitions of __transaction_state.", minimum=1),
    _k("transaction.state.log.replication.factor", T.SHORT, 3,
       "Replication of __transaction_state.", minimum=1),
    _k("transaction.state.log.min.isr", T.INT, 2,
       "min.insync.replicas of __transaction_state.", minimum=1),
    _k("transaction.state.log.segment.bytes", T.INT, 104857600,
       "Segment size of __transaction_state.", minimum=1),
    _k("transaction.max.timeout.ms", T.INT, 900000,
       "Largest transaction timeout a producer may ask for.", minimum=1),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000,
       "How often transactions past their timeout are looked for and aborted.", minimum=1),
    _k("transactional.id.expiration.ms", T.INT, 604800000,
       "A transactional id idle this long (no transaction) is forgotten.", minimum=1),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000,
       "How often expired transactional ids are removed.", minimum=1),
    # --- KIP-848 consumer groups (group.protocol=consumer) ---
    _k("group.consumer.assignors", T.LIST, ["uniform", "range"],
       "Server-side assignors; the first is the default."),
    _k("group.consumer.session.timeout.ms", T.INT, 45000,
       "A member silent this long is removed from its consumer group."),
    _k("group.consumer.min.session.timeout.ms", T.INT, 45000,
       "Smallest group.consumer.session.timeout.ms allowed.", minimum=1),
    _k("group.consumer.max.session.timeout.ms", T.INT, 60000,
       "Largest group.consumer.session.timeout.ms allowed.", minimum=1),
    _k("group.consumer.heartbeat.interval.ms", T.INT, 5000,
       "The heartbeat interval consumer group members are given."),
    _k("group.consumer.min.heartbeat.interval.ms", T.INT, 5000,
       "Smallest group.consumer.heartbeat.interval.ms allowed.", minimum=1),
    _k("group.consumer.max.heartbeat.interval.ms", T.INT, 15000,
       "Largest group.consumer.heartbeat.interval.ms allowed.", minimum=1),
    _k("group.consumer.max.size", T.INT, INT_MAX, "Most members of one consumer group.",
       minimum=1),
    _k("group.consumer.regex.refresh.interval.ms", T.INT, 600000,
       "How often a consumer group's subscribed regexes are resolved again even when no "
       "topic was created (they are also resolved when topics are created, at most once "
       "in 10 s).", minimum=10000),
)
del T

BY_NAME: dict[str, ConfigKey] = {k.name: k for k in BROKER_CONFIGS}
TOPIC_KEYS: dict[str, ConfigKey] = {k.topic_name: k for k in BROKER_CONFIGS if k.topic_name}

#: Broker keys Kafka lets `kafka-configs.sh --entity-type brokers` change without a
#: restart (its DynamicBrokerConfig's reconfigurable sets) and pybroker applies at run
#: time: every topic-config default (a new topic, and the open logs that do not
#: override it, take the new value), the cleaner's settings it reads per cleaning and
#: the replication throttles. A name missing from BY_NAME (a key this build lacks)
#: stays refused. Kafka's dynamic keys for things pybroker does not have (Kerberos, the
#: Java thread pools) are accepted as Kafka accepts them and tune nothing; those whose
#: change pybroker would have to apply and cannot at run time (listeners, SSL stores,
#: SASL mechanisms and JAAS) are refused rather than silently ignored.
DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset({
    *(k.name for k in BROKER_CONFIGS if k.topic_name),
    "log.roll.ms", "log.retention.ms", "log.retention.minutes",
    # read by the cleaner at each cleaning
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size",
    # read by the replication throttles through BrokerConfig
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    # the fetchers per leader: followed partitions move to their fetchers at once
    "num.replica.fetchers",
    # the connection limits, re-read when they change
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    # read at each batch of log opens
    "num.recovery.threads.per.data.dir",
    # keys of Kafka's DynamicBrokerConfig that tune nothing pybroker has (Kerberos, the
    # Java thread pools): accepted as Kafka accepts them, stored and shown
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "num.io.threads", "num.network.threads",
    "background.threads", "log.cleaner.threads",
})
#: Kafka's entity name of the cluster-wide default (/config/brokers/<default>)
BROKER_DEFAULT_ENTITY = "<default>"


def parse_value(key: ConfigKey, raw: Any) -> Any:
    """Turn a properties-file string (or a typed value) into the key's type."""
    if raw is None:
        return None
    try:
        if key.type is ConfigType.BOOLEAN:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError(raw)
            return text == "true"
        if key.type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            value = int(str(raw).strip())
            if key.minimum is not None and value < key.minimum:
                raise ConfigError(f"{key.name} must be at least {key.minimum}, got {value}")
            return value
        if key.type is ConfigType.DOUBLE:
            return float(str(raw).strip())
        if key.type is ConfigType.LIST:
            items = raw if isinstance(raw, list) else [
                p.strip() for p in str(raw).split(",") if p.strip()]
            if key.choices:
                bad = [i for i in items if i not in key.choices]
                if bad:
                    raise ConfigError(f"invalid value {bad[0]!r} for {key.name}")
            return items
        text = str(raw).strip()
        if key.choices and text not in key.choices:
            raise ConfigError(f"invalid value {text!r} for {key.name}")
        return text
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid value {raw!r} for {key.name}") from exc


def format_value(key: ConfigKey, value: Any) -> str | None:
    """The string Kafka shows in DescribeConfigs."""
    if value is None or key.type is ConfigType.PASSWORD:  # sensitive: never shown
        return None
    if key.type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if key.type is ConfigType.LIST:
        return ",".join(value)
    return str(value)


def read_properties(path: str | Path) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, \\ continuation."""
    props: dict[str, str] = {}
    pending = ""
    for line in Path(path).read_text().splitlines():
        line = pending + line.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if match:
            props[match.group(1)] = match.group(2)
        else:
            props[line] = ""
    return props


def parse_dynamic(name: str, raw: Any) -> Any:
    """Validate a dynamic broker config value; ConfigError for a key that cannot be
    changed at run time (Kafka's message) or a bad value."""
    if name not in DYNAMIC_BROKER_KEYS or name not in BY_NAME:
        raise ConfigError(f"Cannot update these configs dynamically: Set({name})")
    return parse_value(BY_NAME[name], raw)


class BrokerConfig:
    """Values given in server.properties / --override, over the table's defaults, under
    the dynamic layers (Kafka's precedence): this broker's dynamic configs
    (/config/brokers/<id>), then the cluster-wide dynamic defaults
    (/config/brokers/<default>), then the static ones, then the table's defaults.
    Everything reads values through here, so a dynamic change is seen by the next read."""

    def __init__(self, given: Mapping[str, str] | None = None) -> None:
        #: dynamic layers, parsed; replaced whole by set_dynamic()
        self.dynamic_broker: dict[str, Any] = {}
        self.dynamic_default: dict[str, Any] = {}
        self.given: dict[str, Any] = {}
        #: keys not in the table (Kafka keys pybroker ignores, typos) are kept and logged
        self.unknown: dict[str, str] = {}
        for name, raw in (given or {}).items():
            key = BY_NAME.get(name)
            if key is None:
                self.unknown[name] = raw
            else:
                self.given[name] = parse_value(key, raw)

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        props = read_properties(path) if path else {}
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"--override takes key=value, got {item!r}")
            name, value = item.split("=", 1)
            props[name.strip()] = value.strip()
        return cls(props)

    def log_unknown(self) -> None:
        """Warn once per key the table does not have (a typo such as `listener=` would
        otherwise fall back to a default unnoticed); Kafka accepts and logs them too."""
        for name in sorted(self.unknown):
            if name.startswith("listener.name."):  # per-listener forms (pybroker.security)
                continue
            close = difflib.get_close_matches(name, BY_NAME, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            log.warning("The configuration '%s' was supplied but isn't a known config.%s",
                        name, hint)

    def __getitem__(self, name: str) -> Any:
        for layer in (self.dynamic_broker, self.dynamic_default, self.given):
            if name in layer:
                return layer[name]
        return BY_NAME[name].default

    def source(self, name: str) -> ConfigSource:
        return self.layers(name)[0][1] if self.layers(name) else ConfigSource.DEFAULT_CONFIG

    def layers(self, name: str) -> list[tuple[Any, ConfigSource]]:
        """Every value `name` has, highest precedence first (DescribeConfigs' synonyms):
        dynamic per-broker, dynamic default, static, then the table's default (unless
        it is null)."""
        found = [(layer[name], source) for layer, source in (
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.given, ConfigSource.STATIC_BROKER_CONFIG)) if name in layer]
        if BY_NAME[name].default is not None:
            found.append((BY_NAME[name].default, ConfigSource.DEFAULT_CONFIG))
        return found

    def set_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]) -> set[str]:
        """Take the dynamic layers as stored (strings); returns the keys whose effective
        value changed. A stored key or value this broker cannot use (written by another
        version, or by hand) is logged and skipped, as Kafka skips invalid dynamic
        configs rather than failing."""
        layers = []
        for what, raw in (("default", default), ("broker", broker)):
            parsed = {}
            for name, value in raw.items():
                try:
                    parsed[name] = parse_dynamic(name, value)
                except ConfigError as exc:
                    log.warning("ignoring dynamic %s config %s=%s: %s. The static or "
                                "default value applies; correct or delete it with pybroker "
                                "configs --alter", what, name, value, exc)
            layers.append(parsed)
        names = set(self.dynamic_default) | set(self.dynamic_broker) | set(layers[0]) | set(
            layers[1])
        before = {n: self[n] for n in names}
        self.dynamic_default, self.dynamic_broker = layers
        return {n for n in names if self[n] != before[n]}

    # --- derived values with Kafka's fallback chains ---
    @property
    def broker_id(self) -> int:
        if "broker.id" not in self.given and self["node.id"] >= 0:
            return int(self["node.id"])
        return int(self["broker.id"])

    @property
    def log_dirs(self) -> list[str]:
        return self["log.dirs"] or [self["log.dir"]]

    def topic_default(self, topic_name: str) -> Any:
        """The broker-level value a topic config takes when the topic does not set it."""
        key = TOPIC_KEYS[topic_name]
        if topic_name == "segment.ms":
            if self["log.roll.ms"] is not None:
                return self["log.roll.ms"]
            return self["log.roll.hours"] * 3600_000
        if topic_name == "retention.ms":
            if self["log.retention.ms"] is not None:
                return self["log.retention.ms"]
            if self["log.retention.minutes"] is not None:
                return self["log.retention.minutes"] * 60_000
            return self["log.retention.hours"] * 3600_000
        if topic_name == "flush.ms":
            value = self["log.flush.interval.ms"]
            return self["log.flush.scheduler.interval.ms"] if value is None else value
        return self[key.name]

    def topic_default_source(self, topic_name: str) -> ConfigSource:
        synonyms = self.topic_default_synonyms(topic_name)
        return synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG

    def topic_default_synonyms(self, topic_name: str) -> list[tuple[str, Any, ConfigSource]]:
        """The broker keys behind a topic config's default, as DescribeConfigs lists
        them: (name, value, source), the one in force first. From Kafka's primary key
        on (log.retention.ms for retention.ms) when it is set; when only another key
        of the group is (log.retention.hours), every key's values, where Kafka would
        list none."""
        primary = TOPIC_PRIMARY_KEYS.get(topic_name, TOPIC_KEYS[topic_name].name)
        return self.synonyms(primary, keep_all=True)

    def synonyms(self, name: str, keep_all: bool = False
                 ) -> list[tuple[str, Any, ConfigSource]]:
        """Kafka's configSynonyms: the values of `name` and of the keys that set the same
        thing (BROKER_SYNONYMS), layer by layer (dynamic per-broker, dynamic default,
        static, default), each layer's keys in order; entries before `name`'s first are
        dropped, so a broker key is listed from its own value on (none when it has
        none, unless keep_all)."""
        group = BROKER_SYNONYMS.get(name, (name,))
        found = [(n, layer[n], source) for layer, source in (
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.given, ConfigSource.STATIC_BROKER_CONFIG)) for n in group if n in layer]
        found += [(n, BY_NAME[n].default, ConfigSource.DEFAULT_CONFIG) for n in group
                  if BY_NAME[n].default is not None]
        names = [n for n, _, _ in found]
        if name in names:
            return found[names.index(name):]
        return found if keep_all else []


#: Kafka's broker key for a topic config where the table names another of its group
TOPIC_PRIMARY_KEYS = {"retention.ms": "log.retention.ms", "segment.ms": "log.roll.ms",
                      "flush.ms": "log.flush.interval.ms"}
#: broker keys that set the same thing, the one that wins first (Kafka's
#: DynamicBrokerConfig.brokerConfigSynonyms)
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.hours": ("log.roll.ms", "log.roll.hours"),
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.ms", "log.retention.minutes",
                              "log.retention.hours"),
    "log.retention.hours": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


def topic_key_type(topic_name: str) -> ConfigType:
    key = TOPIC_KEYS[topic_name]
    # segment.ms and retention.ms are LONG at topic level, whatever unit the broker key has
    if topic_name in ("segment.ms", "retention.ms", "flush.ms"):
        return ConfigType.LONG
    return key.type


def parse_topic_config(name: str, raw: Any) -> Any:
    """Validate one topic-level override; raises ConfigError for unknown names/values."""
    key = TOPIC_KEYS.get(name)
    if key is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    return parse_value(dataclasses.replace(key, name=name, type=topic_key_type(name)), raw)


class TopicConfig:
    """A topic's effective configuration: its overrides over the broker's defaults."""

    def __init__(self, broker: BrokerConfig, overrides: Mapping[str, Any]) -> None:
        self.broker = broker
        self.overrides = dict(overrides)

    def __getitem__(self, topic_name: str) -> Any:
        if topic_name in self.overrides:
            return self.overrides[topic_name]
        return self.broker.topic_default(topic_name)

    def source(self, topic_name: str) -> ConfigSource:
        if topic_name in self.overrides:
            return ConfigSource.DYNAMIC_TOPIC_CONFIG
        return self.broker.topic_default_source(topic_name)
