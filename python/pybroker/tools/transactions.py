"""`pybroker transactions`: kafka-transactions.sh — list, describe and abort
transactions.

Unlike the other tools this one speaks the protocol itself (pybroker's codec
over a plain connection): librdkafka has no admin calls for ListTransactions,
DescribeTransactions or WriteTxnMarkers. So it works against stock Kafka too.

  list                          ListTransactions on every broker:
                                TransactionalId Coordinator ProducerId TransactionState
  describe --transactional-id   DescribeTransactions on the id's coordinator:
                                CoordinatorId TransactionalId ProducerId ProducerEpoch
                                TransactionState TransactionTimeoutMs
                                CurrentTransactionStartTimeMs TransactionDurationMs
                                TopicPartitions
  describe-producers --topic --partition
                                DescribeProducers on the partition's leader:
                                ProducerId ProducerEpoch LatestCoordinatorEpoch
                                LastSequence LastTimestamp CurrentTransactionStartOffset
  abort --topic --partition (--start-offset | --producer-id --producer-epoch
        --coordinator-epoch)    write an ABORT marker for a hanging transaction to the
                                partition's leader (WriteTxnMarkers); with --start-offset
                                the producer is the one whose open transaction starts
                                there (DescribeProducers), as Kafka's abort finds it
  find-hanging --broker-id | --topic [--partition]
                                open transactions older than --max-transaction-timeout
                                minutes whose producer no coordinator lists as ongoing:
                                Topic Partition ProducerId ProducerEpoch CoordinatorEpoch
                                StartOffset LastTimestamp Duration(min)"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import anyio

from pybroker.client.connection import BrokerConnection, BrokerUnreachable
from pybroker.errors import ErrorCode
from pybroker.tools._common import ToolError, add_bootstrap
from pybroker.tools._retry import Retriable, retrying_async

COMMAND = "transactions"
HELP = "list, describe and abort transactions (kafka-transactions.sh)"

TIMEOUT_MS = 5000
CLIENT_ID = "pybroker-transactions"
METADATA, FIND_COORDINATOR, WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = 3, 10, 27, 61
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
LIST_COLUMNS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_COLUMNS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions")
PRODUCER_COLUMNS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_COLUMNS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    parser.add_argument("--timeout", type=int, default=TIMEOUT_MS, metavar="MS",
                        help=f"how long each request may wait, in ms (default {TIMEOUT_MS})")
    commands = parser.add_subparsers(dest="action", required=True)
    commands.add_parser("list", help="list transactions")
    describe = commands.add_parser("describe", help="describe a transaction")
    describe.add_argument("--transactional-id", required=True)
    producers = commands.add_parser("describe-producers", help="producers of a partition")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    abort = commands.add_parser("abort", help="abort a hanging transaction")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int)
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int)
    hanging.add_argument("--topic")
    hanging.add_argument("--partition", type=int)
    hanging.add_argument("--max-transaction-timeout", type=int, default=15)


def run(args: argparse.Namespace) -> int:
    try:
        return anyio.run(_run, args)
    except (ToolError, BrokerUnreachable) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace) -> int:
    """The action, again after a retriable error (a coordinator still loading its
    partition right after a start, a leader moving) until --timeout has passed."""
    return await retrying_async(lambda: _run_once(args), args.timeout / 1000,
                                f"transactions {args.action}")


async def _run_once(args: argparse.Namespace) -> int:
    tool = Tool(args.bootstrap_server, args.timeout / 1000)
    try:
        if args.action == "list":
            print_table(await tool.list(), LIST_COLUMNS)
        elif args.action == "describe":
            print_table([await tool.describe(args.transactional_id)], DESCRIBE_COLUMNS)
        elif args.action == "describe-producers":
            print_table([p[:6] for p in await tool.producers(args.topic, args.partition)],
                        PRODUCER_COLUMNS)
        elif args.action == "abort":
            await abort(tool, args)
        else:
            print_table(await tool.find_hanging(args.broker_id, args.topic, args.partition,
                                                args.max_transaction_timeout), HANGING_COLUMNS)
        return 0
    finally:
        await tool.close()


async def abort(tool: Tool, args: argparse.Namespace) -> None:
    if args.start_offset is not None:
        found = [p for p in await tool.producers(args.topic, args.partition)
                 if p[5] == args.start_offset]
        if not found:
            raise ToolError(f"no open transaction starts at offset {args.start_offset} of "
                            f"{args.topic}-{args.partition}")
        pid, epoch, coordinator_epoch = found[0][0], found[0][1], found[0][2]
    elif None in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        raise ToolError("abort needs --start-offset, or --producer-id, --producer-epoch and "
                        "--coordinator-epoch")
    else:
        pid, epoch, coordinator_epoch = (args.producer_id, args.producer_epoch,
                                         args.coordinator_epoch)
    await tool.abort(args.topic, args.partition, pid, epoch, coordinator_epoch)


def print_table(rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> None:
    cells = [columns] + [tuple(str(v) for v in row) for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for row in cells:
        print(" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


class Tool:
    def __init__(self, bootstrap: str, timeout_s: float) -> None:
        self.bootstrap = [hp.strip() for hp in bootstrap.split(",") if hp.strip()]
        self.timeout_s = timeout_s
        self._connections: dict[tuple[str, int], BrokerConnection] = {}

    async def _request(self, address: tuple[str, int], api_key: int, version: int,
                       body: dict[str, Any]) -> dict[str, Any]:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = BrokerConnection(
                address[0], address[1], CLIENT_ID, self.timeout_s)
        return await connection.request(api_key, version, body)

    async def brokers(self) -> dict[int, tuple[str, int]]:
        errors = []
        for hp in self.bootstrap:
            host, _, port = hp.rpartition(":")
            try:
                meta = await self._request((host, int(port)), METADATA, 1, {"topics": []})
            except (BrokerUnreachable, ValueError) as exc:
                errors.append(str(exc))
                continue
            return {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
        raise ToolError(f"no broker of {','.join(self.bootstrap)} answered: {errors}")

    async def list(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for node, address in sorted((await self.brokers()).items()):
            answer = await self._request(address, LIST_TRANSACTIONS, 0,
                                         {"state_filters": [], "producer_id_filters": []})
            _check(answer["error_code"], f"listing the transactions of broker {node}")
            rows += [(t["transactional_id"], node, t["producer_id"], t["transaction_state"])
                     for t in answer["transaction_states"]]
        return rows

    async def describe(self, transactional_id: str) -> tuple[Any, ...]:
        brokers = await self.brokers()
        found = await self._request(next(iter(brokers.values())), FIND_COORDINATOR, 1,
                                    {"key": transactional_id, "key_type": 1})
        _check(found["error_code"], f"finding the coordinator of {transactional_id}")
        answer = await self._request((found["host"], found["port"]), DESCRIBE_TRANSACTIONS, 0,
                                     {"transactional_ids": [transactional_id]})
        [state] = answer["transaction_states"]
        _check(state["error_code"], f"describing {transactional_id}")
        start = state["transaction_start_time_ms"]
        duration = int(time.time() * 1000) - start if start >= 0 else -1
        partitions = ",".join(f"{t['topic']}-{p}" for t in state["topics"]
                              for p in t["partitions"])
        return (found["node_id"], transactional_id, state["producer_id"],
                state["producer_epoch"], state["transaction_state"],
                state["transaction_timeout_ms"], start if start >= 0 else "None",
                duration if duration >= 0 else "None", partitions)

    async def leaders(self, topics: list[str] | None) -> dict[tuple[str, int], int]:
        """(topic, partition) -> leader id, of `topics` (None: every topic)."""
        host, _, port = self.bootstrap[0].rpartition(":")
        meta = await self._request((host, int(port)), METADATA, 1, {
            "topics": None if topics is None else [{"name": t} for t in topics]})
        return {(t["name"], p["partition_index"]): p["leader_id"]
                for t in meta["topics"] for p in t["partitions"]}

    async def producers(self, topic: str, partition: int) -> list[tuple[Any, ...]]:
        """(pid, epoch, coordinator epoch, last sequence, last timestamp, txn start
        offset) of the partition's producers, from its leader."""
        brokers = await self.brokers()
        leader = (await self.leaders([topic])).get((topic, partition), -1)
        if leader not in brokers:
            raise ToolError(f"{topic}-{partition} has no leader")
        answer = await self._request(brokers[leader], DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": topic, "partition_indexes": [partition]}]})
        [part] = answer["topics"][0]["partitions"]
        _check(part["error_code"], f"describing the producers of {topic}-{partition}")
        return [(p["producer_id"], p["producer_epoch"], p["coordinator_epoch"],
                 p["last_sequence"], p["last_timestamp"], p["current_txn_start_offset"])
                for p in part["active_producers"]]

    async def find_hanging(self, broker_id: int | None, topic: str | None,
                           partition: int | None, max_minutes: int) -> list[tuple[Any, ...]]:
        leaders = await self.leaders([topic] if topic else None)
        wanted = [tp for tp, leader in sorted(leaders.items())
                  if (broker_id is None or leader == broker_id)
                  and (partition is None or tp[1] == partition)]
        if broker_id is None and topic is None:
            raise ToolError("find-hanging needs --broker-id or --topic")
        ongoing = {(pid, state) for _, _, pid, state in await self.list()}
        now = int(time.time() * 1000)
        rows: list[tuple[Any, ...]] = []
        for t, p in wanted:
            for pid, epoch, coordinator_epoch, _, last_ts, start in await self.producers(t, p):
                if start < 0 or now - last_ts < max_minutes * 60000:
                    continue
                if (pid, "Ongoing") in ongoing:
                    continue  # a coordinator still has it: it will end or time out
                rows.append((t, p, pid, epoch, coordinator_epoch, start, last_ts,
                             (now - last_ts) // 60000))
        return rows

    async def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int) -> None:
        brokers = await self.brokers()
        leader = (await self.leaders([topic])).get((topic, partition), -1)
        if leader not in brokers:
            raise ToolError(f"{topic}-{partition} has no leader")
        answer = await self._request(brokers[leader], WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": False, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
        for marker in answer["markers"]:
            for t in marker["topics"]:
                for p in t["partitions"]:
                    _check(p["error_code"], f"aborting the transaction on {topic}-{partition}")

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()


def _check(code: int, what: str) -> None:
    if code:
        found = ErrorCode.known(code)
        name = found.name if found is not None else str(code)
        if found is not None and found.retriable:
            raise Retriable(f"{what} failed: {name}", found)
        raise ToolError(f"{what} failed: {name}")
