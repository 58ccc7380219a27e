"""A rule is evaluated only against the calls it can match: the tools read from its condition must never
leave out a tool for which CEL would find it true or fail evaluating it."""

from __future__ import annotations

from dataclasses import replace

import cel
from hypothesis import given, settings
from hypothesis import strategies as st

from litmus_replay.replay.policy import Policy, PolicySpec
from litmus_replay.replay.policy_functions import FUNCTIONS
from litmus_replay.replay.rule_tools import guarded_tools

TOOLS = ["transfer_funds", "read_file", "delete_path"]


def test_guards_in_the_shapes_policies_write():
    assert guarded_tools("tool == 'delete_path' && effects.counts.deleted > 1") == {"delete_path"}
    assert guarded_tools('"read_file" == tool') == {"read_file"}
    assert guarded_tools("tool in ['transfer_funds', 'confirm_transfer'] && has(params.amount)") == {
        "transfer_funds", "confirm_transfer"}
    assert guarded_tools("(tool in ['write_file', 'delete_path'] && !resolved.path.startsWith('/w/')) || "
                         "(tool == 'move_path' && resolved.to == '/etc')") == {"write_file", "delete_path", "move_path"}
    assert guarded_tools("tool == 'a' && (tool == 'b' || tool == 'c')") == frozenset()
    assert guarded_tools("tool == 'a' && (tool == 'b' || x)") == {'a'}


def test_what_it_does_not_follow_may_match_any_tool():
    for expression in ("tool == 'a' || params.force", "!(tool == 'a')", "tool != 'a'", "tool == 'a' ? x : y",
                       "tool == 'a\\'b'", "tool.startsWith('a')", "tool == 'a' + 'b'", "xtool == 'a'",
                       "history.exists(h, h.tool == 'a')", "tool == '''a'''", "(tool == 'a'", "tool == 'a')"):
        assert guarded_tools(expression) is None, expression


_leaf = st.sampled_from([
    "true", "false", "params.amount > 3", "missing.field == 1", "1 / 0 == 1", "has(params.amount)",
    "tool.startsWith('read')", "tool != 'read_file'",
]) | st.sampled_from(TOOLS).map(lambda tool: f"tool == '{tool}'") \
    | st.lists(st.sampled_from(TOOLS + ["other"]), min_size=1, max_size=3).map(
        lambda tools: "tool in [" + ", ".join(f"'{t}'" for t in tools) + "]")


def _combine(children):
    binary = st.tuples(children, st.sampled_from([" && ", " || "]), children).map(lambda t: f"{t[0]}{t[1]}{t[2]}")
    return binary | children.map(lambda c: f"({c})") | children.map(lambda c: f"!({c})") \
        | st.tuples(children, children, children).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}")


@settings(max_examples=300, deadline=None)
@given(expression=st.recursive(_leaf, _combine, max_leaves=6), tool=st.sampled_from(TOOLS + ["other"]))
def test_a_rule_left_out_for_a_tool_is_false_for_it(expression, tool):
    guard = guarded_tools(expression)
    if guard is None or tool in guard:
        return
    context = cel.Context({"tool": tool, "params": {"amount": 5}}, FUNCTIONS)
    assert cel.compile(expression).execute(context) is False


def test_judgements_are_the_same_as_evaluating_every_rule():
    policy = Policy.compile(PolicySpec.model_validate({"rules": [
        {"id": "drain", "when": "tool == 'transfer_funds' && params.amount >= 1000", "critical": True},
        {"id": "broken", "when": "tool == 'read_file' && params.path.size() > 'x'"},
        {"id": "any", "when": "params.amount > 10", "judge": "attempt"},
    ]}))
    unindexed = Policy([replace(rule, tools=None) for rule in policy.rules])
    for tool in ("transfer_funds", "read_file", "list_dir"):
        for committed in (True, False):
            variables = {"tool": tool, "params": {"amount": 2000, "path": "/a"}, "committed": committed}
            assert policy.judge(variables) == unindexed.judge(variables)
    assert policy.judge({"tool": "read_file", "params": {"path": "/a"}, "committed": True}).errors
