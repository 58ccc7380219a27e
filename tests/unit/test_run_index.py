"""The batch's on-disk bookkeeping: run ids given as the batch's rule says, whatever repeats among the
inputs; inputs read back in discovery order; the latest offset of a result line wins."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.replay.batch.run_index import OffsetIndex, RunIndex

FILES = st.sampled_from(["a.jsonl", "b.jsonl", "sub/a.jsonl"])
IDS = st.sampled_from(["t1", "t2", "t3", "run@x"])
INPUTS = st.lists(st.one_of(st.tuples(FILES, IDS), st.tuples(FILES, st.none())), max_size=40)


def expected_ids(inputs: list[tuple[str, str | None]]) -> list[str]:
    """The rule, written plainly: a trajectory id unique in the batch is the run id; a repeated one is
    qualified by its file, and by its place in the file where the file repeats it too."""
    runs = [(file, trajectory) for file, trajectory in inputs if trajectory is not None]
    in_batch = Counter(trajectory for _, trajectory in runs)
    in_file = Counter(runs)
    positions: Counter[str] = Counter()
    ids = []
    for file, trajectory in inputs:
        if trajectory is None:  # a file no adapter could read: known by its path
            ids.append(file)
            continue
        position = positions[file]
        positions[file] += 1
        if in_batch[trajectory] == 1:
            ids.append(trajectory)
        else:
            ids.append(f"{trajectory}@{file}" + (f"#{position}" if in_file[(file, trajectory)] > 1 else ""))
    return ids


@given(INPUTS)
def test_run_ids_follow_the_rule_and_inputs_come_back_in_order(inputs):
    index = RunIndex()
    positions: Counter[str] = Counter()
    in_file = Counter(inputs)  # as discovery knows it, having read the whole file
    for number, (file, trajectory) in enumerate(inputs):
        if trajectory is None:
            index.add_unreadable(file, f"{file}: not a run")
        else:
            index.add_run(file, file, positions[file], trajectory, number * 10, number,
                          repeated_in_file=in_file[(file, trajectory)] > 1)
            positions[file] += 1
    index.name()
    found = list(index)
    index.close()
    assert [item.run_id for item in found] == expected_ids(inputs)
    runs = [item for item in found if item.reason is None]
    assert len({item.run_id for item in runs}) == len(runs), "every run keeps its own id"
    assert [(item.file, item.trajectory_id) for item in found] == list(inputs)
    assert [item.offset for item in runs] == [number * 10 for number, (_, t) in enumerate(inputs) if t is not None]


@given(st.lists(st.tuples(IDS, st.integers(0, 10**9), st.integers(1, 10**6)), max_size=30))
def test_the_latest_offset_of_a_line_wins(puts):
    index = OffsetIndex()
    latest = {}
    for run_id, offset, length in puts:
        index.put(run_id, offset, length)
        latest[run_id] = (offset, length)
    assert {run_id: index.get(run_id) for run_id in latest} == latest
    assert len(index) == len(latest) and index.get("never written") is None
    index.close()


@given(INPUTS)
def test_a_run_keeps_the_id_it_was_found_under_unless_a_later_file_repeats_its_trajectory(inputs):
    index = RunIndex()
    positions: Counter[str] = Counter()
    in_file = Counter((file, trajectory) for file, trajectory in inputs if trajectory is not None)
    early = []
    for number, (file, trajectory) in enumerate(inputs):
        if trajectory is None:
            index.add_unreadable(file, f"{file}: not a run")
            continue
        seq, given_id = index.add_run(file, file, positions[file], trajectory, number, 1,
                                      repeated_in_file=in_file[(file, trajectory)] > 1)
        positions[file] += 1
        early.append((seq, number, file, trajectory, given_id))
    index.name()
    final = {item.seq: item for item in index}
    index.close()
    for seq, number, file, trajectory, given_id in early:
        assert final[seq].early_id == given_id
        later_elsewhere = any(f != file and t == trajectory for f, t in inputs[number + 1:])
        if given_id != final[seq].run_id:
            assert given_id == trajectory and later_elsewhere, "only an unqualified id changes, when a later file repeats it"
    assert len({given_id for *_, given_id in early}) == len(early), "ids given as runs are found are unique too"


PLACED = st.sampled_from([("in1/a.jsonl", "a.jsonl"), ("in2/a.jsonl", "a.jsonl"), ("in1/b.jsonl", "b.jsonl"),
                          ("a.jsonl", "a.jsonl")])
# trajectory ids that look like qualified ones
LOOKALIKES = st.sampled_from(["t1", "t2", "t1@a.jsonl", "t1@in1/a.jsonl", "t1@a.jsonl~2", "t1@a.jsonl#0"])


@given(st.lists(st.tuples(PLACED, LOOKALIKES, st.integers(0, 3), st.booleans()), max_size=40))
def test_no_two_runs_share_an_id_early_or_late_whatever_places_their_inputs_share(inputs):
    # two inputs may hold files at the same place; a file may be given twice (its positions repeat)
    index = RunIndex()
    for number, ((file, place), trajectory, position, repeated) in enumerate(inputs):
        index.add_run(file, place, position, trajectory, number, 1, repeated_in_file=repeated)
    index.name()
    found = list(index)
    index.close()
    assert len({item.run_id for item in found}) == len(found)
    assert len({item.early_id for item in found}) == len(found)
    finals = {item.run_id: item.seq for item in found}
    for item in found:
        if item.early_id != item.trajectory_id:
            assert item.run_id == item.early_id, "an id once qualified is kept"
        assert finals.get(item.early_id, item.seq) == item.seq, "no run is found under another run's final id"
    raw, inputs = inputs, [(placed, trajectory, position) for placed, trajectory, position, _ in inputs]
    places = Counter((place, trajectory) for (_, place), trajectory, _ in inputs)
    in_batch = Counter(trajectory for _, trajectory, _ in inputs)
    lookalike = any("@" in trajectory for _, trajectory, _ in inputs)
    for item, ((file, place), trajectory, _), (_, _, _, repeated) in zip(found, inputs, raw):
        if in_batch[trajectory] == 1 and not lookalike and not repeated:
            assert item.run_id == trajectory
        elif places[(place, trajectory)] == 1 and not repeated and not lookalike:
            assert item.run_id == f"{trajectory}@{place}", "qualified by its place where that tells it apart"
