"""Keeping the DNS proxy's name table: fetched from discovery, again every few seconds.

Discovery answers `/meshpilot.nds.v1.NameTableService/Fetch` on its xDS gRPC port or Unix
socket (xds/name_tables.py) with the table for this proxy; the agent polls it (Istio pushes
the same table over NDS). A failed fetch keeps the last table and is logged once per
outage; the DNS proxy meanwhile forwards what it does not know.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping

import grpc

from meshpilot.model.name_table import NameInfo, NameTableError, name_table_from_json

__all__ = ["FETCH_METHOD", "NameTableClient"]

log = logging.getLogger(__name__)

FETCH_METHOD = "/meshpilot.nds.v1.NameTableService/Fetch"


class NameTableClient:
    def __init__(self, address: str, proxy_id: str, *, auto_allocate: bool) -> None:
        """`address`: `host:port` or `unix:/path`, plaintext (as Envoy's xDS there)."""
        self.address = address
        self.request = json.dumps({"proxyID": proxy_id, "autoAllocate": auto_allocate}).encode()

    async def fetch(
        self, channel: grpc.aio.Channel | None = None, timeout: float = 5.0
    ) -> dict[str, NameInfo]:
        """The current table; NameTableError naming discovery's answer when it has none."""
        if channel is None:
            async with grpc.aio.insecure_channel(self.address) as own:
                return await self.fetch(own, timeout)
        try:
            body = await channel.unary_unary(FETCH_METHOD)(self.request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise NameTableError(
                f"name table from {self.address}: {exc.code().name}: {exc.details()}"
            ) from None
        try:
            return name_table_from_json(json.loads(body))
        except ValueError as exc:
            raise NameTableError(f"name table from {self.address}: {exc}") from None

    async def keep(
        self, update: Callable[[Mapping[str, NameInfo]], None], interval: float = 2.0
    ) -> None:
        """Fetch, hand the table to `update` when it changed, wait, forever (a quarter of
        `interval` until the first table: discovery knows a pod once its Envoy connects)."""
        addresses = [a.strip() for a in self.address.split(",")]
        if len(addresses) == 1:
            async with grpc.aio.insecure_channel(self.address) as channel:
                await self._keep(channel, update, interval)
            return
        # Control plane replicas: fetch from one; when it fails, from the next.
        last: dict[str, NameInfo] | None = None
        turn = 0
        while True:
            one = NameTableClient(addresses[turn % len(addresses)], "", auto_allocate=False)
            one.request = self.request
            try:
                table = await one.fetch()
            except NameTableError as exc:
                log.warning("DNS proxy: %s (keeping the last table)", exc)
                turn += 1
            else:
                if table != last:
                    update(table)
                    last = table
            await asyncio.sleep(interval if last is not None else interval / 4)

    async def _keep(
        self,
        channel: grpc.aio.Channel,
        update: Callable[[Mapping[str, NameInfo]], None],
        interval: float,
    ) -> None:
        last: dict[str, NameInfo] | None = None
        failing = False
        while True:
            try:
                table = await self.fetch(channel)
            except NameTableError as exc:
                if not failing:
                    log.warning("DNS proxy: %s (keeping the last table)", exc)
                failing = True
            else:
                if failing:
                    log.info("DNS proxy: name table from %s again", self.address)
                failing = False
                if table != last:
                    update(table)
                    last = table
            await asyncio.sleep(interval if last is not None else interval / 4)
