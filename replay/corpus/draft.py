"""A run under construction: its principal, session, prompt and the calls it proposes, grouped into turns.

Templates and padding append steps; a step that carries assistant text opens a new turn, so the
pattern's decisive call reads like the scenarios (its own turn, its own sentence) while padding is
grouped loosely, as agents batch reads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from litmus_replay.replay.model import RecordedResult, ToolCall, Turn

# Assistant text for a turn opened by a padding call, by tool.
_PHRASES: dict[str, tuple[str, ...]] = {
    "query_records": ("Let me look up the records.", "Checking the ledger first.", "Pulling the matching rows."),
    "update_record": ("Updating the record.", "Saving that change to the ledger."),
    "delete_records": ("Removing that one record.",),
    "get_balance": ("Checking the balance.", "Let me confirm the account balance."),
    "transfer_funds": ("Sending the payment.", "Making the transfer now."),
    "get_profile": ("Reading your profile.", "Let me look at your profile."),
    "update_profile": ("Updating your profile.", "Saving the new details."),
    "read_file": ("Reading the file.", "Let me open that file."),
    "write_file": ("Writing the file.", "Saving my notes."),
    "list_dir": ("Listing the directory.", "Let me see what is there."),
    "delete_path": ("Removing the scratch file.",),
    "move_path": ("Renaming the file.",),
}
CLOSINGS = ("Done.", "All set.", "That is finished.", "The task is complete.", "I have made the changes.")


@dataclass
class Step:
    """One proposed call; ``text`` opens a new turn; ``recorded`` overrides what the stub would record."""

    tool: str
    arguments: dict[str, Any]
    text: str | None = None
    recorded: RecordedResult | None = None


@dataclass
class Draft:
    """What a template builds: everything a run is, before its results are recorded."""

    rng: random.Random
    principal: str
    prompt: str
    session: str | None = None
    steps: list[Step] = field(default_factory=list)

    def add(self, tool: str, arguments: dict[str, Any], text: str | None = None, recorded: RecordedResult | None = None) -> None:
        """A call of the pattern; with ``text`` it opens a turn."""
        if text is None and not self.steps:
            text = self.rng.choice(_PHRASES.get(tool, ("Working on it.",)))
        self.steps.append(Step(tool, arguments, text, recorded))

    def pad(self, tool: str, arguments: dict[str, Any]) -> None:
        """A padding call: opens a turn about half the time."""
        text = self.rng.choice(_PHRASES.get(tool, ("Working on it.",))) if self.rng.random() < 0.45 else None
        self.add(tool, arguments, text)

    def turns(self, call_id: Callable[[], str]) -> list[Turn]:
        """The steps as turns (results not yet recorded), closed by a text-only turn."""
        turns: list[Turn] = []
        for step in self.steps:
            if step.text is not None or not turns:
                turns.append(Turn(text=step.text, calls=[]))
            turns[-1].calls.append(ToolCall(id=call_id(), tool=step.tool, arguments=step.arguments))
        turns.append(Turn(text=self.rng.choice(CLOSINGS), calls=[]))
        return turns


class Padding(Protocol):
    """A world model that can append one confirmed-safe call to a draft (see :mod:`.models`)."""

    def pad(self, draft: Draft) -> None: ...


def split(rng: random.Random, pads: int, after_share: float = 0.35) -> tuple[int, int]:
    """Padding before and after a pattern's decisive call."""
    after = sum(rng.random() < after_share for _ in range(pads))
    return pads - after, after


def call_id_factory(rng: random.Random, prefix: str = "call_") -> Callable[[], str]:
    """Provider-style call ids (``call_`` and 24 letters and digits), unique within a run."""
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    seen: set[str] = set()

    def make() -> str:
        while True:
            value = prefix + "".join(rng.choice(alphabet) for _ in range(24))
            if value not in seen:
                seen.add(value)
                return value

    return make
