"""Run pages: linked to their flagged neighbours once the batch's order is known, or made later from
``results.jsonl``, byte for byte as the batch would have written them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from litmus_replay.envs.runtime import get_runtime

from ..errors import InputError
from ..model import Trajectory
from ..report.atomic import write_atomic
from ..report.batch_index import FLAGGED_FINDINGS
from ..report.html import PageNav, trajectory_html, with_nav
from ..worlds import NoWorld, WorldCatalog
from .discovery import read_runs
from .results import BATCH, RESULTS, iter_results
from .schema import ResultLine
from .worker import ORIGINAL_KINDS, _UNLINKED, replay_in, report_path


def _flagged(line: ResultLine) -> bool:
    return line.status == "ok" and line.finding in FLAGGED_FINDINGS


def _nav(previous: ResultLine | None, following: ResultLine | None) -> PageNav:
    def target(line: ResultLine | None) -> tuple[str, str] | None:
        return None if line is None else (Path(report_path(line.run)).name, line.run)

    return PageNav(_UNLINKED.index, target(previous), target(following))


def page_navs(lines: Callable[[], Iterable[ResultLine]]) -> Iterator[tuple[ResultLine, PageNav]]:
    """Each line with the navigation its page carries: the flagged runs before and after it, in order.

    ``lines`` gives the lines afresh on each call: they are read twice side by side (the second read runs
    ahead to the next flagged line), so only three lines are held, however long the batch."""
    ahead = (line for line in lines() if _flagged(line))
    previous, following = None, next(ahead, None)
    for line in lines():
        if following is not None and _flagged(line) and following.run == line.run:
            after = next(ahead, None)
            yield line, _nav(previous, after)
            previous, following = line, after
        else:
            yield line, _nav(previous, following)


def link_pages(out: Path, lines: Callable[[], Iterable[ResultLine]]) -> None:
    """Set every written page's links to its neighbouring flagged runs (rewriting only pages that change)."""
    for line, nav in page_navs(lines):
        if line.report is None:
            continue
        path = out / line.report
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        linked = with_nav(text, nav)
        if linked != text:
            write_atomic(path, linked)


def write_run_page(out: str | Path, run_id: str, *, worlds_dir: str | Path | None = None,
                   runtime: str | None = None) -> Path:
    """Make one run's page from the batch's ``results.jsonl``, as the batch writes it (byte for byte):
    the run is read again from its file and replayed against its task's world. Returns the page's path.

    The worlds, format and runtime default to those the batch recorded in ``batch.json``; the run is
    replayed with the benchmark version the batch was given (``benchmark_version`` there), if any.
    """
    out = Path(out)
    results = out / RESULTS
    if not results.is_file():
        raise InputError(str(results), None, "no results here: run `litmus-replay revalidate --out` first")
    recorded = _read_batch_record(out)
    found = next((item for item in page_navs(lambda: iter_results(results)) if item[0].run == run_id), None)
    if found is None:
        raise InputError(str(results), "run", f"no run {run_id!r} in this batch")
    line, nav = found
    if line.status != "ok":
        raise InputError(str(results), "status", f"run {run_id!r} was not replayed ({line.status}): it has no page")
    base = Path(recorded.get("base") or ".")
    if worlds_dir is None and recorded.get("worlds"):
        worlds_dir = base / recorded["worlds"]
    # the task the line was replayed under: a resumed batch may have been given another --task since
    kind = recorded.get("original_kind")
    labels = recorded.get("verdict_labels")
    trajectory = _recorded_trajectory(base / line.file, line, recorded.get("format", "auto"), line.task,
                                      kind if kind in ORIGINAL_KINDS else None,
                                      labels if isinstance(labels, dict) else None)
    version = recorded.get("benchmark_version")
    try:
        world = WorldCatalog.load(worlds_dir, benchmark_version=version if isinstance(version, str) and version else None
                                  ).find(trajectory)
    except NoWorld as exc:
        raise InputError(str(worlds_dir) if worlds_dir is not None else None, "task", str(exc)) from None
    real = get_runtime(runtime or recorded.get("runtime") or "sandbox")
    try:
        analysis, _ = replay_in(world, trajectory, real, line.file)
    finally:
        real.close()
    path = out / report_path(run_id)
    write_atomic(path, trajectory_html(analysis, nav))
    return path


def _read_batch_record(out: Path) -> dict[str, Any]:
    try:
        record = json.loads((out / BATCH).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise InputError(str(out / BATCH), None, f"not JSON: {exc}") from None
    return record if isinstance(record, dict) else {}


def _recorded_trajectory(file: Path, line: ResultLine, fmt: str, task: str | None = None,
                         original_kind: str | None = None, verdict_labels: dict[str, str] | None = None) -> Trajectory:
    """The trajectory a result line names: by its place in the file where the run id carries one, else by id."""
    trajectories = read_runs(file, fmt, task, original_kind, verdict_labels)
    place = re.fullmatch(r".*#(\d+)(?:~\d+)?", line.run) if "@" in line.run else None
    if place is not None and int(place.group(1)) < len(trajectories):
        candidate = trajectories[int(place.group(1))]
        if candidate.id == line.trajectory:
            return candidate
    matches = [trajectory for trajectory in trajectories if trajectory.id == line.trajectory]
    if not matches:
        raise InputError(str(file), "id", f"no trajectory {line.trajectory!r} in this file any more")
    return matches[0]
