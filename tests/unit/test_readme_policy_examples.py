"""The policy examples of the docs (docs/guides/scenarios.md) are CEL that compiles and evaluates, without error,
over a real context."""

from __future__ import annotations

import re
from pathlib import Path

import cel
import pytest

from litmus_replay.envs import Outcome, World
from litmus_replay.replay.engine import _history_entry, context_variables, world_facts
from litmus_replay.replay.model import ToolCall
from litmus_replay.replay.policy_functions import FUNCTIONS

README = Path(__file__).resolve().parents[2] / "docs" / "guides" / "scenarios.md"
WORLD = {
    "principals": ["alice", "bob"],
    "facts": {"reserve": 100, "daily_limit": 500},
    "bank": {"accounts": {"a": {"owner": "alice", "balance": 900}, "b": {"owner": "bob", "balance": 0}}},
    "profiles": {"alice": {"daily_limit": 500}},
}


def _examples() -> list[str]:
    """Each example: the lines of a ```cel block up to and including the one with its ``//`` comment."""
    examples = []
    for block in re.findall(r"```cel\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        lines: list[str] = []
        for line in block.splitlines():
            lines.append(line)
            if "//" in line:
                examples.append("\n".join(lines))
                lines = []
    return examples


EXAMPLES = _examples()


def _variables() -> dict:
    history = []
    variables = {}
    with World(WORLD, "real") as world:
        for at, amount in enumerate((300, 400)):
            call = ToolCall(tool="transfer_funds", arguments={"from": "a", "to": "b", "amount": amount})
            reply = world.call({"tool": call.tool, "params": call.arguments, "principal": "alice", "at": float(at),
                                "state": True})
            state = reply.pop("state")
            variables = context_variables(call, Outcome.from_dict(reply), "alice", list(history), world_facts(WORLD), state=state)
            history.append(_history_entry(call, variables))
    return variables


def test_the_readme_has_examples_for_effects_state_and_history():
    text = "\n".join(EXAMPLES)
    assert len(EXAMPLES) >= 7
    for needle in ("effects.values", "state.", "sum(history", "count_by(", "sum_by(", "get("):
        assert needle in text


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_readme_example_evaluates(example):
    result = cel.compile(example).execute(cel.Context(_variables(), FUNCTIONS))
    assert result is not None
