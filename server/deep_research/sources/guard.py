"""The address guard: which addresses a fetch may connect to (protection against SSRF).

A URL in a message is hostile: it may point at the machine itself (`127.0.0.1`,
`localhost`, `[::1]`, `2130706433`, `0x7f.1`), at the local network, or at a cloud's
metadata service (`169.254.169.254`). So a fetch resolves the host name here, checks every
address it resolves to, and connects to a checked address itself (`fetch.py`): a DNS
answer that changes between the check and the connection (DNS rebinding) cannot move it.

Refused, always: unspecified (`0.0.0.0`, `::`, `0.0.0.0/8`), multicast, link-local (the
metadata services live there), reserved and broadcast addresses. Refused unless
`fetch.allow_private_networks` is set: loopback, private (RFC 1918, unique-local
`fc00::/7`, site-local), shared (`100.64.0.0/10`) and any other non-global address.
An IPv6 address that carries an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`, 6to4, NAT64
`64:ff9b::/96`) is judged by the IPv4 address it reaches.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Awaitable, Callable, Union

from . import SourceError

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
Resolver = Callable[[str, int], Awaitable[list[str]]]

_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
PRIVATE_HINT = (
    "Private networks are refused unless allowed: set `allow_private_networks = true` in the [fetch] table "
    "of deep-research.toml (or the editor setting deepResearch.fetch.allowPrivateNetworks)."
)


class Blocked(SourceError):
    """The address is not one a fetch may connect to."""


@dataclass(frozen=True)
class AddressPolicy:
    allow_private: bool = False
    # Networks treated as public. Not a setting: the tests' seam for a loopback server that
    # stands in for the internet, so that a redirect from it to a private address is refused.
    trusted: tuple[IPNetwork, ...] = ()

    def refusal(self, ip: IPAddress) -> str | None:
        """Why a fetch must not connect to `ip`, or None if it may."""
        if any(ip.version == net.version and ip in net for net in self.trusted):
            return None
        reached = embedded_ipv4(ip)
        if reached is not None:
            return self.refusal(reached)
        if ip.is_unspecified or (ip.version == 4 and ip in _THIS_NETWORK):
            return "the unspecified address (it means this machine)"
        if ip.is_multicast:
            return "a multicast address"
        if ip.is_link_local:
            return "a link-local address (where cloud metadata services answer), always refused"
        private = None
        if ip.is_loopback:
            private = "a loopback address (this machine)"
        elif ip.is_reserved:
            return "a reserved address"
        elif ip.is_private or (ip.version == 4 and ip in _SHARED) or getattr(ip, "is_site_local", False) or not ip.is_global:
            private = "a private or non-public address"
        if private and not self.allow_private:
            return private
        return None

    def check(self, ip: IPAddress, host: str) -> None:
        reason = self.refusal(ip)
        if reason is not None:
            shown = host if host == str(ip) else f"{host} ({ip})"
            hint = f" {PRIVATE_HINT}" if "private" in reason or "loopback" in reason else ""
            raise Blocked(f"Refused to connect to {shown}: it is {reason}.{hint}")


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address leads to (mapped, 6to4, NAT64), if any."""
    if ip.version != 6:
        return None
    assert isinstance(ip, ipaddress.IPv6Address)
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address a host written as an IP literal means, in every form a URL allows:
    IPv6 (brackets already removed, zone kept out), dotted IPv4, and the number forms
    browsers and `inet_aton` accept (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`).
    None for a host name. Raises Blocked for a host that is numeric but not an address."""
    host = host.strip().rstrip(".") if host.count(".") else host.strip()
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise Blocked(f"{host!r} is not a valid IPv6 address.") from None
    parts = host.split(".")
    numbers = [_ipv4_part(p) for p in parts]
    if all(n is None for n in numbers):
        return None
    if numbers[-1] is None:
        return None  # a name with a numeric label, e.g. www.1.example: DNS decides, and its answer is checked
    if any(n is None for n in numbers) or len(parts) > 4:
        raise Blocked(f"{host!r} is neither a host name nor an IPv4 address.")
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(parts)):
        raise Blocked(f"{host!r} is out of range for an IPv4 address.")
    value = last
    for index, part in enumerate(head):
        value += part << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _ipv4_part(text: str) -> int | None:
    try:
        if text[:2].lower() == "0x":
            return int(text[2:] or "0", 16)
        if len(text) > 1 and text.startswith("0"):
            return int(text, 8)
        return int(text, 10) if text.isdigit() else None
    except ValueError:
        return None


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def resolve(host: str, port: int, policy: AddressPolicy, resolver: Resolver | None = None) -> list[IPAddress]:
    """Every address `host` stands for, each checked; Blocked if any one is refused (a name
    that resolves to one public and one private address is refused: either could be used)."""
    literal = parse_ip_literal(host)
    if literal is not None:
        policy.check(literal, host)
        return [literal]
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise SourceError(f"{host!r} is not a valid host name.") from None
    try:
        answers = await (resolver or system_resolver)(ascii_host, port)
    except (OSError, UnicodeError) as error:
        raise SourceError(f"The host {host} could not be found (DNS: {getattr(error, 'strerror', None) or error}).") from None
    addresses: list[IPAddress] = []
    for answer in answers:
        ip = ipaddress.ip_address(answer.split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise SourceError(f"The host {host} could not be found (DNS gave no address).")
    for ip in addresses:
        policy.check(ip, host)
    return addresses
