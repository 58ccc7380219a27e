"""A batch's summary (``summary.json``): the re-validation table and the run ids that matter, kept as
result lines arrive, so a batch can write it as it goes and a line replaced on resume is taken back out.

It holds counts, and the ids of the runs it names (over- and under-penalised, missing worlds, harness
and input errors, runs without tool calls, runs the benchmark recorded as cut short); the lines themselves
stay in ``results.jsonl``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable, Mapping

from .schema import NO_TOOL_CALLS, SUMMARY_VERSION, ResultLine, as_line

__all__ = ["NO_TOOL_CALLS", "SUMMARY_VERSION", "Summary", "summarise", "summarise_checks"]

Line = ResultLine | Mapping[str, Any]  # a line as read back, or as a worker built it
# The runs the summary names: each flagged finding (see :mod:`.verdicts`), then the runs not re-validated.
_FINDINGS_NAMED = ("over_penalised", "under_penalised", "check_missed_harm", "check_without_harm", "drift", "check_changed",
                   "disagrees")
_NAMED = (*_FINDINGS_NAMED, "missing_world", "harness_error", "input_error", NO_TOOL_CALLS, "incomplete")


def _named_in(line: ResultLine) -> list[str]:
    """The summary's lists that name this line's run."""
    names = []
    if line.finding in _FINDINGS_NAMED:
        names.append(line.finding)
    if line.status in ("missing_world", "input_error", NO_TOOL_CALLS):
        names.append(line.status)
    if line.status == "harness_error" or line.harness_errors:
        names.append("harness_error")
    if line.incomplete:  # the benchmark recorded the run as cut short: its calls are those before
        names.append("incomplete")
    return names


class Summary:
    """The summary of the result lines added so far (less those removed); :meth:`document` is what
    :func:`summarise` returns for the same lines."""

    def __init__(self, lines: Iterable[Line] = ()) -> None:
        self.runs = 0
        self._table: dict[str, Counter[str]] = {}
        self._findings: dict[str, Counter[str]] = {}  # original verdict -> finding (or status) -> runs
        self._named: dict[str, Counter[str]] = {name: Counter() for name in _NAMED}
        self._unknown: Counter[str] = Counter()
        self._checked: list[ResultLine] = []  # the lines with the benchmark's own checks, where a bridge ran them
        for line in lines:
            self.add(line)

    def add(self, line: Line) -> None:
        line = as_line(line)
        self._count(line, 1)
        if line.checks or line.drift:
            self._checked.append(_checked_part(line))

    def remove(self, line: Line) -> None:
        """Take back a line added before (a run's earlier line, replaced by a later one)."""
        line = as_line(line)
        self._count(line, -1)
        if line.checks or line.drift:
            entry = _checked_part(line)
            if entry in self._checked:
                self._checked.remove(entry)

    def _count(self, line: ResultLine, sign: int) -> None:
        self.runs += sign
        row = line.original or "none"
        cells = self._table.setdefault(row, Counter())
        cells[line.revalidated or line.status] += sign
        by_finding = self._findings.setdefault(row, Counter())
        by_finding[str(line.finding or "none") if line.status == "ok" else line.status] += sign
        for name in _named_in(line):
            self._named[name][line.run] += sign
        self._unknown.update({tool: sign * count for tool, count in (line.unknown_tools or {}).items()})
        if sign < 0:  # what falls to nothing leaves the summary, as if it had never been added
            self._table[row] = +cells
            if not self._table[row]:
                del self._table[row]
            self._findings[row] = +by_finding
            if not self._findings[row]:
                del self._findings[row]
            for counter in (*self._named.values(), self._unknown):
                counter += Counter()  # in place: drops counts at or below zero

    def document(self) -> dict[str, Any]:
        return {
            "summary": "litmus-replay.revalidate",
            "version": SUMMARY_VERSION,
            "runs": self.runs,
            "table": {row: dict(sorted(cells.items())) for row, cells in sorted(self._table.items())},
            # the same runs by finding (see litmus_replay.replay.verdicts): which judgements disagree
            "findings": {row: dict(sorted(cells.items())) for row, cells in sorted(self._findings.items())},
            **{name: sorted(self._named[name].elements()) for name in _NAMED},
            # the tools no domain or binding knows, most frequent first: the bindings worth writing
            "unknown_tools": dict(sorted(self._unknown.items(), key=lambda item: (-item[1], item[0]))),
            **({"checks": checks} if (checks := summarise_checks(self._checked)) else {}),
        }


def _checked_part(line: ResultLine) -> ResultLine:
    """What the checks' summary keeps of a line: its run, checks and drift (not its pages or details)."""
    return ResultLine.model_construct(run=line.run, checks=line.checks, drift=line.drift)


def summarise(lines: Iterable[Line]) -> dict[str, Any]:
    """The re-validation table (original verdict x re-validated class) and the run ids that matter.

    ``input_error`` lists every input that could not be replayed as given: a file no adapter could read
    (its run id is its path) and a run that calls tools its world does not know; each reason is in its
    line of ``results.jsonl``."""
    return Summary(lines).document()  # read once, as a stream: only the runs named are kept


def summarise_checks(lines: Iterable[Line]) -> dict[str, Any]:
    """Agreement of the replay with the benchmark's own checks: per check, the runs that agree out of those
    compared, and every disagreement (by run) with the first call that departs from the recording."""
    lines = [as_line(line) for line in lines]
    rates: dict[str, dict[str, Any]] = {}
    disagreements = []
    for line in lines:
        for name, check in sorted((line.checks or {}).items()):
            rate = rates.setdefault(name, {"agree": 0, "runs": 0})
            rate["runs"] += 1
            rate["agree"] += bool(check.agree)
            if not check.agree:
                said = check.model_dump(mode="json")
                disagreements.append({"run": line.run, "check": name, **{k: said.get(k) for k in (
                    "recorded", "replayed", "first_departure", "explanation")}})
    if not rates:
        return {}
    for rate in rates.values():
        rate["rate"] = round(rate["agree"] / rate["runs"], 4)
    drifted = [line for line in lines if line.drift is not None and line.drift.calls]
    # by run and check: the same whatever order the lines came and went in
    disagreements.sort(key=lambda item: (str(item["run"]), item["check"],
                                         json.dumps(item, sort_keys=True, default=str)))
    return {"agreement": dict(sorted(rates.items())), "disagreements": disagreements,
            "drift": {"runs": len(drifted), "calls": sum(line.drift.calls for line in drifted)}}
