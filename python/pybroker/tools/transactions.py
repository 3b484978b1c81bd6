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
  abort --topic --partition --producer-id --producer-epoch --coordinator-epoch
                                write an ABORT marker for a hanging transaction to the
                                partition's leader (WriteTxnMarkers), as Kafka's abort
                                does once it knows the producer.

`describe-producers` and `find-hanging`, and `abort --start-offset`, need
DescribeProducers (the partition's producer state), which pybroker does not
serve yet: they say so."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import anyio

from pybroker.client.connection import BrokerConnection, BrokerUnreachable
from pybroker.errors import ErrorCode

COMMAND = "transactions"
HELP = "list, describe and abort transactions (kafka-transactions.sh)"

TIMEOUT_MS = 5000
CLIENT_ID = "pybroker-transactions"
METADATA, FIND_COORDINATOR, WRITE_TXN_MARKERS = 3, 10, 27
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
LIST_COLUMNS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_COLUMNS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions")
NOT_SERVED = ("needs DescribeProducers (a partition's producer state), which the broker "
              "does not serve")


class ToolError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="the broker(s) to connect to")
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
    tool = Tool(args.bootstrap_server, args.timeout / 1000)
    try:
        if args.action == "list":
            print_table(await tool.list(), LIST_COLUMNS)
        elif args.action == "describe":
            print_table([await tool.describe(args.transactional_id)], DESCRIBE_COLUMNS)
        elif args.action == "abort":
            if None in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
                raise ToolError("abort --start-offset " + NOT_SERVED + "; give --producer-id, "
                                "--producer-epoch and --coordinator-epoch")
            await tool.abort(args.topic, args.partition, args.producer_id,
                             args.producer_epoch, args.coordinator_epoch)
        else:
            raise ToolError(f"{args.action} {NOT_SERVED}")
        return 0
    finally:
        await tool.close()


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

    async def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int) -> None:
        brokers = await self.brokers()
        host, _, port = self.bootstrap[0].rpartition(":")
        meta = await self._request((host, int(port)), METADATA, 1, {"topics": [{"name": topic}]})
        leader = -1
        for t in meta["topics"]:
            for p in t["partitions"]:
                if t["name"] == topic and p["partition_index"] == partition:
                    leader = p["leader_id"]
        if leader not in brokers:
            raise ToolError(f"{topic}-{partition} has no leader")
        answer = await self._request(brokers[leader], WRITE_TXN_MARKERS, 0, {"markers": [{
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
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        raise ToolError(f"{what} failed: {name}")
