"""Which AgentDojo benchmark version a run is replayed with.

The rule, in order:

1. A version the user gives for the whole batch (``revalidate --benchmark-version``) is used for every
   run, whatever the run records: it is the user's explicit word.
2. A run that names ``benchmark_version`` is replayed with that version.
3. Otherwise the version is inferred from what the run names: the *earliest* version, among those the
   installed agentdojo defines (oldest first), that is not older than ``v1.1`` (:data:`EARLIEST`) and
   that has the run's suite, its user task (or the injection task it runs as a user task, as AgentDojo's
   ``injection_task_N/none`` runs do), its injection task, and every injection vector its
   ``injections`` names.

Why not older than ``v1.1``: runs without the field were made before AgentDojo started recording it;
the versions before the field (``v1`` and ``v1.1``) share every environment, tool and injection task and
differ only in the travel suite's user-task checks, which ``v1.1`` fixed. The published runs' recorded
utilities are the ``v1.1`` checks' (under ``v1``'s, two travel runs of the shipped sample disagree;
under ``v1.1.1`` and later, three others do). Why the earliest: a suite only ever gains tasks, so the
earliest version that has everything a run names is the closest to the one the run was made with (the
workspace injection tasks ``injection_task_6`` to ``injection_task_13`` exist from ``v1.2`` on, so a
run attacked with one of them was made with ``v1.2`` or later).

4. Among the versions that have every name, the run's own words decide where versions differ: the
   earliest version whose user task prompt is the one the run recorded (its first user message), and whose
   injection task's goal is the one its injection texts carry. AgentDojo rewrote prompts and goals between
   versions (banking ``user_task_15`` names the landlord's new account ``US133…`` up to ``v1.1`` and
   ``CA133…`` from ``v1.1.1`` on; banking's goals changed in ``v1.2``), and a run replayed under the wrong
   text takes the user's own request for the attacker's. Where no version's text matches (an attack that
   paraphrases the goal, a prompt the pipeline rewrote), the text says nothing and rule 3 stands.

A run that names something no version from ``v1.1`` on knows gets no version, and a reason naming the
versions tried; its line is ``missing_world``. Answers are cached per (suite, names), so inferring costs
a dictionary look-up per run once a worker has met a combination.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Iterable

from litmus_replay.envs.bridges import agentdojo as bridge

__all__ = ["EARLIEST", "Inferred", "candidate_versions", "consistent_versions", "infer_version", "known_versions"]

# Runs without ``benchmark_version`` are never replayed with an older version (see the module docstring).
EARLIEST = "v1.1"


@dataclass(frozen=True)
class Inferred:
    """The version a run is replayed with, or None and the reason no version fits."""

    version: str | None
    reason: str | None = None


def known_versions() -> list[str]:
    """The benchmark versions the installed agentdojo defines, oldest first; raises
    :class:`~litmus_replay.envs.bridges.agentdojo.BridgeUnavailable` without agentdojo."""
    get_suites = bridge.agentdojo_modules()["get_suites"]  # the install hint, where agentdojo is missing
    # agentdojo keeps its versions in a defaultdict: asking for an unknown one leaves an empty entry behind
    return [version for version in bridge.benchmark_versions() if get_suites(version)]


def candidate_versions() -> list[str]:
    """The versions inference chooses from: the installed ones from :data:`EARLIEST` on, oldest first."""
    versions = known_versions()
    start = versions.index(EARLIEST) if EARLIEST in versions else 0
    return versions[start:]


def infer_version(suite: str, user_task: str, injection_task: str | None = None,
                  vectors: Iterable[str] = (), prompt: str | None = None, injection_texts: Iterable[str] = ()) -> Inferred:
    """The earliest candidate version that has the suite, the user task (or an injection task run on its
    own), the injection task and every injection vector named.

    >>> infer_version("workspace", "user_task_0", "injection_task_8").version
    'v1.2'
    >>> infer_version("banking", "user_task_0", "injection_task_99").reason  # doctest: +ELLIPSIS
    "no injection task 'injection_task_99' in AgentDojo banking in any version tried (v1.1, ...)"
    """
    named = _infer(suite, user_task, injection_task, frozenset(vectors))
    if named.version is None or (not prompt and not injection_texts):
        return named
    later = candidate_versions()
    later = [version for version in later[later.index(named.version):]
             if _lacks(version, suite, user_task, injection_task, frozenset(vectors)) is None]
    return Inferred(_by_text(later, suite, user_task, injection_task, prompt, tuple(injection_texts)))


def _by_text(versions: list[str], suite: str, user_task: str, injection_task: str | None, prompt: str | None,
             texts: tuple[str, ...]) -> str:
    """The earliest of ``versions`` whose prompt and goal the run's recorded text carries (rule 4)."""
    return (consistent_versions(versions, suite, user_task, injection_task, prompt, texts) or versions)[0]


def consistent_versions(versions: list[str], suite: str, user_task: str, injection_task: str | None,
                        prompt: str | None, texts: Iterable[str]) -> list[str]:
    """The ``versions`` that the run's own text does not contradict: whose user task prompt is in the run's
    first user message, and whose injection goal its injections carry, where some version's text is there
    (text no version wrote says nothing); the longest matching text wins over one it contains."""
    evidence: list[list[bool]] = []
    recorded = _plain(prompt) if prompt else ""
    if recorded:
        said = [_plain(_prompt(version, suite, user_task)) for version in versions]
        evidence.append(_fullest([bool(text) and text in recorded for text in said], said))
    carried = [_plain(text) for text in texts if text]
    if injection_task and carried:
        goals = [_plain(_goal(version, suite, injection_task)) for version in versions]
        evidence.append(_fullest([bool(goal) and any(goal in text for text in carried) for goal in goals], goals))
    evidence = [matches for matches in evidence if any(matches)]
    return [version for index, version in enumerate(versions) if all(matches[index] for matches in evidence)]


def _fullest(matches: list[bool], texts: list[str]) -> list[bool]:
    """Of the versions whose text the run carries, those whose text is not part of a longer one it carries
    too (v1.2's goal adds a sentence to v1.1's: a run carrying v1.2's carries v1.1's as well)."""
    return [matched and not any(other_matched and text != other and text in other
                                for other, other_matched in zip(texts, matches))
            for text, matched in zip(texts, matches)]


@functools.lru_cache(maxsize=4096)
def _plain(text: str) -> str:
    return " ".join(text.split()).casefold()


@functools.lru_cache(maxsize=4096)
def _prompt(version: str, suite: str, task_id: str) -> str:
    task = bridge.find_task(_suites(version)[suite], task_id)
    return str(getattr(task, "PROMPT", None) or getattr(task, "GOAL", None) or "")


@functools.lru_cache(maxsize=4096)
def _goal(version: str, suite: str, task_id: str) -> str:
    return str(getattr(bridge.injection_tasks(_suites(version)[suite]).get(task_id), "GOAL", "") or "")


@functools.lru_cache(maxsize=4096)
def _infer(suite: str, user_task: str, injection_task: str | None, vectors: frozenset[str]) -> Inferred:
    tried = candidate_versions()
    lacked: set[tuple[str, str]] = set()  # the first thing each version lacked
    for version in tried:
        lacks = _lacks(version, suite, user_task, injection_task, vectors)
        if lacks is None:
            return Inferred(version)
        lacked.add(lacks)
    listed = ", ".join(tried)
    if len(lacked) == 1:  # every version lacks the same thing: name it
        ((what, after),) = lacked
        if what.startswith("no suite"):
            known = sorted({name for version in tried for name in _suites(version)})
            return Inferred(None, f"{what} any AgentDojo version tried ({listed}); known: {', '.join(known)}")
        return Inferred(None, f"{what} AgentDojo {suite} in any version tried ({listed}){after}")
    names = [repr(user_task)] + ([f"injection task {injection_task!r}"] if injection_task else [])
    if vectors:
        names.append(f"injection vectors {', '.join(sorted(vectors))}")
    return Inferred(None, f"no AgentDojo version tried ({listed}) has {suite} {' with '.join(names)} together")


def _lacks(version: str, suite_name: str, user_task: str, injection_task: str | None,
           vectors: frozenset[str]) -> tuple[str, str] | None:
    """What one version lacks of what a run names (the first thing, as the words before and after where it
    was looked for), or None when it has it all."""
    suites = _suites(version)
    if suite_name not in suites:
        return f"no suite {suite_name!r} in", ""
    suite = suites[suite_name]
    if bridge.find_task(suite, user_task) is None:
        return f"no task {user_task!r} in", ""
    if injection_task is not None and injection_task not in bridge.injection_tasks(suite):
        return f"no injection task {injection_task!r} in", ""
    unknown = sorted(vectors - _vectors(version, suite_name))
    if unknown:
        return "injection vectors unknown to", f": {', '.join(unknown)}"
    return None


@functools.lru_cache(maxsize=64)
def _suites(version: str) -> dict[str, Any]:
    return dict(bridge.agentdojo_modules()["get_suites"](version))


@functools.lru_cache(maxsize=256)
def _vectors(version: str, suite_name: str) -> frozenset[str]:
    return frozenset(_suites(version)[suite_name].get_injection_vector_defaults())
