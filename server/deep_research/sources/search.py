"""Web search for `///search`: providers behind one small interface.

    provider = provider_for(config.search, os.environ)   # SearchNotConfigured if none
    hits = await provider.search(query, limit=10)

- `searxng`: a SearXNG instance's JSON API (self-hosted, no key). `url` is the instance's
  base URL; its settings must allow the json format (`search: formats: [html, json]`).
- `tavily`: Tavily's search API; the key comes from `TAVILY_API_KEY`.
- `brave`: Brave's web search API; the key comes from `BRAVE_API_KEY`.

Keys come from the environment only and are never written anywhere. The provider's
endpoint is the user's own setting (not the assistant's), so it is not behind the address
guard: a SearXNG on the same machine is the common case. Requests have a timeout and a
size cap like any fetch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Protocol

import httpx

from ..engine.settings import SearchConfig
from . import SourceError
from .extract import html_to_text
from .fetch import USER_AGENT

MAX_RESULTS = 10
TIMEOUT = 20.0  # seconds
MAX_BYTES = 2 * 1024 * 1024
KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "brave": "BRAVE_API_KEY"}
DEFAULT_URLS = {
    "tavily": "https://api.tavily.com/search",
    "brave": "https://api.search.brave.com/res/v1/web/search",
}
HOW_TO_CONFIGURE = (
    "No web search provider is configured. Add to the research's deep-research.toml either\n"
    "  [search]\n  provider = \"searxng\"\n  url = \"http://127.0.0.1:8888\"   # your SearXNG instance (no key)\n"
    "or provider = \"tavily\" with the key in the environment variable TAVILY_API_KEY, or provider = \"brave\" "
    "with BRAVE_API_KEY. In an editor, the settings deepResearch.search.provider and deepResearch.search.url do the same."
)


class SearchNotConfigured(SourceError):
    pass


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str


class Provider(Protocol):
    name: str

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]: ...


def provider_for(config: SearchConfig, environ: Mapping[str, str]) -> Provider:
    name = (config.provider or "").strip().lower()
    if not name:
        raise SearchNotConfigured(HOW_TO_CONFIGURE)
    if name == "searxng":
        if not config.url:
            raise SearchNotConfigured(
                "The search provider is searxng, but no url is set: add `url = \"http://…\"` (your SearXNG "
                "instance) to the [search] table of deep-research.toml, or set deepResearch.search.url.")
        return SearXNG(config.url)
    if name in KEY_VARIABLES:
        variable = KEY_VARIABLES[name]
        key = environ.get(variable, "").strip()
        if not key:
            raise SearchNotConfigured(
                f"The search provider is {name}, but its key is missing: set the environment variable {variable} "
                "for the process that runs deep-research (keys are never read from files).")
        return (Tavily if name == "tavily" else Brave)(config.url or DEFAULT_URLS[name], key)
    raise SearchNotConfigured(f"Unknown search provider {name!r}: use searxng, tavily or brave.")


async def _get_json(method: str, url: str, **kwargs: Any) -> Any:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **kwargs.pop("headers", {})}
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT, follow_redirects=True,
                                 max_redirects=5) as client:
        try:
            async with client.stream(method, url, headers=headers, **kwargs) as response:
                if response.status_code in (401, 403):
                    raise SourceError(f"The search provider refused the request ({response.status_code}): check its "
                                      "key, or for SearXNG that its settings allow the json format.")
                if response.status_code >= 400:
                    raise SourceError(f"The search provider answered {response.status_code} "
                                      f"{response.reason_phrase or ''}".rstrip() + ".")
                body, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_BYTES:
                        raise SourceError("The search provider's answer is too large; nothing was attached.")
                    body.append(chunk)
        except httpx.TimeoutException:
            raise SourceError(f"The search provider did not answer within {TIMEOUT:g} seconds.") from None
        except httpx.HTTPError as error:
            raise SourceError(f"The search provider cannot be reached ({str(error)[:160] or type(error).__name__}).") from None
    try:
        return json.loads(b"".join(body))
    except ValueError:
        raise SourceError("The search provider's answer is not JSON.") from None


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


@dataclass(frozen=True)
class SearXNG:
    url: str
    name: str = "searxng"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        data = await _get_json("GET", self.url.rstrip("/") + "/search", params={"q": query, "format": "json"})
        return _hits(data.get("results") if isinstance(data, dict) else None, "title", "url", "content", limit)


@dataclass(frozen=True)
class Tavily:
    url: str
    key: str
    name: str = "tavily"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        data = await _get_json("POST", self.url, json={"query": query, "max_results": limit},
                               headers={"Authorization": f"Bearer {self.key}"})
        return _hits(data.get("results") if isinstance(data, dict) else None, "title", "url", "content", limit)


@dataclass(frozen=True)
class Brave:
    url: str
    key: str
    name: str = "brave"

    async def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        data = await _get_json("GET", self.url, params={"q": query, "count": limit},
                               headers={"X-Subscription-Token": self.key})
        web = data.get("web") if isinstance(data, dict) else None
        return _hits(web.get("results") if isinstance(web, dict) else None, "title", "url", "description", limit)


def render(query: str, hits: list[Hit], provider: str) -> str:
    """The attachment's text: numbered results, then how to read one."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if not hits:
        return f"A web search for \"{query}\" ({provider}, {when}) found nothing."
    lines = [f"Results of a web search for \"{query}\" ({provider}, {when}):", ""]
    for number, hit in enumerate(hits, 1):
        lines.append(f"{number}. {hit.title}")
        lines.append(f"   {hit.url}")
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
        lines.append("")
    lines.append("To read a result, attach it: `///attach_url <its address>`.")
    return "\n".join(lines)
