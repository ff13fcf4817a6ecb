"""The session in the prompt (issue 46): bounded however long the session grows (its last
messages, within a budget, the newest turn whole); what the replies before the newest turn
showed of the sources is named only; the session's log keeps everything and is read from its
end, whatever its size."""

from __future__ import annotations

import random
import re
from pathlib import Path

from deep_research.engine.research import Research
from deep_research.engine.store import session_file
from deep_research.engine.views import session
from deep_research.engine.views.session import SESSION_CHARS, SESSION_MESSAGES, Entry, parse, read_recent

from dr_engine_support import attachment, line, ok

SPEC = Path(__file__).parents[2] / "benchmarks" / "retrieval" / "restructuredtext.txt"
WORDS = ("title", "section", "directive", "table", "list", "footnote", "citation", "role", "hyperlink", "comment",
         "literal", "block", "field", "option", "quote", "image", "substitution", "target", "inline", "markup")


def test_a_long_session_shows_its_last_messages_and_names_what_earlier_replies_showed(research: Research,
                                                                                      root: Path) -> None:
    ok(research, attachment("Spec", SPEC.read_text(encoding="utf-8").replace("\f", "")))
    finds = SESSION_MESSAGES + 5
    for n in range(finds):
        ok(research, line("find", f"{WORDS[n % len(WORDS)]} {WORDS[(n * 7 + 3) % len(WORDS)]}"))
    before_last = (root / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    ok(research, line("find", "enumerated lists"))
    prompt = (root / ".deep-research" / "prompt.md").read_text(encoding="utf-8")
    assert prompt == research.prompt()
    shown = prompt.split("# Current Session", 1)[1]
    numbers = [int(n) for n in re.findall(r'<message from="assistant" number="(\d+)">', shown)]
    messages = len([e for e in research.transcript() if e.role == "assistant"])
    assert numbers == list(range(messages - SESSION_MESSAGES + 1, messages + 1)), "the last ones, numbered in the session"
    assert f"({messages - SESSION_MESSAGES} of your messages and the system's replies) are not shown" in shown
    *older, newest = shown.split('<message from="assistant"')
    assert newest.count('" rank="') == 5 and len(re.findall(r'<passage part="Spec#\d+" rank="\d+">\n.', newest)) == 5
    earlier = "".join(older)
    assert len(re.findall(r'<passage part="Spec#\d+" rank="\d+"/>', earlier)) == 5 * (SESSION_MESSAGES - 1)
    assert not re.search(r'<passage part="Spec#\d+" rank="\d+">', earlier), "named only"
    assert shown.count("the parts, passages and outlines they showed are named only") == 1, "said once"
    assert len(shown) < 40_000
    # The log keeps every reply whole; undo brings the prompt back as it was.
    replies = [e.text for e in research.transcript() if e.role == "system" and "## Sources" in e.text]
    assert len(replies) == finds + 1 and all(r.count("</passage>") == 5 for r in replies)
    research.undo()
    assert (root / ".deep-research" / "prompt.md").read_text(encoding="utf-8") == before_last == research.prompt()


def test_a_session_longer_than_its_budget_keeps_its_newest_turn_whole(research: Research) -> None:
    thinking = "I weigh the options once more. " * 300  # ~9,300 characters a message
    for n in range(6):
        ok(research, f"Turn {n}. {thinking}")
    shown = research.prompt().split("# Current Session", 1)[1]
    assert len(shown) < SESSION_CHARS + 1_000
    assert f"Turn 5. {thinking}".rstrip() in shown and "Turn 0. I weigh" in shown
    assert "more characters of this message are not shown" in shown


def test_the_end_of_a_log_is_read_as_the_whole_log_says(monkeypatch) -> None:
    """`read_recent` reads backwards from the end and counts what comes before without parsing:
    the same entries and counts as parsing the whole log, at every chunk size."""
    rng = random.Random(46)
    pieces = ["plain", "é ü 漢字", '{"role": "assistant", "text": "x"}', "\n{\"role\": \"assistant\"", "\\n", '"', "a" * 300]
    entries = [Entry(rng.choice(["assistant", "system", "system"]), " ".join(rng.choices(pieces, k=rng.randint(0, 6))))
               for _ in range(120)]
    log = "".join(e.to_json() for e in entries)
    whole = parse(log)
    assert whole == entries
    path = Path(__import__("tempfile").mkdtemp()) / "0001.jsonl"
    path.write_text(log, encoding="utf-8")
    from deep_research.engine.store import Guard

    guard = Guard(path.parent)
    for chunk in (7, 64, 1 << 16):
        monkeypatch.setattr(session, "_CHUNK", chunk)
        for wanted in (1, 2, 5, 40, 1_000):
            recent = read_recent(guard, path, wanted)
            messages = [i for i, e in enumerate(whole) if e.role == "assistant"]
            first = messages[-wanted] if wanted <= len(messages) else 0
            assert recent.entries == whole[first:]
            assert (recent.earlier, recent.earlier_messages) == (first, sum(1 for i in messages if i < first))


def test_a_session_log_past_the_read_limit_still_shows_its_end(research: Research, root: Path) -> None:
    """A file of the research over 16 MB is not read whole; the session's is read from its end,
    so a long session's prompt still shows its last messages (it showed none)."""
    log = session_file(root, research.state().session)
    pad = "x" * 8_000
    with log.open("a", encoding="utf-8") as handle:
        for n in range(2_200):
            handle.write(Entry("assistant", f"Message {n}. {pad}").to_json() + Entry("system", f"Reply {n}.").to_json())
    assert log.stat().st_size > 16 * 1024 * 1024
    shown = research.prompt().split("# Current Session", 1)[1]
    assert "Message 2199." in shown and "Reply 2199." in shown and "This is the start of a new session" not in shown
    assert re.findall(r'number="(\d+)"', shown)[-1] == str(2_200 + 1)  # the fixture's message, then these
