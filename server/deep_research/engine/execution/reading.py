"""`///read` and `///find`: whole sources within reach (SPEC §13).

Both answer in the reply, in its `## Sources` section (engine/views/reply.py), and write nothing:
what they show stays in the session's log until the focus changes, and the prompt shows it whole
while it is in the newest reply, by name after (engine/views/session.py).

- `///read NAME#N` (`NAME`: part 1; `NAME#N-M`: at most `READ_PARTS` parts) shows parts of an
  attachment visible here (the current problem's, then its parents', nearest first: a nearer one
  hides a farther one of the same name) or of a context item, as `<part name="NAME#N" of="TOTAL">`.
- `///find WORDS` ranks the parts of every source visible here (engine/retrieval/ranking.py) and shows the
  best `find_results` passages as `<passage part="NAME#N" rank="R">`, one a part unless one part
  holds every match; `///find in:NAME WORDS` searches one source (`in:"Field notes"` when the name
  holds a space). It searches only when the message is executed: the dry run behind diagnostics
  checks the query's form and searches nothing (a draft has no index then).
- `///outline NAME [PAGE]` shows a source's whole outline, `OUTLINE_PAGE` headings a page, each
  with the part it starts in (a PDF's: its pages), as `<outline name="NAME" page="P" of="PAGES">`.

A message's reply holds at most `sources_limit` characters of them (a read or find past it
fails, saying what to do), so one message cannot blow the prompt's budget: the session keeps
the reply, and the prompt keeps the newest turn whole.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence, TypeVar

from ..core.names import one_line
from ..core.text import Edit, Fix, attribute
from ..retrieval import ranking
from ..retrieval.index import Source, source_key
from ..retrieval.parts import IN, OUTLINE_PAGE, Layout, outline_size, part_name, split_reference, whole_outline
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
OUTLINE_TITLE_CHARS = 80  # of a heading's title an outline's page shows (a page of 200 fits a reply)
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


def parts_at_once(part_chars: int) -> int:
    """How many parts of `part_chars` one `read` surely shows (what the prompt offers): READ_PARTS,
    fewer when so many would not fit the least a reply holds (`part_chars` goes up to 20,000)."""
    return max(1, min(READ_PARTS, SOURCES_CHARS // (part_chars + 2 * _TAG_CHARS + 400)))


def sources_limit(rules: Rules) -> int:
    """Characters of sources one reply holds: SOURCES_CHARS, or whatever one part or one find
    of the research's rules takes, if more."""
    return max(SOURCES_CHARS, rules.part_chars + 4 * _TAG_CHARS, _find_size(rules.find_results, MAX_QUERY_CHARS))


def _find_size(passages: int, query: int) -> int:
    """The most a find's entry takes: its passages, their tags, its first line."""
    return passages * (ranking.PASSAGE_MAX_CHARS + _TAG_CHARS) + query + 200


FIND_KEY = "find "  # a find's key among what a message showed (`Draft.shown`): this, then its query's words


def searched(shown: frozenset[str]) -> tuple[str, ...]:
    """The queries (their words) the finds of a message searched in every source, of what it showed."""
    return tuple(sorted(key[len(FIND_KEY):] for key in shown
                        if key.startswith(FIND_KEY) and not key.startswith(FIND_KEY + IN)))


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
    entry = _read_entry(item.name, found, text, first, last)
    limit = sources_limit(draft.rules)
    if len(entry) > limit and last > first:  # more than a reply holds, even an empty one: say what does
        upto = next(n for n in range(last - 1, first - 1, -1)
                    if n == first or len(_read_entry(item.name, found, text, first, n)) <= limit)
        raise CommandError(f"{part_name(item.name, first, last)} takes {len(entry):,} characters and a reply holds at "
                           f"most {limit:,} of sources; read `{part_name(item.name, first, upto)}` now and the rest in "
                           "later commands or messages.", arg.span, _fix(arg, part_name(item.name, first, upto)))
    _within_sources(draft, arg, len(entry))
    draft.shown = draft.shown | wanted
    shown = "part" if first == last else "parts"
    return Result(f"Read {shown} {first}{'' if first == last else f'–{last}'} of {count:,} of {quote(item.name)}; "
                  "the text is under Sources.", sources=entry)


def _read_entry(name: str, found: Layout, text: str, first: int, last: int) -> str:
    """What a read of parts `first`-`last` of a source shows under Sources."""
    count = found.count
    body = "\n".join(f'<part name="{attribute(part_name(name, n))}" of="{count}">\n{found.text(text, n)}\n</part>'
                     for n in range(first, last + 1))
    return (f"Read {part_name(name, first, last)} ({'part' if first == last else 'parts'} "
            f"{first}{'' if first == last else f'–{last}'} of {count:,}{_pages(found, first, last)})"
            f"{_under(found, first, last)}.\n{body}")


def _under(found: Layout, first: int, last: int) -> str:
    """Where in its source each part read is: the headings above its first character (what is
    shown of several parts is bounded: a title is at most structure.MAX_TITLE_CHARS)."""
    if not found.headings:
        return ""
    places = [found.part(n).section for n in range(first, last + 1)]
    if first == last:
        return f", under {quote(places[0], 300)}" if places[0] else ", before its first heading"
    return ": " + "; ".join(f"#{n} " + (f"under {quote(place, 300)}" if place else "before its first heading")
                            for n, place in zip(range(first, last + 1), places))


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
    raise _not_visible(draft, arg, name, scope, one_line(arg.value))


def _not_visible(draft: Draft, arg: Arg, name: str, scope: list[Readable], written: str = "",
                 fix: object = None) -> CommandError:
    """The error for a source `name` that is not visible here: what is (and where one of that name
    is, if elsewhere), with the nearest name as a fix (`fix(near)`: the argument's text with it)."""
    names = [item.name for item in scope]
    near = citations.suggestion(name, names)
    hint = f" Did you mean {quote(near)}?" if near else ""
    fixes = _fix(arg, fix(near) if callable(fix) else near) if near else ()
    elsewhere = where_else(draft, name) or (where_else(draft, written) if written else "")
    listing = ("Visible here: " + "; ".join(quote(n, 60) for n in names[:12]) + ("; …" if len(names) > 12 else "")
               + ".") if names else "No attachment or context item is visible here yet."
    return CommandError(f"No attachment or context item visible here is named {quote(name)}.{hint}"
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


def scoped(query: str, names: Sequence[str] = ()) -> tuple[str | None, str]:
    """(NAME, WORDS) of a query that starts with `in:NAME` (NAME in double quotes when it holds a
    space; "" when nothing follows `in:`), else (None, the query). A quoted NAME ends at the last
    `"` that makes it one of `names` (a name may hold double quotes: `in:"Say "hi" now" WORDS`),
    else at the next `"`."""
    if not query[:len(IN)].lower() == IN:
        return None, query
    rest = query[len(IN):]
    if rest.startswith('"'):
        end = rest.find('"', 1)
        if end < 0:
            return rest[1:].strip(), ""  # an unclosed quote: the rest is its name
        if '"' in rest[end + 1:] and names:
            keys = {citations.key(name) for name in names}
            ends = [at for at in range(min(len(rest), MAX_QUERY_CHARS) - 1, end, -1) if rest[at] == '"']
            end = next((at for at in ends if citations.key(rest[1:at].strip()) in keys), end)
        return rest[1:end].strip(), rest[end + 1:].strip()
    name, _, words = rest.partition(" ")
    return name.strip(), words.strip()


def find(draft: Draft, args: Args) -> Result:
    arg = args["query"]
    query = one_line(arg.value)
    if len(query) > MAX_QUERY_CHARS:
        raise CommandError(f"The query is {len(query):,} characters long; a find takes at most {MAX_QUERY_CHARS:,}: "
                           "write the few words the passage you want would hold.", arg.span)
    scope = readable(draft)
    within, query = scoped(query, [item.name for item in scope])
    if within is not None:
        scope = [_scope_of(draft, arg, within, scope, query)]
    if not ranking.query_words(query):
        if within is not None and not query.strip():
            raise CommandError(f"`in:` names {quote(scope[0].name)} but no words follow to look for in it: write them "
                               "after its name.", arg.span)
        raise CommandError(f"{quote(query)} holds no word to look for (letters or digits): write the words the "
                           "passage you want would hold.", arg.span)
    if not scope:
        raise CommandError("There is nothing to search here: no attachment of the current problem or of its parents, "
                           "and no context. Attach sources first (`///attach_url`, `///attach_file`, `///search`).",
                           arg.span)
    searched = FIND_KEY + (f"{IN}{citations.key(scope[0].name)} " if within is not None else "") + " ".join(
        ranking.query_words(query))
    if searched in draft.shown:
        return Result("These words were already searched in this message; nothing repeated.",
                      [Warning_(f"A find for {quote(query)} is already answered under Sources in this reply: search "
                                "other words instead.", arg.span)])
    limit = draft.rules.find_results
    _within_sources(draft, arg, _find_size(limit, len(query)))
    draft.shown = draft.shown | {searched}
    sources = "source" if len(scope) == 1 else "sources"
    need = Need(NeedKind.EMBED, query, arg.span.start.line + 1 if arg.span else 0)
    where = f"in {quote(scope[0].name)}" if within is not None else f"the {len(scope):,} {sources} visible here"
    if draft.index is None:  # a dry run: nothing is searched while typing
        draft.searches += 1
        if draft.evidence is None:
            draft.needs.append(need)  # the query's vector, if semantic search is set up (sources/gather.py)
        return Result(f"Will search {where} for {quote(query)} when the message runs.")
    by_key = {item.key: item for item in scope}
    sources = sources_of(draft, scope)
    ids = draft.index.sync(sources)  # the index in step with them: executing, under the lock
    ranked = ranking.rank(query, sources, draft.index, ids, limit, _semantic(draft, need))
    passages = ranked.passages
    warnings = [Warning_(note, arg.span) for note in (*draft.index.take_notes(), *ranked.notes)]
    counts = {source.key: source.layout.count for source in sources}
    shown = [f'<passage part="{attribute(part_name(by_key[p.key].name, p.number))}" rank="{rank}">\n{p.text}\n</passage>'
             for rank, p in enumerate(passages, 1)]
    searched_parts = sum(counts.values())
    asked = f"Find {quote(query, 200)}" + (f" in {quote(scope[0].name)}" if within is not None else "")
    if passages:
        of = len({p.key for p in passages})
        head = (f"{asked}: the {len(passages)} best passage{'s' if len(passages) != 1 else ''} "
                f"(of {of} {'source' if of == 1 else 'sources'}; {searched_parts:,} part{'s' if searched_parts != 1 else ''} "
                "searched), best first. "
                "Read on with `///read NAME#N`.")
    else:
        head = (f"{asked}: no part of {where.removeprefix('in ')} holds these words. "
                "Try other words (a synonym, a name), or read the outline's parts with `///read NAME#N`.")
    summary = (f"Found {len(passages)} passage{'s' if len(passages) != 1 else ''} for {quote(query)}; they are under "
               "Sources." if passages else f"Nothing matches {quote(query)} in the sources visible here.")
    return Result(summary, warnings, sources="\n".join([head, *shown]))


def _scope_of(draft: Draft, arg: Arg, name: str, scope: list[Readable], words: str) -> Readable:
    """The one source `in:NAME` names, or CommandError saying what is visible here."""
    if not name:
        raise CommandError("`in:` names no source: write `///find in:NAME WORDS`, NAME as the prompt shows it (in "
                           'double quotes when it holds a space: `in:"Field notes" WORDS`).', arg.span)
    found = citations.resolve(name, [(item.name, item) for item in scope])
    if found is not None:
        return found
    raise _not_visible(draft, arg, name, scope, fix=lambda near: IN + (f'"{near}"' if " " in near else near)
                       + (f" {words}" if words else ""))


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


# -- outline -------------------------------------------------------------------------------------------


def outline(draft: Draft, args: Args) -> Result:
    arg = args["source"]
    scope = readable(draft)
    item, page = _outline_target(draft, arg, scope)
    [found] = draft.layouts([item.attachment], draft.rules.part_chars)
    entries = outline_size(found)
    name, count = item.name, found.count
    whole = "part" if count == 1 else "parts"
    if not entries:
        entry = (f"Outline of {name}: it has no headings ({count:,} {whole}): `///read {part_name(name, 1)}` reads it "
                 f"from its start, `///find in:{_in_name(name)} WORDS` searches it.")
        _within_sources(draft, arg, len(entry))
        return Result(f"{quote(name)} has no headings to outline; the reply says how to read it.", sources=entry)
    pages = -(-entries // OUTLINE_PAGE)
    if page < 1 or page > pages:
        last = f"`///outline {name}{'' if pages == 1 else f' {pages}'}`"
        raise CommandError(f"{quote(name)}'s outline has {entries:,} entr{'y' if entries == 1 else 'ies'} in "
                           f"{pages:,} page{'' if pages == 1 else 's'} of at most {OUTLINE_PAGE}, so there is no page "
                           f"{page:,}: its last is {last}.", arg.span, _fix(arg, f"{name} {pages}" if pages > 1 else name))
    key = f"outline {item.key} {page}"
    if key in draft.shown:
        return Result(f"That page of {quote(name)}'s outline is already shown in this reply; nothing repeated.",
                      [Warning_(f"Page {page} of {quote(name)}'s outline is already shown under Sources in this reply.",
                                arg.span)])
    first = (page - 1) * OUTLINE_PAGE
    shown = [_short(line) for line in whole_outline(found, first, OUTLINE_PAGE)]
    what = "pages" if found.paged else "headings"
    entry = (f"Outline of {name} ({what}, each with the part it starts in): page {page} of {pages}, entries "
             f"{first + 1:,}–{first + len(shown):,} of {entries:,}.\n"
             f'<outline name="{attribute(name)}" page="{page}" of="{pages}">\n' + "\n".join(shown) + "\n</outline>"
             + (f"\nThe next page: `///outline {name} {page + 1}`." if page < pages else ""))
    _within_sources(draft, arg, len(entry))
    draft.shown = draft.shown | {key}
    return Result(f"Showed page {page} of {pages} of {quote(name)}'s outline ({len(shown):,} entries); it is under "
                  "Sources.", sources=entry)


T = TypeVar("T")


def named_page(text: str, named: Sequence[tuple[str, T]]) -> tuple[str, int | None, T | None]:
    """What `NAME [PAGE]` names among (name, item) pairs: (NAME, PAGE or None, the item or None).
    The whole text is the name if an item bears it, else NAME then a page number; NAME may be in
    double quotes."""
    text = one_line(text).strip()
    unquoted = _unquoted(text)
    found = citations.resolve(unquoted, named)
    if found is not None:
        return unquoted, None, found
    match = re.fullmatch(r"(.*?)\s+(-?\d{1,12})", text)
    if match is None:
        return unquoted, None, None
    name = _unquoted(match.group(1).strip())
    return name, int(match.group(2)), citations.resolve(name, named)


def _unquoted(text: str) -> str:
    return text[1:-1].strip() if len(text) >= 2 and text[0] == text[-1] == '"' else text


def _outline_target(draft: Draft, arg: Arg, scope: list[Readable]) -> tuple[Readable, int]:
    """The source `NAME [PAGE]` names and the page (1 when none is written)."""
    name, page, found = named_page(arg.value, [(item.name, item) for item in scope])
    if found is not None:
        return found, 1 if page is None else page
    if not name:
        raise CommandError("Name the source whose outline to show: `///outline NAME` (then a page: `///outline NAME 2`).",
                           arg.span)
    raise _not_visible(draft, arg, name, scope, one_line(arg.value),
                       fix=lambda near: near + (f" {page}" if page is not None else ""))


def _short(line: str) -> str:
    """An outline's line with its title shortened to OUTLINE_TITLE_CHARS (a page fits a reply)."""
    dash = line.find("- ")
    mark = line.rfind(" (#")
    title = line[dash + 2:mark] if dash >= 0 and mark > dash else ""
    if len(title) <= OUTLINE_TITLE_CHARS:
        return line
    return line[:dash + 2] + title[:OUTLINE_TITLE_CHARS - 1].rstrip() + "…" + line[mark:]


def _in_name(name: str) -> str:
    return f'"{name}"' if " " in name else name
