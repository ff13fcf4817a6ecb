"""The session as chat turns, kept from round to round so that each round's prompt extends the
last one.

The engine renders the conversation from disk (`Research.conversation`: the prompt without
its session opens it, then the session's messages and the system's replies as assistant and
user turns). Its opening shows the current problem as it is now, so rendered afresh every
round it would change whenever a command changed the problem, and a server's prompt cache
(llama.cpp's, or a hosted endpoint's prefix caching) would serve only the part before the
first change. So within a session `Turns` keeps the opening it sent first and only appends:
the new turns from disk, and to the newest user turn what of the current problem changed
since the conversation showed it (`Research.update`: criteria, breakdown, new attachments …)
and how many of this visit's rounds are left (engine/budgets.py). Everything sent before
stays byte for byte the same.

When the kept conversation no longer fits `max_prompt_tokens`, it is cut so that the opening
stays a cached prefix: the opening as sent is kept, a note saying what was left out is added
at its end, and the oldest turns after it are left out, so many that the opening is at least
`CACHED` of what is sent (the round after a cut then reads the turns again, not the opening)
and the whole is at most `REFIT` of the budget (room to grow: the rounds after extend it
again). The newest turn is never cut. Only when even that does not fit does the engine fit a
conversation afresh (shortening the opening's parts too).

It starts afresh from disk (one cache miss) when the session changes, when the turns on disk
are no longer the ones it sent (another writer, an undo, a restart), or when a cut that keeps
the opening is not enough. Disk stays the memory: this is only what was sent, to send it
again unchanged.
"""

from __future__ import annotations

from ..engine.budgets import rounds_note
from ..engine.prompt import Conversation, Turn
from ..engine.state import MAIN, Phase

REFIT = 0.7  # a conversation cut or fitted afresh takes at most this share of max_prompt_tokens: room to grow
CACHED = 0.65  # after a cut, the opening (a cached prefix) is at least this share of what is sent


class Turns:
    """One researcher's conversation (each researcher of a parallel run has its own)."""

    def __init__(self, researcher: str = MAIN) -> None:
        self.researcher = researcher
        self.key: tuple | None = None  # (session, phase) the kept conversation belongs to
        self.opening = ""  # as sent (with a note of the turns a cut left out at its end, if any)
        self.first = ""  # the opening as first sent: the prefix a cut keeps
        self.sent: list[Turn] = []  # as sent (the newest user turns with their notes; old ones maybe cut)
        self.bare: list[Turn] = []  # the session's turns on disk that `sent` accounts for, as they are there
        self.left_out = 0  # turns of the session a cut left out (not in `sent`)
        self.fresh_starts = 0  # conversations started afresh
        self.cuts = 0  # conversations cut, keeping their opening

    def messages(self, research, max_tokens: int | None = None) -> list[dict[str, str]]:
        """The chat `messages` for the next round of `research` (an engine.research.Research)."""
        state = research.state(self.researcher)
        key = (state.session, state.phase)
        whole: Conversation = research.conversation(researcher=self.researcher)  # as on disk, not fitted
        budget = None if max_tokens is None else max_tokens * 4  # characters
        note = self._note(research, state)
        if key == self.key and list(whole.turns[: self.left_out + len(self.bare)])[self.left_out:] == self.bare:
            added = list(whole.turns[self.left_out + len(self.bare):])
            sent = self.sent + added
            if added and added[-1].role == "user":
                shown = self.opening + "".join(t.content for t in sent)
                extra = "\n\n".join(part for part in (research.update(shown, researcher=self.researcher), note) if part)
                if extra:
                    sent[-1] = Turn("user", sent[-1].content + "\n\n" + extra)
            candidate = Conversation(self.opening, tuple(sent))
            if budget is None or candidate.characters() <= budget:
                self.sent, self.bare = sent, self.bare + added
                return candidate.messages()
            if self._cut(sent, self.bare + added, budget):
                return Conversation(self.opening, tuple(self.sent)).messages()
        return self._afresh(research, key, whole, budget, max_tokens, note)

    @staticmethod
    def _note(research, state) -> str:
        """How many of this visit's rounds are left, once some are gone (engine/budgets.py)."""
        if state.phase is not Phase.IN_FOCUS:
            return ""
        rounds = research.rounds(state)
        return rounds_note(rounds, research.rules()) if rounds else ""

    def _cut(self, sent: list[Turn], bare: list[Turn], budget: int) -> bool:
        """Leave out the oldest turns after the opening (in pairs: a message and its reply), so
        that the opening stays the prefix the server has cached. False when that is not enough,
        or when what was sent is not turn for turn what is on disk (the engine fitted it)."""
        if len(sent) != len(bare):
            return False
        room = min(int(budget * REFIT), int(len(self.first) / CACHED))
        drop = 0
        while len(sent) - drop > 2 and _size(self.first, sent[drop:], self.left_out + drop) > room:
            drop += 2
        if drop == 0 or _size(self.first, sent[drop:], self.left_out + drop) > budget:
            return False
        self.left_out += drop
        self.opening = self.first + _cut_note(self.left_out)
        self.sent, self.bare = sent[drop:], bare[drop:]
        self.cuts += 1
        return True

    def _afresh(self, research, key: tuple, whole: Conversation, budget: int | None, max_tokens: int | None,
                note: str) -> list[dict[str, str]]:
        """A new conversation from disk; when it does not fit, the engine's fitted one, well below
        the budget so that the next rounds extend it for a while."""
        self.fresh_starts += 1
        fits = budget is None or whole.characters() <= budget - 200 - len(note)
        fitted = whole if fits else research.conversation(int(max_tokens * REFIT), researcher=self.researcher)
        turns = list(fitted.turns)
        opening = fitted.opening
        if note and turns:
            turns[-1] = Turn(turns[-1].role, turns[-1].content + "\n\n" + note)
        elif note:
            opening += "\n\n" + note
        self.key, self.opening, self.first = key, opening, opening
        self.sent, self.bare, self.left_out = turns, list(whole.turns), 0
        return Conversation(opening, tuple(turns)).messages()


def _cut_note(left_out: int) -> str:
    return (f"\n\n[… cut to fit the prompt: the first {left_out} turns of this session (your messages and the "
            "system's replies) are not shown …]")


def _size(opening: str, turns: list[Turn], left_out: int) -> int:
    return Conversation(opening + _cut_note(left_out), tuple(turns)).characters()
