"""Web search for `///search`: providers behind one small interface.

    provider = provider_for(config.search, os.environ)   # SearchNotConfigured if none may be asked
    hits = await provider.search(query, limit=10)

Without a key (the first is the default when `[search] provider` is not set):
- `duckduckgo`: DuckDuckGo's HTML results page, asked and read by the `ddgs` package (its
  browser-like HTTP client and its parser; only the address is ours, so a setting can move it).
- `wikipedia`: the MediaWiki search API (`action=query&list=search`) of one language edition.
- `arxiv`: the arXiv API (an Atom feed): each hit with its authors, date, abstract and PDF.
- `searxng`: a SearXNG instance's JSON API (self-hosted). `url` is the instance's base URL;
  its settings must allow the json format (`search: formats: [html, json]`).
With a key from the environment (never written anywhere): `tavily` (`TAVILY_API_KEY`),
`brave` (`BRAVE_API_KEY`).

Every provider's address is a setting: `[search] url`, else the environment variable
`DEEP_RESEARCH_<PROVIDER>_URL` (a mirror; the test suite points them all at loopback), else the
provider's own. That address is the user's choice, not the assistant's, so it is not behind the
address guard (a SearXNG on the same machine is the usual case).

User text never becomes query syntax: a query is sent as its words (`words`), so quotes,
operators, `site:`, `!bang`, field prefixes and wildcards are plain words or dropped. A provider
that is down, slow, rate-limited or answers something that is not its answer fails this one
search with a sentence; a rate limit (429, or DuckDuckGo's 202) is waited out (`Retry-After`,
else a short backoff) a few times first, within `MAX_WAIT`.

What cannot be tested on a machine without the internet is kept to the few lines that name
the real addresses (`DEFAULT_URLS`) and ddgs's request; everything that reads an answer is
tested on recorded answers served on loopback.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Mapping, Protocol
from urllib.parse import parse_qs, quote, urljoin, urlsplit

import httpx

from ..engine.settings.table import DEFAULT_SEARCH_PROVIDER, SEARCH_PROVIDERS, SearchConfig
from . import SourceError
from .extract import html_to_text
from .fetch import USER_AGENT

MAX_RESULTS = 10
TIMEOUT = 20.0  # seconds for one request
CONNECT_TIMEOUT = 5.0  # an address that does not answer fails fast
MAX_BYTES = 2 * 1024 * 1024
MAX_ATTEMPTS = 3  # a rate-limited request is asked again at most twice …
MAX_WAIT = 10.0  # … waiting at most this long in all (a longer Retry-After is said, not waited)
BACKOFF = (1.0, 3.0)  # seconds before the 2nd and 3rd attempt when no Retry-After is given
KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "brave": "BRAVE_API_KEY"}
ADDRESS_VARIABLE = "DEEP_RESEARCH_{}_URL"  # e.g. DEEP_RESEARCH_DUCKDUCKGO_URL
DEFAULT_URLS = {  # the real services: out of reach of the test suite, by construction
    "duckduckgo": "https://html.duckduckgo.com/html/",
    "wikipedia": "https://{language}.wikipedia.org/w/api.php",
    "arxiv": "https://export.arxiv.org/api/query",  # arXiv asks API clients to use export.
    "tavily": "https://api.tavily.com/search",
    "brave": "https://api.search.brave.com/res/v1/web/search",
}
LABELS = {"duckduckgo": "DuckDuckGo", "wikipedia": "Wikipedia", "arxiv": "arXiv", "searxng": "SearXNG",
          "tavily": "Tavily", "brave": "Brave"}
DEFAULT_LANGUAGE = "en"
_LANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]{2,8})*$|^simple$")
_WORD = re.compile(r"\w+(?:[-'’.]\w+)*")
_OPERATORS = {"AND", "OR", "NOT", "ANDNOT", "NEAR"}  # uppercase operator words: sent in lower case
OTHERS = ", ".join(f'"{name}"' for name in SEARCH_PROVIDERS)


class SearchNotConfigured(SourceError):
    pass


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str
    authors: tuple[str, ...] = ()  # arXiv
    date: str = ""  # arXiv: first published (YYYY-MM-DD)
    pdf: str = ""  # arXiv: the paper itself


class Provider(Protocol):
    name: str

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]: ...


def words(query: str) -> str:
    """The query as plain words for a search engine: no quotes, operators, prefixes or bangs."""
    found = _WORD.findall(query)
    return " ".join(word.lower() if word in _OPERATORS else word for word in found)


def address(name: str, config: SearchConfig, environ: Mapping[str, str]) -> str:
    """Where provider `name` is asked: the setting, else the environment, else its own."""
    given = (config.url or "").strip() or environ.get(ADDRESS_VARIABLE.format(name.upper()), "").strip()
    if given:
        return given
    if name == "wikipedia":
        language = (config.wikipedia_language or DEFAULT_LANGUAGE).strip().lower()
        if not _LANGUAGE.match(language):
            raise SearchNotConfigured(
                f"`wikipedia_language` is {config.wikipedia_language!r}, not a Wikipedia edition: write a language "
                "code such as en, de, fr or simple under [search] in deep-research.toml.")
        return DEFAULT_URLS[name].replace("{language}", language)
    if name not in DEFAULT_URLS:  # searxng: the user's own instance
        raise SearchNotConfigured(
            "The search provider is searxng, but no url is set: add `url = \"http://…\"` (your SearXNG "
            "instance) to the [search] table of deep-research.toml, or set deepResearch.search.url.")
    return DEFAULT_URLS[name]


def provider_for(config: SearchConfig, environ: Mapping[str, str]) -> Provider:
    """The provider a search goes to (DuckDuckGo when none is set). The caller has already
    refused an offline research."""
    name = (config.provider or DEFAULT_SEARCH_PROVIDER).strip().lower()
    if name == "none":
        raise SearchNotConfigured(
            "Web search is off for this research ([search] provider = \"none\" in deep-research.toml, or the "
            f"setting deepResearch.search.provider): no query is sent. Choose a provider ({OTHERS}) to search.")
    if name not in SEARCH_PROVIDERS:
        raise SearchNotConfigured(
            f"Unknown search provider {name!r}: the providers are {OTHERS} (or \"none\" for no search). "
            "Correct [search] provider in deep-research.toml, or the setting deepResearch.search.provider.")
    url = address(name, config, environ)
    if name in KEY_VARIABLES:
        variable = KEY_VARIABLES[name]
        key = environ.get(variable, "").strip()
        if not key:
            raise SearchNotConfigured(
                f"The search provider is {name}, but its key is missing: set the environment variable {variable} "
                "for the process that runs deep-research (keys are never read from files), or choose a provider "
                "that needs none (duckduckgo, wikipedia, arxiv).")
        return (Tavily if name == "tavily" else Brave)(url, key)
    return {"duckduckgo": DuckDuckGo, "wikipedia": Wikipedia, "arxiv": ArXiv, "searxng": SearXNG}[name](url)


# -- asking a provider: one request, rate limits waited out, every failure a sentence --------------


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    reason: str = ""


async def ask(label: str, send: Callable[[], Awaitable[Answer]], rate_limited: tuple[int, ...] = (429,),
              sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> Answer:
    """`send()` until it is not rate-limited (at most MAX_ATTEMPTS times, waiting what the provider
    asks within MAX_WAIT), then the answer checked: an error status is a SourceError."""
    waited = 0.0
    for attempt in range(MAX_ATTEMPTS):
        answer = await send()
        if answer.status not in rate_limited:
            break
        asked = retry_after(answer.headers.get("retry-after"))
        wait = asked if asked is not None else BACKOFF[min(attempt, len(BACKOFF) - 1)]
        if attempt + 1 == MAX_ATTEMPTS or waited + wait > MAX_WAIT:
            later = f" (it asks to wait {asked:g} seconds)" if asked is not None else ""
            raise SourceError(
                f"{label} is limiting how often it may be asked{later}: this search was not made"
                f"{f' after {attempt + 1} tries' if attempt else ''}. Search again in a minute, or choose another "
                f"provider ([search] provider in deep-research.toml: {OTHERS}).")
        await sleep(wait)
        waited += wait
    if answer.status in (401, 403):
        raise SourceError(f"{label} refused the request ({answer.status}): check its key, or for SearXNG that its "
                          "settings allow the json format.")
    if answer.status >= 400:
        raise SourceError(f"{label} answered {answer.status} {answer.reason}".rstrip() + "; this search was not made.")
    return answer


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (a number of seconds, or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        from email.utils import parsedate_to_datetime

        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


async def _http(label: str, method: str, url: str, **kwargs: Any) -> Answer:
    """One request with httpx: no proxy from the environment, a timeout, the size cap."""
    headers = {"User-Agent": USER_AGENT, **kwargs.pop("headers", {})}
    timeout = httpx.Timeout(TIMEOUT, connect=CONNECT_TIMEOUT)
    async with httpx.AsyncClient(trust_env=False, timeout=timeout, follow_redirects=True, max_redirects=5) as client:
        try:
            async with client.stream(method, url, headers=headers, **kwargs) as response:
                body, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_BYTES:
                        raise SourceError(f"{label}'s answer is too large; nothing was attached.")
                    body.append(chunk)
                return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()},
                              b"".join(body), response.reason_phrase or "")
        except httpx.TimeoutException:
            raise SourceError(f"{label} did not answer within {TIMEOUT:g} seconds; this search was not made.") from None
        except httpx.HTTPError as error:
            raise SourceError(f"{label} cannot be reached at {url} ({str(error)[:160] or type(error).__name__}).") from None


async def _get(name: str, url: str, params: Mapping[str, Any], accept: str = "application/json",
               headers: Mapping[str, str] | None = None) -> Answer:
    """A GET to provider `name`, rate limits waited out (`ask`)."""
    label = LABELS[name]
    return await ask(label, lambda: _http(label, "GET", url, params=params, headers={"Accept": accept, **(headers or {})}))


def _looks_like_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<body" in head or b"<head" in head


def _json(label: str, answer: Answer) -> Any:
    try:
        return json.loads(answer.body)
    except ValueError:
        what = "an HTML page (an error page?)" if _looks_like_html(answer.body) else "not JSON"
        raise SourceError(f"{label}'s answer is not JSON but {what}; this search was not made.") from None


def _hits(items: Any, title: str, url: str, snippet: str, limit: int) -> list[Hit]:
    hits = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get(url), str) and item[url].strip():
            hits.append(Hit(_clean(item.get(title)) or item[url], item[url].strip(), _clean(item.get(snippet))))
        if len(hits) >= limit:
            break
    return hits


def _clean(value: Any) -> str:
    """Snippets may carry HTML (<strong>, entities): plain text on one line."""
    if not isinstance(value, str):
        return ""
    return " ".join(html_to_text(value).split())


def _plain(label: str, query: str) -> str:
    text = words(query)
    if not text:
        raise SourceError(f"The query {query!r} has no words to search for; nothing was sent to {label}.")
    return text


# -- the providers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DuckDuckGo:
    """DuckDuckGo's HTML results, through ddgs: its HTTP client looks like a browser (DuckDuckGo
    turns other clients away) and its parser knows the page. We give the address and read the
    status ourselves (ddgs's `search()` hides a rate limit as "no results")."""

    url: str
    name: str = "duckduckgo"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        label = LABELS[self.name]
        text = _plain(label, query)
        try:
            from ddgs.engines.duckduckgo import Duckduckgo
        except ImportError:
            raise SourceError(
                "DuckDuckGo search needs the ddgs package, which is not installed in the Python that runs "
                "deep-research: `python -m pip install ddgs` (in VS Code: Deep Research: Install Python Packages), "
                "or choose the provider wikipedia or arxiv, which need nothing more.") from None
        engine = Duckduckgo(timeout=int(TIMEOUT))
        payload = engine.build_payload(query=text, region="wt-wt", safesearch="moderate", timelimit=None)

        def request() -> Answer:
            try:
                response = engine.http_client.client.request(engine.search_method, self.url, data=payload)
            except Exception as error:  # primp's errors: connection, timeout, TLS
                kind = "did not answer in time" if "timed out" in str(error).lower() else "cannot be reached"
                raise SourceError(f"{label} {kind} at {self.url} ({str(error)[:160] or type(error).__name__}).") from None
            if len(response.content) > MAX_BYTES:
                raise SourceError(f"{label}'s answer is too large; nothing was attached.")
            return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()},
                          response.content)

        # 202 is how DuckDuckGo's HTML endpoint says "too many requests"
        answer = await ask(label, lambda: asyncio.to_thread(request), rate_limited=(429, 202))
        page = answer.body.decode("utf-8", errors="replace")
        found = await asyncio.to_thread(lambda: engine.post_extract_results(engine.extract_results(page)))
        hits = []
        for result in found:
            url = _unwrap_redirect(result.href)
            if url.startswith(("http://", "https://")) and len(hits) < limit:
                hits.append(Hit(result.title or url, url, result.body))
        if not hits and "no-results" not in page and "No results" not in page:
            raise SourceError(f"{label} answered with a page that holds no results and does not say there are none "
                              "(a check that this is not a robot, or a changed page: updating the ddgs package may "
                              "help); this search was not made.")
        return hits


def _unwrap_redirect(href: str) -> str:
    """DuckDuckGo may link a result through `//duckduckgo.com/l/?uddg=<the address>`."""
    parts = urlsplit(href if "://" in href else "https:" + href if href.startswith("//") else href)
    if parts.hostname and parts.hostname.endswith("duckduckgo.com") and parts.path == "/l/":
        target = parse_qs(parts.query).get("uddg", [""])[0]
        return target
    return href


@dataclass(frozen=True)
class Wikipedia:
    """The MediaWiki search API; each hit's address is the article on the same wiki."""

    url: str
    name: str = "wikipedia"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        label = LABELS[self.name]
        params = {"action": "query", "list": "search", "srsearch": _plain(label, query), "srlimit": str(limit),
                  "srprop": "snippet", "format": "json", "formatversion": "2", "utf8": "1"}
        data = _json(label, await _get(self.name, self.url, params))
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            info = _clean(data["error"].get("info")) or "no reason given"
            raise SourceError(f"{label} refused the search: {info[:300]}")
        found = data.get("query", {}).get("search") if isinstance(data, dict) and isinstance(data.get("query"), dict) \
            else None
        if not isinstance(found, list):
            raise SourceError(f"{label}'s answer holds no search results (is {self.url} a MediaWiki API?); this "
                              "search was not made.")
        hits = []
        for item in found[:limit]:
            if isinstance(item, dict) and isinstance(item.get("title"), str) and item["title"].strip():
                title = " ".join(item["title"].split())
                hits.append(Hit(title, self.article(title), _clean(item.get("snippet"))))
        return hits

    def article(self, title: str) -> str:
        """The article's address: /wiki/Title beside the API's /w/api.php (Wikipedia's layout)."""
        base = self.url.split("?")[0]
        path = quote(title.replace(" ", "_"), safe="_()-.,:'!*")
        if base.endswith("/w/api.php"):
            return base[: -len("/w/api.php")] + "/wiki/" + path
        return urljoin(base, "index.php?title=" + path)


ATOM = "{http://www.w3.org/2005/Atom}"


@dataclass(frozen=True)
class ArXiv:
    """The arXiv API: an Atom feed of papers, best match first."""

    url: str
    name: str = "arxiv"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        label = LABELS[self.name]
        # Every word a quoted term of `all:` (title, abstract, authors …): the API's own syntax
        # (field prefixes, AND/OR/ANDNOT, parentheses) cannot come from the query.
        terms = " AND ".join(f'all:"{word}"' for word in _plain(label, query).split())
        params = {"search_query": terms, "start": "0", "max_results": str(limit), "sortBy": "relevance",
                  "sortOrder": "descending"}
        return parse_arxiv((await _get(self.name, self.url, params, "application/atom+xml")).body, limit)


def parse_arxiv(body: bytes, limit: int = MAX_RESULTS) -> list[Hit]:
    """The hits of an arXiv Atom feed; SourceError for anything else (an HTML page, an error entry)."""
    import xml.etree.ElementTree as ET

    label = LABELS["arxiv"]
    if b"<!DOCTYPE" in body[:4096].upper() or b"<!ENTITY" in body.upper():  # no entity games in a feed
        what = "an HTML page (an error page?)" if _looks_like_html(body) else "a document with a DOCTYPE"
        raise SourceError(f"{label}'s answer is not an Atom feed but {what}; this search was not made.")
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        what = "an HTML page (an error page?)" if _looks_like_html(body) else "not XML"
        raise SourceError(f"{label}'s answer is not an Atom feed but {what}; this search was not made.") from None
    if root.tag != ATOM + "feed":
        raise SourceError(f"{label}'s answer is not an Atom feed; this search was not made.")
    hits = []
    for entry in root.findall(ATOM + "entry"):
        text = {tag: " ".join((entry.findtext(ATOM + tag) or "").split()) for tag in ("id", "title", "summary", "published")}
        if "/api/errors" in text["id"]:
            raise SourceError(f"{label} refused the query: {text['summary'][:300] or text['title']}")
        links = entry.findall(ATOM + "link")
        page = next((l.get("href", "") for l in links if l.get("rel") == "alternate"), "") or text["id"]
        pdf = next((l.get("href", "") for l in links if l.get("title") == "pdf" or l.get("type") == "application/pdf"),
                   "")
        if not pdf and "/abs/" in page:
            pdf = page.replace("/abs/", "/pdf/", 1)
        if not page.startswith(("http://", "https://")):
            continue
        authors = tuple(" ".join((a.findtext(ATOM + "name") or "").split()) for a in entry.findall(ATOM + "author"))
        hits.append(Hit(text["title"] or page, page, text["summary"], tuple(a for a in authors if a),
                        text["published"][:10], pdf))
        if len(hits) >= limit:
            break
    return hits


@dataclass(frozen=True)
class Paper:
    pdf: str  # the PDF's address
    name: str  # "arXiv 2401.01234v2": the attachment's name when the PDF has no title


_ARXIV_HOSTS = ("arxiv.org", "www.arxiv.org", "export.arxiv.org")
_ARXIV_ABS = re.compile(r"^/abs/((?:[a-z-]+(?:\.[A-Za-z]{2})?/)?\d{7}|\d{4}\.\d{4,5})(v\d+)?/?$")


def arxiv_paper(url: str) -> Paper | None:
    """The paper behind an arXiv abstract page's address (`/abs/ID` → `/pdf/ID`, scheme, host and
    port kept), or None for any other address."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    match = _ARXIV_ABS.match(parts.path)
    if (parts.hostname or "").lower() not in _ARXIV_HOSTS or not match:
        return None
    identifier = match.group(1) + (match.group(2) or "")
    return Paper(parts._replace(path=f"/pdf/{identifier}", query="", fragment="").geturl(), f"arXiv {identifier}")


@dataclass(frozen=True)
class SearXNG:
    url: str
    name: str = "searxng"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        label = LABELS[self.name]
        params = {"q": _plain(label, query), "format": "json"}
        data = _json(label, await _get(self.name, self.url.rstrip("/") + "/search", params))
        return _hits(data.get("results") if isinstance(data, dict) else None, "title", "url", "content", limit)


@dataclass(frozen=True)
class Tavily:
    url: str
    key: str = field(repr=False)
    name: str = "tavily"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        label = LABELS[self.name]
        body = {"query": _plain(label, query), "max_results": limit}
        answer = await ask(label, lambda: _http(label, "POST", self.url, json=body, headers={
            "Accept": "application/json", "Authorization": f"Bearer {self.key}"}))
        data = _json(label, answer)
        return _hits(data.get("results") if isinstance(data, dict) else None, "title", "url", "content", limit)


@dataclass(frozen=True)
class Brave:
    url: str
    key: str = field(repr=False)
    name: str = "brave"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        label = LABELS[self.name]
        params = {"q": _plain(label, query), "count": limit}
        data = _json(label, await _get(self.name, self.url, params, headers={"X-Subscription-Token": self.key}))
        web = data.get("web") if isinstance(data, dict) else None
        return _hits(web.get("results") if isinstance(web, dict) else None, "title", "url", "description", limit)


def render(query: str, hits: list[Hit], provider: str) -> str:
    """The attachment's text: numbered results, then how to read one."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    label = LABELS.get(provider, provider)
    if not hits:
        return f"A web search for \"{query}\" ({label}, {when}) found nothing."
    lines = [f"Results of a web search for \"{query}\" ({label}, {when}):", ""]
    for number, hit in enumerate(hits, 1):
        lines.append(f"{number}. {hit.title}")
        lines.append(f"   {hit.url}")
        if hit.authors or hit.date:
            lines.append("   " + " · ".join(part for part in (", ".join(hit.authors), hit.date) if part))
        if hit.pdf:
            lines.append(f"   PDF: {hit.pdf}")
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
        lines.append("")
    if any(hit.pdf for hit in hits):
        lines.append("To read a paper whole, attach its PDF: `///attach_url <its PDF address>` (its abstract "
                     "page's address attaches the PDF too).")
    else:
        lines.append("To read a result, attach it: `///attach_url <its address>`.")
    return "\n".join(lines)
