"""The session as chat turns, kept from round to round so that each round's prompt extends the
last one.

The engine renders the conversation from disk (`Research.conversation`: the prompt without
its session opens it, then the session's messages and the system's replies as assistant and
user turns). Its opening shows the researcher's view as it is now, so rendered afresh every
round it would change whenever a command changed the problem, and a server's prompt cache
(llama.cpp's, or a hosted endpoint's prefix caching) would serve only the part before the
first change. So within a session `Turns` keeps the opening it sent first and only appends:
the new turns from disk, and to the newest user turn every section of the view whose text
is not what the conversation last showed of it (`engine.prompt.render_update`: a child's
report come in, a parent's definition appended, a new attachment, the context given by
`continue`, whatever another researcher's commit changed) and how many of this visit's
rounds are left (engine/language/budgets.py). Everything sent before stays byte for byte the same.
So what the conversation shows of the view is what the researcher's `prompt.md` shows,
before every round (issue 33). It keeps, for that, what each turn it sent showed of the
view (`shown`): a section is shown again exactly when it differs from its last showing
still in the conversation.

When the kept conversation no longer fits `max_prompt_tokens`, it is cut so that the opening
stays a cached prefix: the opening as sent is kept, a note saying what was left out is added
at its end, and the oldest turns after it are left out, so many that the opening is at least
`CACHED` of what is sent (the round after a cut then reads the turns again, not the opening)
and the whole is at most `REFIT` of the budget (room to grow: the rounds after extend it
again). The newest turn is never cut. Only when even that does not fit does the engine fit a
conversation afresh (shortening the opening's parts too; the sections shown after it are cut
the same way).

It starts afresh from disk (one cache miss) when the session changes, when the turns on disk
are no longer the ones it sent (another writer, an undo, a restart), or when a cut that keeps
the opening is not enough. Disk stays the memory: this is only what was sent, to send it
again unchanged.
"""

from __future__ import annotations

from ..engine.core.state import MAIN, Phase
from ..engine.language.budgets import rounds_note
from ..engine.views.prompt import Conversation, Fit, Turn, render_update, shown_by

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
        self.opened: dict[str, str] = {}  # what the opening shows of the view: text by section (and item) key
        self.updates: list[dict[str, str]] = []  # for each turn of `sent`, what of the view its update showed
        self.fit = Fit()  # how the opening's parts were cut (the sections shown after it are cut alike)
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
            sent, updates, opening, opened = self.sent + added, self.updates + [{} for _ in added], self.opening, self.opened
            # What changed goes to the newest user turn (a session's turns end with the system's
            # reply), or after the opening while nothing is said (the session's first reply was empty).
            now = whole.sections if self.fit == Fit() else research.sections(self.researcher, self.fit)
            update, showing = render_update(now, _merged(opened, updates))
            extra = "\n\n".join(part for part in (update, note if added else "") if part)
            if extra and sent:
                sent[-1] = Turn(sent[-1].role, sent[-1].content + "\n\n" + extra)
                updates[-1] = {**updates[-1], **showing}
            elif extra:
                opening, opened = opening + "\n\n" + extra, {**opened, **showing}
            candidate = Conversation(opening, tuple(sent))
            if budget is None or candidate.characters() <= budget:
                self.first += opening[len(self.opening):]  # (no turns yet: no cut has happened)
                self.opening, self.opened, self.sent, self.bare, self.updates = (
                    opening, opened, sent, self.bare + added, updates)
                return candidate.messages()
            if opening == self.opening and self._cut(sent, self.bare + added, updates, budget):
                update, showing = render_update(now, _merged(self.opened, self.updates))
                if update:  # what the turns left out showed of the view, shown again
                    self.sent[-1] = Turn(self.sent[-1].role, self.sent[-1].content + "\n\n" + update)
                    self.updates[-1] = {**self.updates[-1], **showing}
                candidate = Conversation(self.opening, tuple(self.sent))
                if candidate.characters() <= budget:
                    return candidate.messages()
        return self._afresh(research, key, whole, budget, max_tokens, note)

    @staticmethod
    def _note(research, state) -> str:
        """How many of this visit's rounds are left, once some are gone (engine/language/budgets.py)."""
        if state.phase is not Phase.IN_FOCUS:
            return ""
        rounds = research.rounds(state)
        return rounds_note(rounds, research.rules()) if rounds else ""

    def _cut(self, sent: list[Turn], bare: list[Turn], updates: list[dict[str, str]], budget: int) -> bool:
        """Leave out the oldest turns after the opening (in pairs: a message and its reply), so
        that the opening stays the prefix the server has cached. False when that is not enough,
        or when what was sent is not turn for turn what is on disk (the engine fitted it). What
        the turns left out showed of the view is no longer shown: the next update shows it again."""
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
        self.sent, self.bare, self.updates = sent[drop:], bare[drop:], updates[drop:]
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
        self.opened, self.updates, self.fit = shown_by(fitted.sections), [{} for _ in turns], fitted.fit
        return Conversation(opening, tuple(turns)).messages()


def _merged(opened: dict[str, str], updates: list[dict[str, str]]) -> dict[str, str]:
    """What a conversation shows of the view, by section and item key: what its opening shows,
    then each update in it, oldest first (a later showing replaces an earlier one)."""
    shown = dict(opened)
    for showing in updates:
        shown.update(showing)
    return shown


def _cut_note(left_out: int) -> str:
    return (f"\n\n[… cut to fit the prompt: the first {left_out} turns of this session (your messages and the "
            "system's replies) are not shown …]")


def _size(opening: str, turns: list[Turn], left_out: int) -> int:
    return Conversation(opening + _cut_note(left_out), tuple(turns)).characters()
