"""`///read` and `///find`: whole sources within reach (SPEC §13).

Both answer in the reply, in its `## Sources` section (engine/views/reply.py), and write nothing:
what they show stays in the session's log until the focus changes, and the prompt shows it whole
while it is in the newest reply, by name after (engine/views/session.py).

- `///read NAME#N` (`NAME`: part 1; `NAME#N-M`: at most `READ_PARTS` parts) shows parts of an
  attachment visible here (the current problem's, then its parents', nearest first: a nearer one
  hides a farther one of the same name) or of a context item, as `<part name="NAME#N" of="TOTAL">`.
- `///find WORDS` ranks the parts of every source visible here (engine/retrieval/ranking.py) and shows the
  best `find_results` passages as `<passage part="NAME#N" rank="R">`. It searches only when the
  message is executed: the dry run behind diagnostics checks the query's form and searches
  nothing (a draft has no index then).

A message's reply holds at most `sources_limit` characters of them (a read or find past it
fails, saying what to do), so one message cannot blow the prompt's budget: the session keeps
the reply, and the prompt keeps the newest turn whole.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..core.names import one_line
from ..core.text import Edit, Fix, attribute
from ..retrieval import ranking
from ..retrieval.index import Source, source_key
from ..retrieval.parts import Layout, part_name, split_reference
from ..retrieval.vectors import VectorStore
from ..settings.rules import Rules
from ..store import BOOKKEEPING, CONTEXT
from ..tree import citations, formats
from ..tree.model import Attachment
from ..tree.reader import attachment_files
from .evidence import Failed, Need, NeedKind, QueryVector
from .protocol import Arg, Args, CommandError, Result, Warning_, quote

if TYPE_CHECKING:  # pragma: no cover
    from ..core.state import ProblemPath
    from .draft import Draft

READ_PARTS = 5  # parts one `read` shows at most
MAX_QUERY_CHARS = 1_000
SOURCES_CHARS = 24_000  # characters of parts and passages one reply holds (at least one whole part)
_TAG_CHARS = 60  # a part's or passage's tags, counted with it
WHERE_LOOKED = 500  # problems looked through to say where an attachment not visible here is


@dataclass(frozen=True)
class Readable:
    """An attachment or context item `read` and `find` may use from the current problem."""

    attachment: Attachment
    file: Path  # its file (where it will be, for one this message adds)
    on_disk: bool
    owner: str | None  # the title of the problem it belongs to; None for a context item
    key: str  # its file relative to the research folder: the index's key

    @property
    def name(self) -> str:
        return self.attachment.name

    def source(self, layout: Layout) -> Source:
        """As the index takes it, with its parts (`layout`)."""
        fallback = self.file.stem
        return Source(self.key, self.attachment.content, layout, self.file if self.on_disk else None,
                      lambda text: formats.parse_attachment(text, fallback_name=fallback).content)


def sources_of(draft: Draft, scope: list[Readable]) -> list[Source]:
    """The index's sources for `scope`, their layouts read from disk where kept (engine/retrieval/layout_store.py)."""
    layouts = draft.layouts([item.attachment for item in scope], draft.rules.part_chars)
    return [item.source(shape) for item, shape in zip(scope, layouts)]


def sources_limit(rules: Rules) -> int:
    """Characters of sources one reply holds: SOURCES_CHARS, or whatever one part or one find
    of the research's rules takes, if more."""
    return max(SOURCES_CHARS, rules.part_chars + 4 * _TAG_CHARS, _find_size(rules.find_results, MAX_QUERY_CHARS))


def _find_size(passages: int, query: int) -> int:
    """The most a find's entry takes: its passages, their tags, its first line."""
    return passages * (ranking.PASSAGE_CHARS + _TAG_CHARS) + query + 200


FIND_KEY = "find "  # a find's key among what a message showed (`Draft.shown`): this, then its query's words


def searched(shown: frozenset[str]) -> tuple[str, ...]:
    """The queries (their words) the finds of a message searched, of what it showed."""
    return tuple(sorted(key[len(FIND_KEY):] for key in shown if key.startswith(FIND_KEY)))


def reading_room(rules: Rules, answered: int, query: int) -> tuple[bool, bool]:
    """Whether a reply that holds `answered` characters of sources has room for one more `read`
    of one part, and for one more `find` of a query of `query` characters (else they fail)."""
    limit = sources_limit(rules)
    return (answered + rules.part_chars + 2 * _TAG_CHARS <= limit,
            answered + _find_size(rules.find_results, query) <= limit)


def readable(draft: Draft, path: ProblemPath | None = None) -> list[Readable]:
    """What `read` and `find` may use at `path` (the focus by default): its attachments and its
    parents' (nearest first), then the context; a name already seen hides the later ones."""
    path = draft.state.focus if path is None else path
    root = draft.tree.root
    seen: set[str] = set()
    out = []

    def add(attachment: Attachment, file: Path, on_disk: bool, owner: str | None) -> None:
        key = citations.key(attachment.name)
        if key in seen:
            return
        seen.add(key)
        out.append(Readable(attachment, file, on_disk, owner, source_key(root, file)))

    for depth in range(len(path), -1, -1):
        problem = draft.problem(path[:depth])
        title = problem.title if problem is not None else ""
        for attachment, file, on_disk in draft.attachment_files(path[:depth]):
            add(attachment, file, on_disk, title)
    for attachment, file in attachment_files(root / BOOKKEEPING / CONTEXT, draft.tree.cache):
        add(attachment, file, True, None)
    return out


# -- read ----------------------------------------------------------------------------------------------


def read(draft: Draft, args: Args) -> Result:
    arg = args["part"]
    scope = readable(draft)
    item, first, last = _resolve(draft, arg, scope)
    [found] = draft.layouts([item.attachment], draft.rules.part_chars)
    count = found.count
    whole = "part" if count == 1 else "parts"
    if first < 1 or last < first:
        raise CommandError(f"{quote(arg.value)} names no part: parts are numbered from 1, e.g. "
                           f"`///read {part_name(item.name, 1)}` ({quote(item.name)} has {count:,} {whole}).", arg.span)
    if first > count:
        raise CommandError(f"{quote(item.name)} has {count:,} {whole}, so there is no part {first:,}: read "
                           f"`{part_name(item.name, 1)}` to `{part_name(item.name, count)}`.", arg.span,
                           _fix(arg, part_name(item.name, count)))
    if last > count:
        raise CommandError(f"{quote(item.name)} has {count:,} {whole}, so there is no part {last:,}: read "
                           f"`{part_name(item.name, first, count)}`.", arg.span,
                           _fix(arg, part_name(item.name, first, count)))
    if last - first + 1 > READ_PARTS:
        upto = first + READ_PARTS - 1
        raise CommandError(f"A read shows at most {READ_PARTS} parts at once; read `{part_name(item.name, first, upto)}` "
                           f"now and the rest in later commands or messages.", arg.span,
                           _fix(arg, part_name(item.name, first, upto)))
    wanted = {f"{item.key}#{n}" for n in range(first, last + 1)}
    if wanted <= draft.shown:  # a model may write the same read again and again
        return Result(f"{part_name(item.name, first, last)} is already shown in this reply; nothing repeated.",
                      [Warning_(f"{part_name(item.name, first, last)} is already shown under Sources in this reply: "
                                "read another part instead.", arg.span)])
    text = item.attachment.content
    body = "\n".join(f'<part name="{attribute(part_name(item.name, n))}" of="{count}">\n{found.text(text, n)}\n</part>'
                     for n in range(first, last + 1))
    where = "the context" if item.owner is None else quote(item.owner)
    pages = _pages(found, first, last)
    entry = (f"Read {part_name(item.name, first, last)} ({'part' if first == last else 'parts'} "
             f"{first}{'' if first == last else f'–{last}'} of {count:,}{pages}, {where}).\n{body}")
    _within_sources(draft, arg, len(entry))
    draft.shown = draft.shown | wanted
    shown = "part" if first == last else "parts"
    return Result(f"Read {shown} {first}{'' if first == last else f'–{last}'} of {count:,} of {quote(item.name)}; "
                  "the text is under Sources.", sources=entry)


def _pages(found: Layout, first: int, last: int) -> str:
    pages = [found.part(n).pages for n in range(first, last + 1) if found.part(n).pages is not None]
    if not pages:
        return ""
    low, high = pages[0][0], pages[-1][1]
    return f", page {low}" if low == high else f", pages {low}–{high}"


def _fix(arg: Arg, replacement: str) -> tuple[Fix, ...]:
    return (Fix(f"Change to {replacement}", (Edit(arg.span, replacement),)),) if arg.span is not None else ()


def _resolve(draft: Draft, arg: Arg, scope: list[Readable]) -> tuple[Readable, int, int]:
    """The source and the parts `arg` names (NAME, NAME#N, NAME#N-M), or CommandError saying
    what is visible here (and where a source of that name is, if it is not)."""
    found = citations.resolve_part(arg.value, [(item.name, item) for item in scope])
    if found is not None:
        item, first, last = found
        if first is None:
            return item, 1, 1
        return item, first, first if last is None else last
    name, _first, _last = split_reference(arg.value)
    names = [item.name for item in scope]
    near = citations.suggestion(name, names)
    hint = f" Did you mean {quote(near)}?" if near else ""
    fixes = _fix(arg, near) if near else ()
    elsewhere = where_else(draft, name) or where_else(draft, one_line(arg.value))
    listing = ("Visible here: " + "; ".join(quote(n, 60) for n in names[:12]) + ("; …" if len(names) > 12 else "")
               + ".") if names else "No attachment or context item is visible here yet."
    raise CommandError(f"No attachment or context item visible here is named {quote(name)}.{hint}"
                       + (f" {elsewhere}" if elsewhere else "") + f" {listing}", arg.span, fixes)


def where_else(draft: Draft, name: str) -> str:
    """A sentence saying which problems have an attachment named `name` though it is not
    visible here (the first few problems of the tree, breadth first, looked through)."""
    if not name.strip():
        return ""
    wanted = citations.key(name)
    visible = {path for path in (draft.state.focus[:d] for d in range(len(draft.state.focus) + 1))}
    found = []
    for path in _problems(draft):
        if path in visible:
            continue
        if any(citations.key(a.name) == wanted for a in draft.attachments(path)):
            problem = draft.problem(path)
            found.append(quote(problem.title if problem else "/".join(path), 60))
        if len(found) >= 3:
            break
    if not found:
        return ""
    return (f"An attachment of that name belongs to {', '.join(found)}: an attachment is visible only while its "
            "problem or one of its subproblems is in focus (keep what you need here with `<<< add_attachment`).")


def _problems(draft: Draft) -> Iterator[ProblemPath]:
    queue: deque[ProblemPath] = deque([()])
    seen = 0
    while queue and seen < WHERE_LOOKED:
        path = queue.popleft()
        seen += 1
        yield path
        queue.extend(child.path for child in draft.children(path))


# -- find ----------------------------------------------------------------------------------------------


def find(draft: Draft, args: Args) -> Result:
    arg = args["query"]
    query = one_line(arg.value)
    if len(query) > MAX_QUERY_CHARS:
        raise CommandError(f"The query is {len(query):,} characters long; a find takes at most {MAX_QUERY_CHARS:,}: "
                           "write the few words the passage you want would hold.", arg.span)
    if not ranking.query_words(query):
        raise CommandError(f"{quote(query)} holds no word to look for (letters or digits): write the words the "
                           "passage you want would hold.", arg.span)
    scope = readable(draft)
    if not scope:
        raise CommandError("There is nothing to search here: no attachment of the current problem or of its parents, "
                           "and no context. Attach sources first (`///attach_url`, `///attach_file`, `///search`).",
                           arg.span)
    searched = FIND_KEY + " ".join(ranking.query_words(query))
    if searched in draft.shown:
        return Result("These words were already searched in this message; nothing repeated.",
                      [Warning_(f"A find for {quote(query)} is already answered under Sources in this reply: search "
                                "other words instead.", arg.span)])
    limit = draft.rules.find_results
    _within_sources(draft, arg, _find_size(limit, len(query)))
    draft.shown = draft.shown | {searched}
    sources = "source" if len(scope) == 1 else "sources"
    need = Need(NeedKind.EMBED, query, arg.span.start.line + 1 if arg.span else 0)
    if draft.index is None:  # a dry run: nothing is searched while typing
        draft.searches += 1
        if draft.evidence is None:
            draft.needs.append(need)  # the query's vector, if semantic search is set up (sources/gather.py)
        return Result(f"Will search the {len(scope):,} {sources} visible here for {quote(query)} when the message runs.")
    by_key = {item.key: item for item in scope}
    sources = sources_of(draft, scope)
    ids = draft.index.sync(sources)  # the index in step with them: executing, under the lock
    ranked = ranking.rank(query, sources, draft.index, ids, limit, _semantic(draft, need))
    passages = ranked.passages
    warnings = [Warning_(note, arg.span) for note in (*draft.index.take_notes(), *ranked.notes)]
    counts = {source.key: source.layout.count for source in sources}
    shown = [f'<passage part="{attribute(part_name(by_key[p.key].name, p.number))}" rank="{rank}">\n{p.text}\n</passage>'
             for rank, p in enumerate(passages, 1)]
    if passages:
        of = len({p.key for p in passages})
        head = (f"Find {quote(query, 200)}: the {len(passages)} best passage{'s' if len(passages) != 1 else ''} "
                f"(of {of} {'source' if of == 1 else 'sources'}; {sum(counts.values()):,} parts searched), best first. "
                "Read on with `///read NAME#N`.")
    else:
        head = (f"Find {quote(query, 200)}: no part of the {len(scope):,} {sources} visible here holds these words. "
                "Try other words (a synonym, a name), or read the outline's parts with `///read NAME#N`.")
    summary = (f"Found {len(passages)} passage{'s' if len(passages) != 1 else ''} for {quote(query)}; they are under "
               "Sources." if passages else f"Nothing matches {quote(query)} in the sources visible here.")
    return Result(summary, warnings, sources="\n".join([head, *shown]))


def _semantic(draft: Draft, need: Need) -> ranking.Semantic | None:
    """Semantic search's inputs for this find: None when it is not set up (no vector was asked
    for: the find is lexical and says nothing of it), else the query's vector or why it has none."""
    found = draft.evidence.results.get(need) if draft.evidence is not None else None
    if isinstance(found, QueryVector):
        return ranking.Semantic(found.vector, found.model_key, VectorStore(draft.tree.root, draft.tree.guard),
                                stopped=found.stopped)
    if isinstance(found, Failed):
        return ranking.Semantic(None, failure=found.reason)
    return None


def _within_sources(draft: Draft, arg: Arg, size: int) -> None:
    """Count `size` characters towards the message's Sources, or refuse past `sources_limit`."""
    limit = sources_limit(draft.rules)
    if draft.answered + size > limit:
        raise CommandError(f"Not shown: this message's reply already holds {draft.answered:,} characters of sources "
                           f"and a reply holds at most {limit:,}. Send this command again in your next message.",
                           arg.span)
    draft.answered += size
