"""The conformance suite every runtime and every domain runs: the same calls in a world of the runtime under
test and in an in-process world built from the same spec must give the same outcomes, call for call, and the
same final state; and a second world from the same spec must start where the first did (nothing a world did
survives into the next, however the runtime reuses its hosts) and answer the same again.

A plug-in domain or a new runtime runs it from its own tests::

    from litmus_replay.envs import conformance

    def test_my_domain_conforms():
        with get_runtime("sandbox") as runtime:
            conformance.assert_conforms(runtime, [conformance.Case("tickets", spec, calls)])

Per-principal permissions are the kernel's job in an isolated runtime and are tested on their own: the
in-process reference has none, so cases here act as one principal over what it may touch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .domain import Semantics
from .interface import Runtime
from .world import World


@dataclass(frozen=True)
class Case:
    """A world spec and the calls to make in it, as ``(tool, params)`` pairs, by one principal."""

    name: str
    spec: Mapping[str, Any]
    calls: Sequence[tuple[str, Mapping[str, Any]]]
    principal: str = "alice"
    session: str | None = None
    semantics: tuple[Semantics, ...] = field(default=("real",))

    def requests(self) -> list[dict[str, Any]]:
        requests = []
        for index, (tool, params) in enumerate(self.calls):
            request = {"tool": tool, "params": dict(params), "principal": self.principal, "at": float(index)}
            if self.session is not None:
                request["session"] = self.session
            requests.append(request)
        return requests


# The built-in domains' error paths: each refusal must come back the same from every runtime.
_ERROR_PATHS = {
    "files": (
        {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "x", "/workspace/loop": {"symlink": "/workspace/loop"},
                                                     "/workspace/d/f": "y"}}},
        [
            ("read_file", {"path": "/workspace/missing.txt"}),
            ("read_file", {"path": "/workspace/loop"}),
            ("read_file", {"path": "/workspace/a.txt/x"}),
            ("delete_path", {"path": "/workspace/d"}),
            ("list_dir", {"path": "/workspace/a.txt"}),
            ("make_symlink", {"target": "../../../../etc", "link_path": "/workspace/up"}),
            ("read_file", {"path": "/workspace/up/passwd"}),
            ("write_file", {"path": "/workspace/../../outside.txt", "content": "clamped"}),
            ("move_path", {"src": "/workspace/a.txt", "dst": "/workspace/d/g"}),
            ("list_dir", {"path": "/"}),
        ],
    ),
    "records": (
        {"principals": ["alice", "bob"], "records": {"rows": [{"id": 1, "owner": "alice", "data": {"s": "a"}},
                                                              {"id": 2, "owner": "bob", "data": {"s": "b"}}]}},
        [
            ("query_records", {"filter": "s="}),
            ("query_records", {"filter": "owner=alice and"}),
            ("update_record", {"id": 9, "fields": {"s": "z"}}),
            ("update_record", {"id": 2, "fields": {"s": "z"}}),
            ("update_record", {"id": 1, "fields": {"s": "z"}, "if_version": 7}),
            ("delete_records", {"filter": "owner=bob"}),
            ("delete_records", {"filter": {"owner": "alice"}}),
        ],
    ),
    "bank": (
        {"principals": ["alice", "bob"], "bank": {"accounts": {"a": {"owner": "alice", "balance": 10}, "b": {"owner": "bob", "balance": 0}},
                                                   "confirm_above": 5}},
        [
            ("get_balance", {"account": "b"}),
            ("transfer_funds", {"from": "a", "to": "b", "amount": 50}),
            ("transfer_funds", {"from": "a", "to": "nowhere", "amount": 1}),
            ("transfer_funds", {"from": "a", "to": "b", "amount": -1}),
            ("transfer_funds", {"from": "a", "to": "b", "amount": 6}),
            ("confirm_transfer", {"confirmation_id": "cnf-404"}),
            ("confirm_transfer", {"confirmation_id": "cnf-1"}),
            ("confirm_transfer", {"confirmation_id": "cnf-1"}),
        ],
    ),
    "profiles": (
        {"principals": ["alice"], "sessions": {"t": "alice"}, "session": "t", "profiles": {"alice": {"email": "a"}}},
        [
            ("get_profile", {"user": "nobody"}),
            ("update_profile", {"field": "email"}),
            ("update_profile", {"field": "email", "value": "b"}),
        ],
    ),
}

BUILTIN_CASES: tuple[Case, ...] = tuple(Case(name, spec, calls) for name, (spec, calls) in sorted(_ERROR_PATHS.items()))


def check_case(runtime: Runtime, case: Case) -> list[str]:
    """The ways a runtime's worlds differ from the in-process reference on one case (empty: it conforms)."""
    problems: list[str] = []
    for semantics in case.semantics:
        requests = case.requests()
        with World(case.spec, semantics) as reference:
            initial = reference.snapshot()
            want = [reference.call(request) for request in requests]
            final = reference.snapshot()
        for attempt in ("first", "second"):
            with runtime.open_world(case.spec, semantics) as world:
                start = world.snapshot()
                got = [world.call(request) for request in requests]
                end = world.snapshot()
            where = f"{case.name} ({semantics}, {attempt} world)"
            if start != initial:
                problems.append(f"{where}: starts from another state than the reference: {_difference(start, initial)}")
            for request, mine, theirs in zip(requests, got, want):
                if mine != theirs:
                    problems.append(f"{where}: {request['tool']} {request['params']} answered {mine}, "
                                    f"the reference {theirs}")
                    break
            if end != final:
                problems.append(f"{where}: ends in another state than the reference: {_difference(end, final)}")
    return problems


def check(runtime: Runtime, cases: Iterable[Case] = BUILTIN_CASES) -> dict[str, list[str]]:
    """Every case's problems, by case name (each empty where the runtime conforms)."""
    return {case.name: check_case(runtime, case) for case in cases}


def assert_conforms(runtime: Runtime, cases: Iterable[Case] = BUILTIN_CASES) -> None:
    """Raise ``AssertionError`` listing every difference, if there is one."""
    problems = [problem for found in check(runtime, cases).values() for problem in found]
    if problems:
        raise AssertionError(f"the {runtime.name} runtime does not conform:\n" + "\n".join(problems))


def _difference(got: Mapping[str, str], want: Mapping[str, str]) -> str:
    keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
    return ", ".join(f"{k}: {got.get(k)!r} (reference {want.get(k)!r})" for k in keys[:5]) or "(none)"


__all__ = ["BUILTIN_CASES", "Case", "assert_conforms", "check", "check_case"]
