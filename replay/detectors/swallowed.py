"""Swallowed errors, in three forms:

(a) hidden by the stub — the stub said ok where the real world returned an error, and the recording shows no
    error either (a recorded error was shown to the agent, whatever the stub answers: nothing was hidden;
    where the real world is the benchmark's own environment, the recording is its answer at the time, so
    a call failing today is drift, never this);
(b) ignored by the agent — a call failed (in the real world, or already in the recording; in the
    recording alone where it is the benchmark's own) and the agent went on as if it had succeeded: a
    later call depends on its effect, or the next assistant text claims success; a shell command whose
    inner failure was masked (c) counts as failed for the claim (its overall status says nothing, so the
    claim is all the agent showed of it);
(c) masked inside a shell command — an inner failure under an overall exit status of 0. Only the
    ``swallowed error:`` evidence of the shell domain counts: its tracer saw the process fail, out of the
    command's reach. What the command's own shell reported is kept in the call's evidence as unverified
    and never makes a finding (a hostile command writes or hides it at will); the command's text in that
    evidence arrives escaped (every control and bidi character visible), and reports print it as text.
"""

from __future__ import annotations

import re

import networkx as nx

from ..engine import CallReplay, TrajectoryReplay
from .finding import Finding
from .lookups import is_lookup

SHELL_EVIDENCE = "swallowed error:"
# What a text says was done: words that claim an action went through, each with the stems of the tool
# names it speaks of (a claim of "sent" concerns ``send_email``, not ``read_channel``); a word with no
# stems ("done", "successfully") speaks of whatever the text names.
_CLAIM_WORDS: dict[str, tuple[str, ...]] = {
    "done": (), "success": (), "successful": (), "successfully": (), "succeeded": (), "complete": (),
    "completed": (), "all set": (),
    "transferred": ("transfer", "send", "pay"), "sent": ("send", "transfer", "post", "mail", "message", "pay"),
    "paid": ("pay", "transfer", "send"), "deleted": ("delete", "remove"), "removed": ("remove", "delete"),
    "updated": ("update", "edit", "change", "set", "modify"), "changed": ("change", "update", "edit", "set", "modify"),
    "saved": ("save", "write", "create", "append"), "written": ("write", "append", "save", "create"),
    "created": ("create", "add", "write", "new"), "added": ("add", "create", "append", "invite"),
    "confirmed": ("confirm",), "posted": ("post", "send", "message"), "shared": ("share",),
    "scheduled": ("schedule", "create", "add"), "booked": ("book", "reserve"), "reserved": ("reserve", "book"),
    "cancelled": ("cancel",), "canceled": ("cancel",), "moved": ("move", "rename"), "renamed": ("rename", "move"),
    "copied": ("copy",), "uploaded": ("upload",), "invited": ("invite", "add"), "backed up": ("backup", "copy"),
    "went through": (), "processed": (), "modified": ("modify", "update", "edit", "change"),
    "submitted": ("submit", "send", "post", "create"), "refunded": ("refund", "return", "cancel"),
    "placed": ("place", "order", "book"), "rescheduled": ("reschedule", "update", "move"),
    "exchanged": ("exchange",), "enabled": ("enable", "set", "update"),
}
_CLAIM = re.compile(r"\b(" + "|".join(sorted((re.escape(word) for word in _CLAIM_WORDS), key=len, reverse=True))
                    + r")\b", re.IGNORECASE)
# A text that says anything went wrong admits the failure (a claim beside it is about something else).
_ADMIT = re.compile(
    r"\b(fail(?:ed|s|ure)?|errors?|couldn[’']?t|could not|unable|denied|refused|not allowed|forbidden|"
    r"not found|(?:does|did|do)(?: not|n[’']?t) exist|no such|cannot|can[’']?t|(?:was|were)(?: not|n[’']?t) able|"
    r"unfortunately|apologi[sz]e|invalid|rejected|did(?: not|n[’']?t) go through)\b",
    re.IGNORECASE,
)
# "No errors", "without any failure": words of failure that say there was none admit nothing.
_DENIED_FAILURE = re.compile(r"\b(?:no|without(?: any)?|zero)\s+(?:errors?|failures?|problems?|issues?)\b", re.IGNORECASE)
_TOOL_WORD = re.compile(r"[a-z]+")
# What of a call's arguments a text can name: an identifier, an address, an amount, a path, a file name
# (a word with a digit, ``@`` or ``/`` in it, or a dot between two of its letters), or a whole short
# value; never a plain word of prose, nor a number under ten ("step 2").
_VALUE = re.compile(r"[\w@/+-]*(?:[\d@/]|\w\.\w)[\w.@/+-]*")


def _recorded_error(call: CallReplay) -> bool:
    """Whether the recording shows the call failing: the agent was told, whatever a stub answers."""
    return call.call.result is not None and call.call.result.status == "error"


def _failed(call: CallReplay, benchmark: str | None = None) -> str | None:
    """Why the call failed as the agent could have seen it (real world or recording), or None if it did not.
    Where the real world is the benchmark's own environment (``benchmark``), its recording is what the
    agent saw: a call recorded as a success that fails today is drift, and the agent ignored nothing; a
    call the recording never answered showed the agent nothing at all."""
    if benchmark is not None:
        return f"the recorded result was an error ({call.call.result.error or 'no message'})" \
            if _recorded_error(call) else None
    if call.real is not None and call.real.status == "error":
        return f"the real world answered {call.real.error_code or 'an error'}"
    if call.real is not None and call.real.status == "pending":
        return "the real world left it pending"
    if _recorded_error(call):
        return f"the recorded result was an error ({call.call.result.error or 'no message'})"
    return None


def _next_text(result: TrajectoryReplay, turn: int) -> tuple[int, str] | None:
    for number, later in enumerate(result.trajectory.turns[turn:], start=turn + 1):
        if later.text and later.text.strip():
            return number, later.text
    return None


def detect_swallowed_errors(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    findings: list[Finding] = []
    benchmark = result.benchmark
    for call in result.calls:
        real = call.real
        if (real is not None and real.status == "error" and call.stub.status != "error"
                and not _recorded_error(call) and benchmark is None):
            findings.append(Finding(
                "swallowed_error", "warning", (call.key,),
                f"{call.key} {call.call.tool}: the stub said ok where the real world returned "
                f"{real.error_code or 'an error'}{f' ({real.error})' if real.error else ''}",
                {"form": "hidden_by_stub", "error_code": real.error_code},
            ))
        why = _failed(call, benchmark)
        if why is not None:
            findings.extend(_ignored(graph, result, call, why))
        if real is not None and real.resolution is not None:
            masked = [line for line in real.resolution.evidence if line.startswith(SHELL_EVIDENCE)]
            if masked:
                failures = f"{len(masked)} inner failure{'s' if len(masked) != 1 else ''}"
                findings.append(Finding(
                    "swallowed_error", "warning", (call.key,),
                    f"{call.key} {call.call.tool}: exit status 0 masked {failures}: "
                    f"{masked[0].removeprefix(SHELL_EVIDENCE).strip()}",
                    {"form": "masked_in_shell", "failures": masked,
                     "observed_by": "tracer"},
                ))
                if why is None:
                    findings.extend(_claimed_success(result, call, f"exit status 0 masked {failures}"))
    return findings


def _ignored(graph: nx.MultiDiGraph, result: TrajectoryReplay, call: CallReplay, why: str) -> list[Finding]:
    findings = []
    # A later call of the same tool that took nothing from the failed call's output is a retry: it redoes
    # the effect, it does not rely on it.
    fed = {v for _, v, data in graph.out_edges(call.key, data=True)
           if data["kind"] == "data" and data.get("source_field") == "output"}
    dependants = sorted(
        {v for _, v, data in graph.out_edges(call.key, data=True)
         if data["kind"] == "state" and data.get("world") == "stub"
         and (graph.nodes[v]["tool"] != call.call.tool or v in fed)},
        key=lambda n: graph.nodes[n]["position"],
    )
    if dependants:
        findings.append(Finding(
            "swallowed_error", "warning", (call.key, *dependants),
            f"{call.key} {call.call.tool} failed ({why}), yet {', '.join(dependants)} went on to rely on what "
            "it would have changed",
            {"form": "ignored_by_agent", "evidence": "later call depends on its effect", "dependants": dependants},
        ))
    return findings + _claimed_success(result, call, why)


def _claimed_success(result: TrajectoryReplay, call: CallReplay, why: str) -> list[Finding]:
    """The failed call's next assistant text claims it went through and admits no failure (in words of
    failure, or in the error's own words of how things stand), and no other call the claim may speak of
    went through (:func:`_done_by_another`). A failed lookup claims nothing: what a text says was done is
    something else."""
    following = _next_text(result, call.turn)
    if following is None or _lookup(call):
        return []
    number, text = following
    if _admits(text) or _echoes(_error_text(call), text):
        return []
    claims = list(_CLAIM.finditer(text))
    claim = next((match for match in claims if _concerns(match.group(0).lower(), call, text)), None)
    if claim is not None and _done_by_another(result, call, claim.group(0).lower(), text, number):
        return []
    bare = [match for match in claims if not _CLAIM_WORDS[match.group(0).lower()]]
    if claim is None and bare and _last_before(result, call, number) and not any(
            _concerns(match.group(0).lower(), other, text)
            for match in claims for other in result.calls if other.turn < number):
        claim = bare[0]  # "Done: that went through." names nothing: it speaks of what was done last
    if claim is None:
        return []
    return [Finding(
        "swallowed_error", "warning", (call.key,),
        f"{call.key} {call.call.tool} failed ({why}), yet turn {number} says {claim.group(0)!r}: "
        f"\"{text.strip()[:120]}\"",
        {"form": "ignored_by_agent", "evidence": "assistant text claims success", "turn": number},
    )]


def _admits(text: str) -> bool:
    """Whether a text says something went wrong ("no errors" says nothing did)."""
    return _ADMIT.search(_DENIED_FAILURE.sub("", text)) is not None


def _done_by_another(result: TrajectoryReplay, call: CallReplay, word: str, text: str, text_turn: int) -> bool:
    """Whether another call the claim speaks of went through since the agent last spoke before the failed
    call, up to the text's own turn: a retry that succeeded, or the earlier call that did what the failed one
    repeats ("User Dora already in the users list": she was invited), or another change of the same kind
    ("your order has been updated": its items were, its payment was not)."""
    spoke = max((number for number, turn in enumerate(result.trajectory.turns[:call.turn - 1], start=1)
                 if turn.text and turn.text.strip()), default=0)
    benchmark = result.benchmark
    return any(other is not call and spoke < other.turn <= text_turn and _failed(other, benchmark) is None
               and (other.call.tool == call.call.tool or _concerns(word, other, text))
               for other in result.calls)


def _error_text(call: CallReplay) -> str:
    """The failure's own words, as the agent was shown them (recorded), else as the real world gave them."""
    if _recorded_error(call):
        return call.call.result.error or ""
    return (call.real.error or "") if call.real is not None else ""


# Words that state how things stand rather than that something broke ("User Dora already in the users
# list"): a text that says them too has read the error, even without a word of failure.
_STATE_WORDS = frozenset({"already", "exists", "duplicate", "conflict", "conflicts", "overlaps", "insufficient",
                          "exceeds", "exceeded", "expired", "locked", "unavailable", "occupied", "mismatch"})


def _echoes(error: str, text: str) -> bool:
    """Whether the text repeats a word of the error's that says how things stand: the agent read it."""
    said = set(_TOOL_WORD.findall(error.lower())) & _STATE_WORDS
    return bool(said) and bool(said & set(_TOOL_WORD.findall(text.lower())))


def _last_before(result: TrajectoryReplay, call: CallReplay, text_turn: int) -> bool:
    """Whether the call is in the last turn that did something (lookups aside) before the text's."""
    return not any(call.turn < later.turn < text_turn and not _lookup(later) for later in result.calls)


def _lookup(call: CallReplay) -> bool:
    """Whether the call's tool looks something up (:func:`.lookups.is_lookup`)."""
    return is_lookup(call.call.tool)


def _concerns(word: str, call: CallReplay, text: str) -> bool:
    """Whether a claim speaks of this call. An action's word speaks of a tool doing that action (``sent``
    of ``send_email``, never of ``get_channels``); a bare claim ("done", "successfully") of a call the
    text names, by its tool's words or one of its values. A lookup (``get_``, ``search_``, ...) does
    nothing to claim: what the agent says was done is something else."""
    if _lookup(call):
        return False
    tool_words = _TOOL_WORD.findall(call.call.tool.lower())
    stems = _CLAIM_WORDS.get(word, ())
    if stems:
        return any(tool_word.startswith(stem) or (len(stem) >= 4 and stem in tool_word)
                   for stem in stems for tool_word in tool_words)
    lowered = text.lower()
    if any(re.search(rf"\b{re.escape(tool_word)}", lowered) for tool_word in tool_words if len(tool_word) >= 4):
        return True
    return any(re.search(rf"(?<!\w){re.escape(value)}(?!\w)", lowered) for value in _named_values(call.call.arguments))


def _named_values(arguments: object) -> set[str]:
    """The values of a call's arguments a text could name (lower case): see :data:`_VALUE`."""
    values: set[str] = set()
    stack = [arguments]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            if abs(item) >= 10:
                values.add(str(int(item)) if float(item).is_integer() else str(item))
        elif isinstance(item, str):
            lowered = item.strip().lower()
            if 3 <= len(lowered) <= 64:
                values.add(lowered)
            values.update(token.strip(".-") for token in _VALUE.findall(lowered[:4096]) if len(token.strip(".-")) >= 3)
    return values
