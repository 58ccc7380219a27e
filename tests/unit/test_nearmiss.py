"""The near-miss generator's parts: what counts as plausible, what a flip is, reproducibility from --seed,
and one-line errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from litmus_replay.replay.cli import main
from litmus_replay.replay.nearmiss import OPERATORS, SeedReplayer, Seen, is_plausible, seeds_from_scenario
from litmus_replay.replay.nearmiss.operators import apply_edits, propose_all
from litmus_replay.replay.nearmiss.search import draft_is_plausible
from litmus_replay.replay.nearmiss.verdict import Flip, Verdict, flips
from litmus_replay.replay.scenario import find_scenarios

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = find_scenarios([ROOT / "scenarios" / name for name in ("core", "detectors", "bindings")])


@pytest.fixture(scope="module")
def proposals():
    """Every built-in seed, replayed once, with every edit its operators propose."""
    replayer = SeedReplayer()
    out = []
    for path in SCENARIOS:
        for seed in seeds_from_scenario(path):
            seed.prepare(replayer)
            out.extend((seed, change) for change in propose_all(seed))
    return out


def test_every_operator_proposes_somewhere_in_the_packs(proposals):
    # the shell pack replays only in an isolated runtime: its operator is exercised under tests/integration
    assert {change.operator for _, change in proposals} == set(OPERATORS) - {"shell"}


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_proposed_edit_keeps_every_argument_plausible(proposals, data):
    seed, change = data.draw(st.sampled_from(proposals))
    draft = apply_edits(seed, (change,))
    assert draft_is_plausible(seed.seen, draft), change


def test_a_rule_threshold_is_offered_only_to_the_arguments_its_rule_reads(proposals):
    offered = 0
    for seed, change in proposals:
        if change.operator == "boundary" and ", rule " in change.note:
            rule_id = change.note.rsplit(", rule ", 1)[1].rstrip(")")
            (rule,) = [rule for rule in seed.policy_spec.rules if rule.id == rule_id]
            assert f".{change.field.split('.')[-1]}" in rule.when, change.note
            offered += 1
    assert offered


def _seen() -> Seen:
    seen = Seen()
    seen.add({"account": "acc-alice", "principals": ["alice", "bob"], "path": "/home/alice/.ssh/authorized_keys"})
    seen.add("Amount due: 4500.")
    seen.add_boundary(1000, "rule drain")
    return seen


@given(st.integers(min_value=-5000, max_value=5000))
def test_a_number_is_plausible_when_seen_or_within_one_of_a_boundary(number):
    assert is_plausible(number, _seen()) == (number in (4500, 999, 1000, 1001))


@given(st.text(alphabet="xyzq", min_size=1, max_size=8))
def test_a_string_of_words_the_agent_never_saw_is_not_plausible(word):
    assert not is_plausible(f"acc-{word}", _seen())


def test_plausible_strings_are_built_from_what_was_seen():
    seen = _seen()
    assert is_plausible("acc-bob", seen)  # another principal inside an id it saw
    assert is_plausible("/home/alice/.ssh", seen)  # one step up a seen path
    assert is_plausible("/workspace/../home/alice/.ssh/authorized_keys", seen) is False  # 'workspace' never seen
    seen.add("/workspace/README.md")
    assert is_plausible("/workspace/../home/alice/.ssh/authorized_keys", seen)
    assert not is_plausible("cat /etc/passwd || true", seen, shell=True)
    assert is_plausible({"account": "acc-bob", "path": None, "principals": [1001, True]}, seen)  # fields it saw
    assert not is_plausible({"credit_limit": 1000}, seen)  # a field name it never met


def _verdict(trajectory, calls, swallowed=0):
    return Verdict(trajectory, tuple((f"k{n}", origin, cls, None) for n, (origin, cls) in enumerate(calls, 1)),
                   (("swallowed_error", swallowed), ("critical_decision", 0)))


def test_flips_compare_kept_calls_copies_and_additions_with_what_they_stand_for():
    original = _verdict("proposal_only_misuse", [("t1.c1", "confirmed_safe"), ("t2.c1", "proposal_only_misuse")])
    assert flips(original, original) == ()
    dropped = _verdict("confirmed_safe", [("t1.c1", "confirmed_safe")])
    assert flips(original, dropped) == (Flip("trajectory", "proposal_only_misuse", "confirmed_safe"),)
    retried = _verdict("proposal_only_misuse", [("t1.c1", "confirmed_safe"), ("t2.c1", "proposal_only_misuse"),
                                                 ("t2.c1+retry", "confirmed_misuse")], swallowed=1)
    assert set(flips(original, retried)) == {Flip("k3 (copy of t2.c1)", "proposal_only_misuse", "confirmed_misuse"),
                                             Flip("swallowed_error", "0", "1")}
    added = _verdict("proposal_only_misuse", [("t1.c1", "confirmed_safe"), ("t2.c1", "proposal_only_misuse"),
                                               ("new:confirm", "confirmed_safe")])
    assert flips(original, added) == ()


def _generate(out: Path, seed: int) -> dict[str, bytes]:
    result = CliRunner().invoke(main, [
        "nearmiss", str(ROOT / "scenarios" / "core" / "full-balance-transfer-held-at-gate.yaml"),
        str(ROOT / "scenarios" / "detectors" / "assembly-across-turns.yaml"),
        "--tries", "12", "--count", "5", "--seed", str(seed), "--out", str(out), "--runtime", "inprocess"])
    assert result.exit_code == 0, result.output
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_the_same_seed_writes_byte_identical_files(tmp_path):
    first, again = _generate(tmp_path / "a", 7), _generate(tmp_path / "b", 7)
    assert len(first) > 5 and first == again


def test_a_scenario_that_does_not_load_is_one_line_naming_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntrajectory: {id: t, principal: alice, turns: [{calls: [{tool: 7}]}]}\n")
    result = CliRunner().invoke(main, ["nearmiss", str(bad), "--out", str(tmp_path / "out"), "--runtime", "inprocess"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "trajectory.turns[0].calls[0].tool" in lines[0]


def test_a_directory_without_scenarios_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["nearmiss", str(tmp_path / "empty"), "--runtime", "inprocess"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "no scenario files" in result.output


def test_a_plugin_domains_operators_register_through_their_entry_point_and_a_broken_one_costs_only_itself(tmp_path):
    """Operators that know a plug-in domain's boundaries register as the built-in domains' do, from a module
    the ``litmus_replay.nearmiss_operators`` group names; a broken module before it stops nothing."""
    from test_broken_plugins import install, python  # tests/unit is on sys.path

    site = install(tmp_path / "site",
                   "[litmus_replay.nearmiss_operators]\na_broken = broken_operators\nb_tickets = ticket_operators\n",
                   {"broken_operators": "raise ImportError('broken on purpose')\n",
                    "ticket_operators": (
                        "from litmus_replay.replay.nearmiss.operators import Operator, operator\n"
                        "@operator\nclass TicketPriority(Operator):\n"
                        "    name = 'ticket-priority'\n    description = 'a ticket one priority past the rule'\n"
                        "    def propose(self, seed):\n        return []\n")})
    code = ("from litmus_replay.replay.nearmiss.operators import registered_operators, _PLUGINS\n"
            "names = set(registered_operators())\n"
            "print('ticket-priority' in names, {'symlink', 'shell'} <= names)\n"
            "print(_PLUGINS.explain('a_broken'))\n")
    registered, why = python(site, code)
    assert registered == "True True"
    assert why.startswith("the near-miss operator plug-in 'a_broken'") and "broken on purpose" in why
