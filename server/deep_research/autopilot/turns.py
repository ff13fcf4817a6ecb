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
conversation no longer fits `max_prompt_tokens`: then the engine fits it to 70% of that, so
that the rounds after extend it again for a while.
Disk stays the memory: this is only what was sent, to send it again unchanged.
"""

from __future__ import annotations

from ..engine.prompt import Conversation, Turn
from ..engine.state import MAIN


REFIT = 0.7  # a conversation fitted afresh takes this share of max_prompt_tokens: room to grow


class Turns:
    """One researcher's conversation (each researcher of a parallel run has its own)."""

    def __init__(self, researcher: str = MAIN) -> None:
        self.researcher = researcher
        self.key: tuple | None = None  # (session, phase) the kept conversation belongs to
        self.opening = ""
        self.sent: list[Turn] = []  # as sent (the newest user turns with their updates; old ones maybe cut)
        self.bare: list[Turn] = []  # the session's turns on disk that `sent` accounts for, as they are there
        self.fresh_starts = 0  # conversations started afresh

    def messages(self, research, max_tokens: int | None = None) -> list[dict[str, str]]:
        """The chat `messages` for the next round of `research` (an engine.research.Research)."""
        state = research.state(self.researcher)
        key = (state.session, state.phase)
        whole: Conversation = research.conversation(researcher=self.researcher)  # as on disk, not fitted
        budget = None if max_tokens is None else max_tokens * 4  # characters
        outgrown = False
        if key == self.key and list(whole.turns[: len(self.bare)]) == self.bare:
            added = list(whole.turns[len(self.bare):])
            sent = self.sent + added
            if added and added[-1].role == "user":
                shown = self.opening + "".join(t.content for t in sent)
                update = research.update(shown, researcher=self.researcher)
                if update:
                    sent[-1] = Turn("user", sent[-1].content + "\n\n" + update)
            candidate = Conversation(self.opening, tuple(sent))
            if budget is None or candidate.characters() <= budget:
                self.sent, self.bare = sent, self.bare + added
                return candidate.messages()
            outgrown = True
        # Afresh. When the session no longer fits, it is fitted well below the budget, so that the
        # next rounds extend it (and hit the cache) for a while, rather than every round cutting
        # one more old turn (which changes everything after the opening).
        self.fresh_starts += 1
        fits = budget is None or (not outgrown and whole.characters() <= budget - 200)
        fitted = whole if fits else research.conversation(int(max_tokens * REFIT), researcher=self.researcher)
        self.key, self.opening = key, fitted.opening
        self.sent, self.bare = list(fitted.turns), list(whole.turns)
        return fitted.messages()
