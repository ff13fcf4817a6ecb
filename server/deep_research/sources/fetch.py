"""One guarded HTTP GET for `attach_url`.

- http and https only, on every hop;
- the host is resolved and checked by `guard` and the connection goes to that checked
  address (the URL's host stays in the Host header and the TLS server name, so virtual
  hosts and certificates work as usual): no DNS rebinding between check and connection;
- redirects are followed by hand, at most `Limits.max_redirects`, each one re-checked;
  a redirect back to an address already visited is reported as a loop;
- a connect timeout and a total timeout (DNS, redirects and body included);
- the body is streamed and reading stops past `Limits.max_bytes` (a declared
  Content-Length above it is refused before reading anything);
- the content type is checked before the body is read (`accept`);
- no proxies from the environment (they would resolve names themselves), no cookies, and
  a user agent that says what is fetching.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timezone
from typing import Callable
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from .. import __version__
from ..engine.execution.evidence import size_text
from . import SourceError
from .guard import AddressPolicy, IPAddress, Resolver, parse_ip_literal, resolve

USER_AGENT = f"deep-research/{__version__} (research workbench; fetches a page a research asked for)"
ACCEPT = ("text/html,application/xhtml+xml,application/pdf;q=0.9,text/markdown;q=0.9,text/plain;q=0.8,"
          "application/json;q=0.7,text/csv;q=0.7,*/*;q=0.1")
REDIRECTS = (301, 302, 303, 307, 308)
MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 10 * MB  # of the body, after any content decoding
    connect_timeout: float = 10.0  # seconds, per connection
    total_timeout: float = 30.0  # seconds, for the whole fetch: DNS, redirects, body
    max_redirects: int = 5
    # seconds to turn the body into text: trafilatura takes 15-45 s on a hostile 10 MB page
    extract_timeout: float = 20.0


@dataclass(frozen=True)
class Fetched:
    url: str  # as asked for
    final_url: str  # after redirects
    status: int
    media_type: str  # e.g. "text/html", lower case, without parameters ("" if none was sent)
    charset: str | None
    body: bytes
    sha256: str
    fetched: str  # ISO time the answer came


def split_content_type(value: str | None) -> tuple[str, str | None]:
    """("text/html", "utf-8") from "text/html; charset=UTF-8"."""
    if not value:
        return "", None
    media, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip('"').strip("'").lower()
    return media.strip().lower(), charset


async def fetch(
    url: str,
    *,
    policy: AddressPolicy,
    limits: Limits = Limits(),
    accept: Callable[[str], str | None] = lambda media_type: None,
    resolver: Resolver | None = None,
) -> Fetched:
    """GET `url` within the limits. `accept(media_type)` returns why a type is refused, or
    None; it is asked before the body is read. Raises SourceError with a plain sentence."""
    try:
        return await asyncio.wait_for(_fetch(url, policy, limits, accept, resolver), limits.total_timeout)
    except asyncio.TimeoutError:
        raise SourceError(f"{url} did not answer completely within {limits.total_timeout:g} seconds; "
                          "nothing was attached.") from None


async def _fetch(url: str, policy: AddressPolicy, limits: Limits, accept: Callable[[str], str | None],
                 resolver: Resolver | None) -> Fetched:
    current = url
    seen = {_without_fragment(url)}
    for _hop in range(limits.max_redirects + 1):
        target = _checked_url(current, url)
        addresses = await resolve(target.host, target.port, policy, resolver)
        async with _Connection(target, addresses, limits) as response:
            if response.status_code in REDIRECTS and response.headers.get("location"):
                following = _without_fragment(urljoin(current, response.headers["location"].strip()))
                if following in seen:
                    raise SourceError(f"{url} redirects in a loop (back to {following}); nothing was attached.")
                seen.add(following)
                current = following
                continue
            if response.status_code >= 400:
                phrase = response.reason_phrase or "error"
                raise SourceError(f"The server answered {response.status_code} {phrase} for {current}; "
                                  "nothing was attached.")
            if response.status_code != 200:
                raise SourceError(f"The server answered {response.status_code} for {current}, not a page; "
                                  "nothing was attached.")
            media_type, charset = split_content_type(response.headers.get("content-type"))
            refusal = accept(media_type)
            if refusal:
                raise SourceError(refusal)
            body = await _read_capped(response, current, limits.max_bytes)
            return Fetched(url, current, response.status_code, media_type, charset, body,
                           hashlib.sha256(body).hexdigest(), datetime.now(timezone.utc).isoformat(timespec="seconds"))
    raise SourceError(f"{url} redirects more than {limits.max_redirects} times; nothing was attached.")


@dataclass(frozen=True)
class _Target:
    url: httpx.URL
    scheme: str
    host: str  # ASCII (IDNA) host name, or the address in its usual form
    port: int
    host_header: str
    shown: str  # the URL as the message or the redirect wrote it


def _checked_url(text: str, asked: str) -> _Target:
    shown = text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as error:
        raise SourceError(f"{text} is not a valid address ({error}).") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        via = "" if text == asked else f" ({asked} redirected there)"
        raise SourceError(f"Only http and https addresses are fetched, not {text}{via}.")
    if not parts.hostname:
        raise SourceError(f"{text} has no host name.")
    if parts.username is not None or parts.password is not None:
        raise SourceError(f"{text} holds credentials; they are never sent.")
    literal = parse_ip_literal(parts.hostname)  # 2130706433, 0x7f.1 …: httpx does not read these forms
    if literal is not None:
        netloc = f"[{literal}]" if literal.version == 6 else str(literal)
        text = urlunsplit(parts._replace(netloc=netloc + (f":{port}" if port else "")))
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as error:
        raise SourceError(f"{text} is not a valid address ({error}).") from None
    host = str(literal) if literal is not None else url.raw_host.decode("ascii")
    port = port or (443 if scheme == "https" else 80)
    return _Target(url, scheme, host, port, url.netloc.decode("ascii"), shown)


def _without_fragment(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(fragment=""))


class _Connection:
    """A response from the first of the checked addresses that accepts a connection. The
    transport is used directly (httpx's client would parse a redirect's Location itself)
    and is new for each hop: a pooled connection must never serve another host name."""

    def __init__(self, target: _Target, addresses: list[IPAddress], limits: Limits) -> None:
        self.target, self.addresses, self.limits = target, addresses, limits
        self.transport: httpx.AsyncHTTPTransport | None = None
        self.response: httpx.Response | None = None

    async def __aenter__(self) -> httpx.Response:
        timeout = httpx.Timeout(self.limits.total_timeout, connect=self.limits.connect_timeout).as_dict()
        last_error: Exception | None = None
        for ip in self.addresses:
            self.transport = httpx.AsyncHTTPTransport(retries=0, verify=_tls())
            request = httpx.Request("GET", pinned_url(self.target, ip), headers=headers_for(self.target),
                                    extensions={"timeout": timeout, **extensions_for(self.target)})
            try:
                self.response = await self.transport.handle_async_request(request)
                self.response.request = request
                return self.response
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                last_error = error
                await self.transport.aclose()
            except httpx.HTTPError as error:
                await self.transport.aclose()
                raise SourceError(f"Fetching {self.target.shown} failed: {_describe(error)}.") from None
        what = "timed out" if isinstance(last_error, httpx.ConnectTimeout) else _describe(last_error)
        raise SourceError(f"Could not connect to {self.target.host} ({what}); nothing was attached.")

    async def __aexit__(self, *exc: object) -> None:
        if self.response is not None:
            await self.response.aclose()
        if self.transport is not None:
            await self.transport.aclose()


@lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    """One verifying TLS context for every fetch: making one loads the CA bundle (~40 ms)."""
    return httpx.create_ssl_context()


def pinned_url(target: _Target, ip: IPAddress) -> httpx.URL:
    """The request goes to the checked address; Host and the TLS name keep the host name."""
    return target.url.copy_with(host=str(ip), fragment=None)


def headers_for(target: _Target) -> dict[str, str]:
    return {"Host": target.host_header, "User-Agent": USER_AGENT, "Accept": ACCEPT,
            "Accept-Encoding": "identity"}  # no compression: the size cap counts what arrives


def extensions_for(target: _Target) -> dict[str, object]:
    return {"sni_hostname": target.host} if target.scheme == "https" else {}


async def _read_capped(response: httpx.Response, url: str, cap: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise SourceError(f"{url} is {size_text(int(declared))}; pages larger than {size_text(cap)} are not "
                          "attached (nothing was read).")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > cap:
                raise SourceError(f"{url} is larger than {size_text(cap)}; reading stopped there and nothing "
                                  "was attached.")
            chunks.append(chunk)
    except httpx.HTTPError as error:
        raise SourceError(f"Reading {url} failed: {_describe(error)}; nothing was attached.") from None
    return b"".join(chunks)


def _describe(error: Exception | None) -> str:
    if error is None:
        return "no address to connect to"
    if isinstance(error, httpx.TimeoutException):
        return "it timed out"
    text = str(error) or type(error).__name__
    return text.split("\n")[0][:200]
