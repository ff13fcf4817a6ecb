"""The address guard: every host form a URL allows, IPv4 and IPv6, and what the
private-networks setting changes. Pure unit tests: nothing connects anywhere."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from deep_research.sources import SourceError
from deep_research.sources.guard import AddressPolicy, Blocked, parse_ip_literal, resolve

STRICT = AddressPolicy()
PRIVATE_OK = AddressPolicy(allow_private=True)


@pytest.mark.parametrize("host, address", [
    ("127.0.0.1", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),  # decimal
    ("0x7f000001", "127.0.0.1"),  # hex
    ("017700000001", "127.0.0.1"),  # octal
    ("0177.0.0.1", "127.0.0.1"),  # octal part
    ("0x7f.0.0.1", "127.0.0.1"),  # hex part
    ("0x7F.1", "127.0.0.1"),  # short form, hex
    ("127.1", "127.0.0.1"),  # short form
    ("127.0.1", "127.0.0.1"),
    ("10.0.0.1.", "10.0.0.1"),  # trailing dot
    ("0", "0.0.0.0"),
    ("::1", "::1"),
    ("::ffff:127.0.0.1", "::ffff:7f00:1"),
    ("fe80::1%eth0", "fe80::1"),  # a zone is not part of the address
])
def test_every_numeric_host_form_is_read_as_an_address(host: str, address: str) -> None:
    assert parse_ip_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.org", "localhost", "www.1.example", "xn--bcher-kva.de", "a-b.c"])
def test_host_names_are_left_to_dns(host: str) -> None:
    assert parse_ip_literal(host) is None


@pytest.mark.parametrize("host", ["1.2.3.4.5", "256.1.1.1", "1.2.3.256", "1.16777216", "example.123", "08.1.1.1",
                                  "::zz", "1:2:3:4:5:6:7:8:9"])
def test_numeric_hosts_that_are_no_address_are_refused(host: str) -> None:
    with pytest.raises(Blocked):
        parse_ip_literal(host)


REFUSED_ALWAYS = {
    "0.0.0.0": "unspecified", "0.1.2.3": "unspecified", "::": "unspecified",
    "224.0.0.1": "multicast", "239.255.255.250": "multicast", "ff02::1": "multicast",
    "169.254.169.254": "link-local", "fe80::1": "link-local",
    "240.0.0.1": "reserved", "255.255.255.255": "reserved",
    "::ffff:169.254.169.254": "link-local",  # IPv4-mapped
    "::ffff:0.0.0.0": "unspecified",
}
REFUSED_UNLESS_PRIVATE = {
    "127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback",
    "10.1.2.3": "private", "172.16.0.1": "private", "192.168.1.1": "private", "100.64.0.1": "private",
    "fd00::1": "private", "fec0::1": "private", "192.0.2.10": "private", "198.18.0.1": "private",
    "::ffff:127.0.0.1": "loopback", "::ffff:10.0.0.1": "private",  # IPv4-mapped IPv6
    "2002:7f00:1::": "loopback",  # 6to4 around 127.0.0.1
    "64:ff9b::a00:1": "private",  # NAT64 around 10.0.0.1
}
PUBLIC = ["8.8.8.8", "93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("address, why", sorted(REFUSED_ALWAYS.items()))
def test_some_addresses_are_refused_even_with_private_networks_allowed(address: str, why: str) -> None:
    ip = ipaddress.ip_address(address)
    assert why in (STRICT.refusal(ip) or "")
    assert why in (PRIVATE_OK.refusal(ip) or "")


@pytest.mark.parametrize("address, why", sorted(REFUSED_UNLESS_PRIVATE.items()))
def test_private_addresses_need_the_setting(address: str, why: str) -> None:
    ip = ipaddress.ip_address(address)
    assert why in (STRICT.refusal(ip) or "")
    assert PRIVATE_OK.refusal(ip) is None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert STRICT.refusal(ipaddress.ip_address(address)) is None


def test_the_refusal_says_how_to_allow_private_networks() -> None:
    with pytest.raises(Blocked) as caught:
        STRICT.check(ipaddress.ip_address("127.0.0.1"), "2130706433")
    assert "2130706433 (127.0.0.1)" in caught.value.message
    assert "allow_private_networks = true" in caught.value.message
    assert "deepResearch.fetch.allowPrivateNetworks" in caught.value.message


def run(coro):
    return asyncio.run(coro)


def test_names_are_resolved_and_every_answer_is_checked() -> None:
    calls = []

    async def dns(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return {"public.test": ["93.184.215.14"], "mixed.test": ["93.184.215.14", "10.0.0.7"],
                "xn--bcher-kva.test": ["2606:4700::1"]}[host]

    assert run(resolve("public.test", 443, STRICT, dns)) == [ipaddress.ip_address("93.184.215.14")]
    with pytest.raises(Blocked, match=r"mixed\.test \(10\.0\.0\.7\)"):
        run(resolve("mixed.test", 80, STRICT, dns))  # one private answer is enough to refuse
    assert run(resolve("bücher.test", 80, STRICT, dns)) == [ipaddress.ip_address("2606:4700::1")]
    assert calls[-1] == ("xn--bcher-kva.test", 80)  # IDNA before DNS
    literal_calls = len(calls)
    with pytest.raises(Blocked):
        run(resolve("0x7f.1", 80, STRICT, dns))
    assert len(calls) == literal_calls  # a literal address never asks DNS


def test_unknown_names_are_a_plain_error() -> None:
    async def dns(host: str, port: int) -> list[str]:
        raise OSError(-2, "Name or service not known")

    with pytest.raises(SourceError, match="could not be found"):
        run(resolve("nowhere.invalid", 80, STRICT, dns))


def test_trusted_networks_are_the_tests_seam_only() -> None:
    seam = AddressPolicy(trusted=(ipaddress.ip_network("127.0.0.1/32"),))
    assert seam.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert seam.refusal(ipaddress.ip_address("127.0.0.2")) is not None
