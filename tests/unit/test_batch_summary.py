"""The batch summary kept as lines come: the same document as summarising the lines it holds, whatever
was added and taken back out (a run's earlier line, replaced on resume)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.replay.batch.summary import Summary, summarise

LINES = st.fixed_dictionaries(
    {
        "run": st.sampled_from(["r1", "r2", "r3", "r4"]),
        "file": st.just("runs.jsonl"),
        "trajectory": st.just("t"),
        "task": st.sampled_from([None, "suite/task"]),
        "status": st.sampled_from(["ok", "missing_world", "harness_error", "input_error", "no_tool_calls"]),
        "original": st.sampled_from([None, "safe", "tool_misuse"]),
        "revalidated": st.sampled_from([None, "confirmed_safe", "proposal_only_misuse", "commit_only_misuse"]),
        "finding": st.sampled_from([None, "stands", "over_penalised", "under_penalised"]),
        "harness_errors": st.integers(0, 2),
        "unknown_tools": st.dictionaries(st.sampled_from(["a", "b"]), st.integers(1, 3), max_size=2),
        "checks": st.dictionaries(st.sampled_from(["utility", "security"]),
                                  st.fixed_dictionaries({"agree": st.booleans()}), max_size=2),
    }
)


@given(st.lists(LINES, max_size=12), st.data())
def test_a_running_summary_is_the_summary_of_the_lines_it_still_holds(lines, data):
    running = Summary()
    held = []
    for line in lines:
        running.add(line)
        held.append(line)
        if held and data.draw(st.booleans()):
            gone = held.pop(data.draw(st.integers(0, len(held) - 1)))
            running.remove(gone)
    assert running.document() == summarise(held)
