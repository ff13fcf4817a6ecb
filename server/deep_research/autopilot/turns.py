"""The session as chat turns, kept from round to round so that each round's prompt extends
the last one.

The engine renders the conversation from disk (`Research.conversation`: the prompt without
its session opens it, then the session's messages and the system's replies as assistant and
user turns). Its opening shows the current problem as it is now, so rendered afresh every
round it would change whenever a command changed the problem, and a server's prompt cache
(llama.cpp's, or a hosted endpoint's prefix caching) would serve only the part before the
first change. So within a session `Turns` keeps the opening it sent first and only appends:
the new turns from disk, and to the newest user turn what of the current problem changed
since the conversation showed it (`Research.update`: criteria, breakdown, new attachments …).
Everything sent before stays byte for byte the same.

It starts afresh from disk (one cache miss) when the session changes, when the turns on disk
are no longer the ones it sent (another writer, an undo, a restart), or when the kept
conversation no longer fits `max_prompt_tokens` (the engine's fitted one is then used).
Disk stays the memory: this is only what was sent, to send it again unchanged.
"""

from __future__ import annotations

from ..engine.prompt import Conversation, Turn


class Turns:
    def __init__(self) -> None:
        self.key: tuple | None = None  # (session, phase) the kept conversation belongs to
        self.opening = ""
        self.sent: list[Turn] = []  # as sent (the newest user turns with their updates)
        self.bare: list[Turn] = []  # as on disk
        self.fresh_starts = 0  # conversations started afresh (a measure for the tests)

    def messages(self, research, max_tokens: int | None = None) -> list[dict[str, str]]:
        """The chat `messages` for the next round of `research` (an engine.research.Research)."""
        state = research.state()
        key = (state.session, state.phase)
        fresh: Conversation = research.conversation(max_tokens)
        extends = key == self.key and list(fresh.turns[: len(self.bare)]) == self.bare
        if extends:
            added = list(fresh.turns[len(self.bare):])
            sent = self.sent + added
            if added and added[-1].role == "user":
                shown = self.opening + "".join(t.content for t in sent)
                update = research.update(shown)
                if update:
                    sent[-1] = Turn("user", sent[-1].content + "\n\n" + update)
            candidate = Conversation(self.opening, tuple(sent))
            if max_tokens is None or candidate.characters() <= max_tokens * 4:
                self.sent, self.bare = sent, self.bare + added
                return candidate.messages()
        self.fresh_starts += 1
        self.key, self.opening = key, fresh.opening
        self.sent, self.bare = list(fresh.turns), list(fresh.turns)
        return fresh.messages()
