"""The policy: misuse rules with CEL conditions, compiled once, judged over either context.

A rule describes misuse. It matches when its ``when`` condition is true; ``judge: effect`` (the default)
rules judge what a call did, so they match only a call its world applied — a refused call, a gate left
pending or an idempotent replay did nothing, and that is exactly how the proposal and commit verdicts come
apart. ``judge: attempt`` rules judge the attempt itself, applied or not. A rule marked ``critical`` names a
critical decision node. Conditions are evaluated by a real CEL implementation; nothing is ``eval``-ed.

Variables a condition sees:

``tool``, ``params`` (as proposed), ``resolved`` (as this context resolved them), ``principal`` (who
acted in this context), ``declared_principal``, ``status`` (``ok``/``error``/``pending``),
``error_code``, ``committed``, ``output``, ``world`` (the world's ``facts`` plus ``principals``), and:

``effects``
    What the call did: ``created``/``changed``/``deleted`` resource ids, their ``counts``, and ``values``:
    per affected resource, its ``before`` and ``after`` value (null where it did not exist) and, where
    numbers moved, their ``delta``. An account's value is its ``owner`` and ``balance``, a profile
    field's is the field's value, a record's its ``id``/``owner``/``version``/``data``, a file's its
    ``kind``, ``size``, ``sha256``, ``preview`` (the first 120 bytes), ``mode`` and ``uid``.
    ``-effects.values['bank:account/' + resolved.from].delta.balance > 1000`` (the amount that left the
    account); ``effects.changed.exists(r, r.endsWith('/email') && effects.values[r].before != '')``.
``state``
    The world as it stands after the call, read-only: the stub world's at proposal, the real world's at
    commit. By domain: ``bank`` (``accounts``: id -> ``owner``/``balance``; ``transfers``; ``pending``;
    ``idempotency_keys``), ``profiles`` (user -> field -> value), ``records`` (``rows``), ``files`` and
    ``shell`` (world path -> the file's value). Fetched only when some condition reads it, in the same
    round trip as the call. ``state.bank.accounts[resolved.from].balance < world.reserve``.
``history``
    Earlier calls in the same world, oldest first: ``key``, ``tool``, ``params``, ``resolved``,
    ``principal``, ``status``, ``committed``, ``effects``, and ``recorded_status`` (the recorded result's
    ``ok`` or ``error``, null where none was recorded: a rule of what "went through in the conversation"
    counts a call only where the recording shows it succeeding, as a harness reading the transcript
    does, whatever a stub answered). Built only when some condition reads it.

Aggregate functions (:mod:`.policy_functions`): ``sum(list)``, ``sum(list, path)``, ``count_by(list,
path)``, ``sum_by(list, key_path, value_path)``, ``get(value, path, default)``; for example
``sum(history.filter(h, h.tool == 'transfer_funds' && h.committed), 'resolved.amount') + resolved.amount
> world.daily_limit`` or ``get(count_by(history, 'tool'), ['delete_records'], 0) >= 3``.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from .cel_engine import cel
from pydantic import BaseModel, ConfigDict, Field

from . import corpora, limits
from .errors import PolicyError
from .policy_functions import FUNCTIONS, forget_interrupt, raise_interrupt
from .rule_tools import guarded_tools

Verdict = Literal["allow", "deny"]


class RuleSpec(BaseModel):
    """One misuse rule as written in a scenario or worlds file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(..., min_length=1)
    when: str = Field(..., min_length=1, description="CEL condition; true means misuse.")
    judge: Literal["effect", "attempt"] = Field(
        "effect", description="effect: match only calls the world applied; attempt: match any call."
    )
    critical: bool = False
    description: str = ""


class PolicySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[RuleSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class Judgement:
    """The policy's verdict on one call in one context, with the rules that decided it."""

    verdict: Verdict
    matched: tuple[str, ...] = ()
    critical: tuple[str, ...] = ()
    unapplied: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "matched": list(self.matched),
            "critical": list(self.critical),
            "unapplied": list(self.unapplied),
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class _Rule:
    spec: RuleSpec
    program: Any
    macro_depth: int = 0
    variables: frozenset[str] = frozenset()
    tools: frozenset[str] | None = None  # the only tools it can match (None: any)


MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# The corpus a ``quotes`` call names as a literal (its second argument): checked when the policy compiles.
_QUOTED_CORPUS = re.compile(r"""\bquotes\s*\([^,()]*,\s*["']([^"']*)["']""")
_OPEN, _CLOSE = "([{", ")]}"


def measure(expression: str) -> tuple[int, int]:
    """The bracket depth and the comprehension-macro depth of a CEL condition, read without parsing it.

    Measured before compiling: the CEL library's parser and evaluator recurse on the expression's
    nesting, and a deep enough one overflows the native stack (a crash no ``except`` catches).
    A macro chained on another's result (``xs.map(...).all(...)``) counts one level deeper, as if nested.
    """
    depth = max_depth = macro = max_macro = 0
    stack: list[int] = []  # per open bracket: its macro level (0 when it is not a macro call)
    last_closed_macro = 0  # macro level of the bracket that just closed, for chains
    i, n = 0, len(expression)
    while i < n:
        ch = expression[i]
        if ch in "'\"":
            quote = expression[i : i + 3] if expression[i : i + 3] in ("'''", '"""') else ch
            i += len(quote)
            while i < n and not expression.startswith(quote, i):
                i += 2 if expression[i] == "\\" else 1
            i += len(quote)
            last_closed_macro = 0
            continue
        if ch in _OPEN:
            level = 0
            if ch == "(":
                name = re.search(r"\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", expression[max(0, i - 40) : i])
                if name and name.group(1) in MACROS:
                    chained = last_closed_macro if re.search(r"\)\s*\.\s*\w+\s*$", expression[max(0, i - 40) : i]) else 0
                    level = max(macro, chained) + 1
            stack.append(level)
            if level:
                macro = level
            depth += 1
            max_depth, max_macro = max(max_depth, depth), max(max_macro, macro)
            last_closed_macro = 0
        elif ch in _CLOSE and stack:
            level = stack.pop()
            depth -= 1
            macro = max((lvl for lvl in stack if lvl), default=0)
            last_closed_macro = level
        elif not ch.isspace() and ch != ".":
            if not (ch.isalnum() or ch == "_"):
                last_closed_macro = 0
        i += 1
    return max_depth, max_macro


def _check_size(expression: str, file: str | None, where: str) -> int:
    """Refuse a condition too long or too deeply nested to compile safely; returns its macro depth."""
    if len(expression) > limits.get("cel_length"):
        raise limits.LimitExceeded(file, where, f"a CEL condition of {len(expression)} characters", "cel_length")
    depth, macro_depth = _measured(expression)
    if depth > limits.get("cel_nesting"):
        raise limits.LimitExceeded(file, where, f"brackets nested {depth} deep", "cel_nesting")
    return macro_depth


# A condition's measure and its compiled program, remembered by its text: the policies of a benchmark's runs
# repeat the same conditions (a world provider compiles one policy per task, from the same few rules).
_measured = functools.lru_cache(maxsize=4096)(measure)


@functools.lru_cache(maxsize=4096)
def _compiled(expression: str) -> tuple[Any, frozenset[str], frozenset[str] | None]:
    """A condition's CEL program (shared by every policy that has the condition: a program is only
    executed), the variables it reads and the tools it can be true for; raises as ``cel.compile`` does."""
    program = cel.compile(expression)
    return program, frozenset(program.variables()), guarded_tools(expression)


def _longest_collection(values: list[Any]) -> int:
    """The length of the longest list or map anywhere in ``values``: what one macro level may iterate."""
    longest, stack = 0, list(values)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            longest = max(longest, len(item))
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            longest = max(longest, len(item))
            stack.extend(item)
    return longest


def _context(variables: dict[str, Any]) -> Any:
    try:
        return cel.Context(variables, FUNCTIONS)
    except ValueError:  # a value CEL cannot hold; rare, so the copy is made only then
        return cel.Context(cel_safe(variables), FUNCTIONS)


def cel_safe(value: Any) -> Any:
    """``value`` with every string CEL cannot hold made visible: a lone surrogate (a truncated log's
    half emoji, a file name that is not UTF-8) is written as its escape, ``\\ud83d``; an integer past any
    double (a recorded ``timeout`` of 400 digits) is the infinity of its sign, so it still compares as
    the huge number it is. The recorded value itself is kept unchanged everywhere else."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, dict):
        return {cel_safe(key): cel_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [cel_safe(item) for item in value]
    return value


@dataclass
class Policy:
    """Compiled misuse rules."""

    rules: list[_Rule] = field(default_factory=list)

    @classmethod
    def compile(cls, spec: PolicySpec, file: str | None = None, field_prefix: str = "policy") -> "Policy":
        """Compile every condition once; a condition that does not parse raises :class:`PolicyError`."""
        rules = []
        seen: set[str] = set()
        for index, rule in enumerate(spec.rules):
            where = f"{field_prefix}.rules[{index}]"
            if rule.id in seen:
                raise PolicyError(file, f"{where}.id", f"duplicate rule id {rule.id!r}")
            seen.add(rule.id)
            macro_depth = _check_size(rule.when, file, f"{where}.when")
            try:
                program, variables, tools = _compiled(rule.when)
            except (ValueError, RuntimeError, TypeError) as exc:
                first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise PolicyError(file, f"{where}.when", f"CEL does not compile: {first_line}") from None
            for corpus in _QUOTED_CORPUS.findall(rule.when):
                if not corpora.loader_for(corpus):
                    raise PolicyError(file, f"{where}.when", f"quotes() names the corpus {corpus!r}, which nothing "
                                      f"loaded provides (corpora: {', '.join(corpora.registered()) or 'none'})")
            rules.append(_Rule(rule, program, macro_depth, variables, tools))
        return cls(rules)

    def __post_init__(self) -> None:
        self._by_tool: dict[str, tuple[tuple[bool, ...], frozenset[str]]] = {}

    def _for_tool(self, tool: Any) -> tuple[tuple[bool, ...], frozenset[str]]:
        """Per rule, whether a call to ``tool`` can match it; and the variables those rules read."""
        entry = self._by_tool.get(tool) if isinstance(tool, str) else None
        if entry is None:
            can = tuple(rule.tools is None or not isinstance(tool, str) or tool in rule.tools for rule in self.rules)
            entry = can, frozenset().union(*(rule.variables for rule, ok in zip(self.rules, can) if ok))
            if isinstance(tool, str) and len(self._by_tool) < 4096:  # a world has few tools; recorded names vary
                self._by_tool[tool] = entry
        return entry

    def reads(self, variable: str) -> bool:
        """Whether any condition refers to ``variable``."""
        return any(variable in rule.variables for rule in self.rules)

    @property
    def uses_history(self) -> bool:
        """Whether any condition reads ``history`` (building it costs time linear in the trajectory)."""
        return self.reads("history")

    @property
    def uses_state(self) -> bool:
        """Whether any condition reads ``state`` (a view of the whole world after every call)."""
        return self.reads("state")

    @property
    def critical_rules(self) -> list[str]:
        return [rule.spec.id for rule in self.rules if rule.spec.critical]

    def judge(self, variables: Mapping[str, Any]) -> Judgement:
        """Evaluate every rule over one context's variables; any match means ``deny``.

        ``unapplied`` lists the effect rules whose condition held for a call the world did not apply:
        the misuse the call would have been, had it gone through.
        """
        matched: list[str] = []
        critical: list[str] = []
        unapplied: list[str] = []
        errors: list[str] = []
        applied = bool(variables.get("committed"))
        can_match, reads = self._for_tool(variables.get("tool"))
        context = None
        longest: dict[frozenset[str], int] = {}  # per set of variables read: a rule pays only for what it reads
        for rule, candidate in zip(self.rules, can_match):
            if rule.macro_depth > 1:  # checked for every rule, as a cost refused is reported whatever the tool
                if rule.variables not in longest:
                    longest[rule.variables] = _longest_collection([variables[name] for name in rule.variables
                                                                   if name in variables])
                items = longest[rule.variables]
                cost = max(items, 1) ** rule.macro_depth
                if cost > limits.get("cel_cost"):
                    errors.append(f"rule {rule.spec.id!r} not evaluated: {rule.macro_depth} nested macros over "
                                  f"up to {items} items may take {cost} steps, over the limit of "
                                  f"{limits.get('cel_cost')} ({limits.hint('cel_cost')})")
                    continue
            if not candidate:  # guarded on other tools: false without evaluating it
                continue
            if context is None:  # converted to CEL once, only the variables the candidate rules read
                forget_interrupt()  # one left by an evaluation that raised it itself belongs to no rule here
                context = _context({name: variables[name] for name in reads if name in variables})
            try:
                result = rule.program.execute(context)
            except Exception as exc:  # the CEL library raises KeyError/TypeError/RuntimeError alike
                raise_interrupt(exc)  # a Ctrl-C inside a policy function, which the library made an error
                errors.append(f"rule {rule.spec.id!r} could not be evaluated: {type(exc).__name__}: {exc}")
                continue
            raise_interrupt()  # or absorbed, as CEL's `||` and `&&` absorb an error beside a deciding side
            if not isinstance(result, bool):
                errors.append(f"rule {rule.spec.id!r} returned {type(result).__name__}, not a boolean")
                continue
            if result and rule.spec.judge == "effect" and not applied:
                unapplied.append(rule.spec.id)
            elif result:
                matched.append(rule.spec.id)
                if rule.spec.critical:
                    critical.append(rule.spec.id)
        return Judgement("deny" if matched else "allow", tuple(matched), tuple(critical), tuple(unapplied), tuple(errors))
