"""The agent's DNS proxy (istio-agent's, on 15053): answers mesh names, forwards the rest.

With DNS capture (ISTIO_META_DNS_CAPTURE), the pod's queries to port 53 are redirected here
(`meshpilot iptables --redirect-dns`). A and AAAA queries for a name of the name table
(ServiceEntry hosts, Kubernetes services by full name, `name.ns`, `name.ns.svc`, and `name`
in the proxy's own namespace) are answered from it, with auto-allocated VIPs where discovery
gave them; anything else goes to resolv.conf's nameservers, over UDP or TCP as it came.

The upstream sockets are opened with the proxy's UID/GID as their owner (setfsuid/setfsgid
on the event loop's thread while the socket is created): capture lets the proxy's own
traffic out, so the forwarded queries are not redirected back here. Messages are parsed and
built with dnspython.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import ip_address
from typing import cast

import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from meshpilot.model.name_table import NameInfo

__all__ = ["DnsOptions", "DnsProxy", "NameLookup"]

log = logging.getLogger(__name__)

TTL = 30  # seconds, as istio-agent answers
UDP_LIMIT = 512  # without EDNS


@dataclass(frozen=True, slots=True, kw_only=True)
class DnsOptions:
    namespace: str  # the proxy's: `name` alone resolves there
    upstreams: tuple[str, ...] = ()  # resolv.conf's nameservers
    port: int = 15053
    hosts: tuple[str, ...] = ("127.0.0.1",)  # ("127.0.0.1", "::1") with IPv6
    owner: tuple[int, int] | None = None  # (uid, gid) of upstream sockets: capture skips them
    upstream_port: int = 53
    timeout: float = 5.0


class NameLookup:
    """Name → (IPv4s, IPv6s), every name a table entry answers to, lower case, no dot."""

    def __init__(self, table: Mapping[str, NameInfo], namespace: str) -> None:
        self.names: dict[str, tuple[list[str], list[str]]] = {}
        for host, info in table.items():
            v4 = [ip for ip in info.ips if ip_address(ip).version == 4]
            v6 = [ip for ip in info.ips if ip_address(ip).version == 6]
            for name in _aliases(host, info, namespace):
                self.names.setdefault(name, (v4, v6))

    def answer(self, name: str, rdtype: dns.rdatatype.RdataType) -> list[str] | None:
        """The addresses for an A/AAAA query; [] for another type of a known name (no
        data); None when the name is not ours."""
        found = self.names.get(name.lower().rstrip("."))
        if found is None:
            return None
        if rdtype == dns.rdatatype.A:
            return found[0]
        if rdtype == dns.rdatatype.AAAA:
            return found[1]
        return []


def _aliases(host: str, info: NameInfo, namespace: str) -> list[str]:
    names = [host.lower()]
    if info.shortname and info.namespace:
        short = f"{info.shortname}.{info.namespace}".lower()
        names += [short, f"{short}.svc"]
        if info.namespace == namespace:
            names.append(info.shortname.lower())
    return names


class DnsProxy:
    def __init__(self, options: DnsOptions) -> None:
        self.options = options
        self.lookup = NameLookup({}, options.namespace)
        self._servers: list[asyncio.Server] = []
        self._transports: list[asyncio.DatagramTransport] = []

    def update(self, table: Mapping[str, NameInfo]) -> None:
        self.lookup = NameLookup(table, self.options.namespace)

    async def start(self) -> None:
        """Listen on UDP and TCP. The listening sockets belong to `owner` too: capture's
        conntrack zone rules match the proxy's replies (source port 15053) by owner."""
        loop = asyncio.get_running_loop()
        owner, port = self.options.owner, self.options.port
        try:
            for host in self.options.hosts:
                udp = _socket(host, socket.SOCK_DGRAM, owner)
                udp.bind((host, port))
                transport, _ = await loop.create_datagram_endpoint(lambda: _Udp(self), sock=udp)
                self._transports.append(transport)
                tcp = _socket(host, socket.SOCK_STREAM, owner)
                tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                tcp.bind((host, port))
                self._servers.append(await asyncio.start_server(self._tcp_client, sock=tcp))
        except BaseException:
            await self.close()
            raise
        log.info("DNS proxy on %s port %d", ", ".join(self.options.hosts), port)

    async def close(self) -> None:
        for transport in self._transports:
            transport.close()
        for server in self._servers:
            server.close()
            await server.wait_closed()
        self._transports, self._servers = [], []

    async def resolve(self, wire: bytes, tcp: bool) -> bytes | None:
        """The response to one query, or None for what is not a query at all."""
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return None
        if query.flags & dns.flags.QR or len(query.question) != 1:
            return _error(query, dns.rcode.FORMERR)
        question = query.question[0]
        ips = self.lookup.answer(question.name.to_text(), question.rdtype)
        if ips is None:
            return await self._forward(query, wire, tcp)
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA | dns.flags.RA
        if ips:
            rrset = dns.rrset.from_text_list(
                question.name, TTL, dns.rdataclass.IN, question.rdtype, ips
            )
            response.answer.append(rrset)
        limit = 65535 if tcp else max(UDP_LIMIT, query.payload if query.edns >= 0 else 0)
        try:
            return response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            response.answer.clear()
            response.flags |= dns.flags.TC
            return response.to_wire()

    async def _forward(self, query: dns.message.Message, wire: bytes, tcp: bool) -> bytes:
        for server in self.options.upstreams:
            try:
                exchange = _ask_tcp if tcp else _ask_udp
                answer = await asyncio.wait_for(
                    exchange((server, self.options.upstream_port), wire, self.options.owner),
                    self.options.timeout,
                )
            except (OSError, TimeoutError, ValueError) as exc:
                log.debug("DNS upstream %s: %s", server, exc)
                continue
            if len(answer) >= 2 and answer[:2] == wire[:2]:
                return answer
        return _error(query, dns.rcode.SERVFAIL)

    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(2)
                wire = await reader.readexactly(struct.unpack("!H", head)[0])
                answer = await self.resolve(wire, tcp=True)
                if answer is None:
                    break
                writer.write(struct.pack("!H", len(answer)) + answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, proxy: DnsProxy) -> None:
        self.proxy = proxy
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        task = asyncio.create_task(self._answer(data, addr))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _answer(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        answer = await self.proxy.resolve(data, tcp=False)
        if answer is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(answer, addr)


def _error(query: dns.message.Message, rcode: dns.rcode.Rcode) -> bytes:
    response = dns.message.make_response(query)
    response.set_rcode(rcode)
    return response.to_wire()


Upstream = tuple[str, int]


def _socket(address: str, kind: socket.SocketKind, owner: tuple[int, int] | None) -> socket.socket:
    """A non-blocking socket of `address`'s family, owned by `owner` as iptables' owner
    match sees it: the creating thread's filesystem UID/GID, set only around the creation."""
    family = socket.AF_INET6 if ip_address(address).version == 6 else socket.AF_INET
    if owner is None:
        sock = socket.socket(family, kind)
    else:
        libc = ctypes.CDLL(None, use_errno=True)
        old_gid, old_uid = libc.setfsgid(owner[1]), libc.setfsuid(owner[0])
        try:
            sock = socket.socket(family, kind)
        finally:
            libc.setfsuid(old_uid)
            libc.setfsgid(old_gid)
    sock.setblocking(False)
    return sock


async def _ask_udp(server: Upstream, wire: bytes, owner: tuple[int, int] | None) -> bytes:
    loop = asyncio.get_running_loop()
    with _socket(server[0], socket.SOCK_DGRAM, owner) as sock:
        await loop.sock_connect(sock, server)
        await loop.sock_sendall(sock, wire)
        return await loop.sock_recv(sock, 65535)


async def _ask_tcp(server: Upstream, wire: bytes, owner: tuple[int, int] | None) -> bytes:
    loop = asyncio.get_running_loop()
    with _socket(server[0], socket.SOCK_STREAM, owner) as sock:
        await loop.sock_connect(sock, server)
        await loop.sock_sendall(sock, struct.pack("!H", len(wire)) + wire)
        head = await _recv_exactly(loop, sock, 2)
        return await _recv_exactly(loop, sock, struct.unpack("!H", head)[0])


async def _recv_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await loop.sock_recv(sock, size - len(data))
        if not chunk:
            raise ValueError("the upstream closed the connection mid-answer")
        data += chunk
    return data
