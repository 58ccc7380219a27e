"""Mutation operators generic over call arguments, so a plug-in domain gets them without a line of its own:
numbers moved to a rule's or the world's boundary, strings swapped for another value the run saw (another
principal's name inside an id or a path), calls dropped, duplicated, reordered or made a turn earlier, and
the acting principal or ambient session swapped.

An operator *proposes* every edit it can make to a seed (a finite, sorted list: the search picks among them)
and *applies* one edit to a draft. Proposals use only plausible values (:mod:`.plausible`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

from litmus_replay.envs.plugins import PluginGroup

from .draft import ORIGIN, Draft, Edit, NotApplicable, edit
from .plausible import is_plausible, words
from .seed import Seed
from .verdict import COPY_MARK

__all__ = ["OPERATORS", "OPERATOR_GROUP", "Operator", "operator", "propose_all", "registered_operators"]


class Operator:
    """A named family of edits: ``propose(seed)`` lists them, ``apply(draft, edit)`` makes one."""

    name = ""
    description = ""

    def propose(self, seed: Seed) -> list[Edit]:
        raise NotImplementedError

    def apply(self, draft: Draft, change: Edit) -> None:
        raise NotImplementedError


OPERATORS: dict[str, Operator] = {}
# Operators that know a plug-in domain's boundaries register as the built-in domains' do (``@operator``),
# in a module this entry-point group names; one that fails to import costs only its own operators.
OPERATOR_GROUP = "litmus_replay.nearmiss_operators"
_PLUGINS = PluginGroup(OPERATOR_GROUP, "near-miss operator")


def operator(cls: type[Operator]) -> type[Operator]:
    OPERATORS[cls.name] = cls()
    return cls


def registered_operators() -> dict[str, Operator]:
    """Every operator: the generic ones, the built-in domains', and those plug-ins register."""
    _PLUGINS.load()
    return OPERATORS


def propose_all(seed: Seed) -> list[Edit]:
    """Every operator's proposals, interleaved round-robin so any prefix holds every family."""
    lists = [list(dict.fromkeys(op.propose(seed))) for op in registered_operators().values()]
    out: list[Edit] = []
    for index in range(max((len(l) for l in lists), default=0)):
        out.extend(l[index] for l in lists if index < len(l))
    return out


def apply_edits(seed: Seed, edits: tuple[Edit, ...]) -> Draft:
    draft = seed.draft.copy()
    for change in edits:
        registered_operators()[change.operator].apply(draft, change)
    return draft


# -- arguments --------------------------------------------------------------------------------------------


def leaf_arguments(arguments: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(field, value) for every top-level argument and every value one level inside a mapping argument."""
    for name, value in arguments.items():
        if isinstance(value, dict):
            for inner, item in value.items():
                if not isinstance(item, (dict, list)):
                    yield f"{name}.{inner}", item
        elif not isinstance(value, list):
            yield name, value


def set_argument(call: dict[str, Any], field: str, value: Any) -> None:
    arguments = call.setdefault("arguments", {})
    name, _, inner = field.partition(".")
    if inner:
        if not isinstance(arguments.get(name), dict):
            raise NotApplicable(field)
        arguments[name] = {**arguments[name], inner: value}
    elif value is None:
        arguments.pop(name, None)
    else:
        arguments[name] = value


def get_argument(call: dict[str, Any], field: str) -> Any:
    name, _, inner = field.partition(".")
    value = call.get("arguments", {}).get(name)
    return value.get(inner) if inner and isinstance(value, dict) else value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def change_argument(draft: Draft, change: Edit) -> None:
    """Set one argument of one call to the edit's value. The call's recorded result goes: it answered other
    arguments, and what the harness would have answered these is what the stub replay shows."""
    _, _, call = draft.find(change.target)
    set_argument(call, change.field, change.param())
    call.pop("result", None)


class _ArgumentOperator(Operator):
    """Sets one argument of one call to a new value: the edit's value."""

    def apply(self, draft: Draft, change: Edit) -> None:
        change_argument(draft, change)


@operator
class Boundary(_ArgumentOperator):
    name = "boundary"
    description = "a number moved to, just below or just above a threshold in a rule or the world"

    def propose(self, seed: Seed) -> list[Edit]:
        proposals = []
        for _, _, call in seed.draft.calls():
            for field, value in leaf_arguments(call.get("arguments", {})):
                if not _is_number(value):
                    continue
                for bound in (b for b in seed.seen.boundaries if b.applies_to(field)):
                    for variant, new in (("just-below", bound.value - 1), ("at", bound.value), ("just-above", bound.value + 1)):
                        new = int(new) if isinstance(value, int) and float(new).is_integer() else new
                        if new == value or new < 0:
                            continue
                        proposals.append(edit(self.name, call[ORIGIN], field, variant, new,
                                              f"{call[ORIGIN]} {field} {value} -> {new} ({variant} {_num(bound.value)}, "
                                              f"{bound.source})"))
        return _first_per(proposals, lambda e: (e.target, e.field, e.value))


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _first_per(proposals: list[Edit], key: Callable[[Edit], Any]) -> list[Edit]:
    kept: dict[Any, Edit] = {}
    for proposal in proposals:
        kept.setdefault(key(proposal), proposal)
    return list(kept.values())


def shape(text: str) -> str:
    """A string's shape, to swap like for like: a path, or its letters, digits and punctuation pattern."""
    if text.startswith("/"):
        return "path"
    return re.sub(r"[0-9]+", "9", re.sub(r"[A-Za-z_]+", "a", text))


@operator
class Swap(_ArgumentOperator):
    name = "swap"
    description = "a string swapped for another value the run saw: another principal's name inside it, or a value of the same shape"

    MAX_PER_ARGUMENT = 6

    def propose(self, seed: Seed) -> list[Edit]:
        proposals = []
        principals = seed.seen.principals
        domain_values = sorted(v for v in seed.seen.values if len(v) <= 120 and "\n" not in v)
        for _, _, call in seed.draft.calls():
            shell = seed.domain_call(call)[0] == "run_command"
            for field, value in leaf_arguments(call.get("arguments", {})):
                if not isinstance(value, str) or not value:
                    continue
                found: list[tuple[str, str, str]] = []
                for who in words(value):
                    if who in principals:
                        for other in principals:
                            if other != who:
                                new = re.sub(rf"\b{re.escape(who)}\b", other, value)
                                found.append(("principal", new, f"{who} -> {other}"))
                for other in sorted(seed.seen.fields.get(field.split(".")[-1], set())):
                    if other != value and "\n" not in other:  # another value seen under the same name
                        found.append(("same-field", other, f"{value!r} -> {other!r}"))
                for other in domain_values if shape(value) != "a" else ():  # a bare word has no shape to keep
                    if other != value and shape(other) == shape(value) and len(found) < self.MAX_PER_ARGUMENT * 2:
                        found.append(("value", other, f"{value!r} -> {other!r}"))
                if re.fullmatch(r"\w*[A-Za-z]\w*", value) and re.search(r"\d", value):  # an id, an IBAN: one word
                    for other in sorted(seed.seen.words):  # another id of its shape, met inside some output's text
                        if other != value and shape(other) == shape(value) and abs(len(other) - len(value)) <= 2:
                            found.append(("value", other, f"{value!r} -> {other!r}"))
                for variant, new, how in found[: self.MAX_PER_ARGUMENT]:
                    if new != value and is_plausible(new, seed.seen, shell):
                        proposals.append(edit(self.name, call[ORIGIN], field, variant, new, f"{call[ORIGIN]} {field}: {how}"))
        return _first_per(proposals, lambda e: (e.target, e.field, e.value))


_FILTER = re.compile(r"^\s*(\w+)\s*(!=|==|=)\s*(\S.*?)\s*$")


@operator
class Filter(_ArgumentOperator):
    name = "filter"
    description = "a filter widened to every row, or matching another value of its field (one owned by someone else)"

    def propose(self, seed: Seed) -> list[Edit]:
        proposals = []
        for _, _, call in seed.draft.calls():
            for field, value in leaf_arguments(call.get("arguments", {})):
                match = _FILTER.match(value) if isinstance(value, str) else None
                if match is None and value != "*":
                    continue
                news = [] if value == "*" else [("every-row", "*")]
                if match is not None:
                    key, op, current = match.groups()
                    others = sorted(seed.seen.fields.get(key, set()) - {current.strip("'\"")})
                    news += [("other-value", f"{key}{op}{other}") for other in others if re.fullmatch(r"[\w@.+-]+", other)][:4]
                else:
                    news += [("one-field", f"{key}={other}") for key in ("owner",) for other in seed.seen.principals][:3]
                for variant, new in news:
                    if is_plausible(new, seed.seen):
                        proposals.append(edit(self.name, call[ORIGIN], field, variant, new,
                                              f"{call[ORIGIN]} {field} {value!r} -> {new!r}"))
        return proposals


@operator
class Drop(Operator):
    name = "drop"
    description = "a call left out"

    def propose(self, seed: Seed) -> list[Edit]:
        return [edit(self.name, call[ORIGIN], "", "dropped", None, f"{call[ORIGIN]} {call['tool']} left out")
                for _, _, call in seed.draft.calls()]

    def apply(self, draft: Draft, change: Edit) -> None:
        t, c, _ = draft.find(change.target)
        del draft.turns[t]["calls"][c]


@operator
class Duplicate(Operator):
    name = "duplicate"
    description = "a call made twice in a row"

    def propose(self, seed: Seed) -> list[Edit]:
        return [edit(self.name, call[ORIGIN], "", "repeated", None, f"{call[ORIGIN]} {call['tool']} made twice")
                for _, _, call in seed.draft.calls()]

    def apply(self, draft: Draft, change: Edit) -> None:
        t, c, call = draft.find(change.target)
        twin = {**call, ORIGIN: f"{change.target}{COPY_MARK}again"}
        twin.pop("id", None)
        draft.turns[t]["calls"].insert(c + 1, twin)


@operator
class Reorder(Operator):
    name = "reorder"
    description = "two neighbouring calls made in the other order"

    def propose(self, seed: Seed) -> list[Edit]:
        calls = [call for _, _, call in seed.draft.calls()]
        return [edit(self.name, first[ORIGIN], "", "swapped", second[ORIGIN],
                     f"{first[ORIGIN]} {first['tool']} and {second[ORIGIN]} {second['tool']} made in the other order")
                for first, second in zip(calls, calls[1:])]

    def apply(self, draft: Draft, change: Edit) -> None:
        t1, c1, first = draft.find(change.target)
        t2, c2, second = draft.find(change.param())
        draft.turns[t1]["calls"][c1], draft.turns[t2]["calls"][c2] = second, first


@operator
class Earlier(Operator):
    name = "earlier"
    description = "a call made a turn earlier"

    def propose(self, seed: Seed) -> list[Edit]:
        return [edit(self.name, call[ORIGIN], "", "turn-earlier", None, f"{call[ORIGIN]} {call['tool']} made a turn earlier")
                for t, _, call in seed.draft.calls() if t > 0]

    def apply(self, draft: Draft, change: Edit) -> None:
        t, c, call = draft.find(change.target)
        if t == 0:
            raise NotApplicable(change.target)
        del draft.turns[t]["calls"][c]
        draft.turns[t - 1].setdefault("calls", []).append(call)


@operator
class Principal(Operator):
    name = "principal"
    description = "the run acting as another principal, or carrying another user's (or no live) session token"

    def propose(self, seed: Seed) -> list[Edit]:
        proposals = []
        declared = seed.draft.trajectory["principal"]
        for other in seed.seen.principals:
            if other != declared:
                proposals.append(edit(self.name, "trajectory", "principal", "declared", other,
                                      f"the run acts for {other} instead of {declared}"))
        sessions = {str(k): str(v) for k, v in (seed.world.get("sessions") or {}).items()}
        current = seed.draft.trajectory.get("ambient_session")
        for token, owner in sorted(sessions.items()):
            if token != current:
                variant = "own-session" if owner == declared else "other-session"
                proposals.append(edit(self.name, "trajectory", "ambient_session", variant, token,
                                      f"the ambient session token is {owner}'s ({token})"))
        if current is not None and current in sessions:
            proposals.append(edit(self.name, "world", "sessions", "expired", current,
                                  f"the ambient session {current} has expired"))
        elif current is not None:
            for owner in seed.seen.principals:
                proposals.append(edit(self.name, "world", "sessions", "renewed", [current, owner],
                                      f"the ambient session {current} is live, as {owner}'s"))
        return proposals

    def apply(self, draft: Draft, change: Edit) -> None:
        value = change.param()
        if change.field == "principal":
            draft.trajectory["principal"] = value
        elif change.field == "ambient_session":
            draft.trajectory["ambient_session"] = value
        elif change.variant == "renewed":
            token, owner = value
            draft.world["sessions"] = {**(draft.world.get("sessions") or {}), token: owner}
        else:
            sessions = dict(draft.world.get("sessions") or {})
            if sessions.pop(value, None) is None:
                raise NotApplicable(change.where)
            draft.world["sessions"] = sessions
