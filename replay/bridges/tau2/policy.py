"""The policy of a τ²-bench run: the domain's own policy text (``policy.md``), clause by clause, as CEL rules.

τ²-bench's tools check little of their domain's policy ("The API does not check these for the agent, so
the agent must make sure the rules apply before calling the API!"): a cancellation the policy forbids is
committed all the same. The rules say what a call's context can decide — the call, the records it names
as they stood before it, the conversation so far — and nothing else; what only the user's words decide
(the reason for a cancellation, whether the user asked for compensation) is left to τ²'s own checks. The
rules live in ``rules/<domain>.yaml``, one file per domain, each rule quoting the clause it encodes; the
docs' "τ²-bench's policies as rules" page lists them and the clauses left out.

**What the rules read.** ``state['tau2-<domain>']``: ``authenticated_user`` (the user the agent
established), ``last_user_message`` (the user's last message before the call), ``now`` (τ²'s current
time in the domain), and ``records``, the value before the call of each record the call names
(``reservations/<id>``, ``users/<id>``, ``orders/<id>``, a named reservation's ``flights/<number>``);
``history`` for what earlier calls did. A rule is false where the state it reads is absent.

**Explicit confirmation.** The confirmation gate counts the user's last message before the call as the
"yes" when it holds any affirmative word or phrase (the bridge's ``CONFIRMATION``) anywhere, whatever else it
says: a false flag is the worse mistake, so any message that might be read as a yes is one. A "yes"
given once covers every update until the user speaks again.

**Judge.** Every rule judges what the call did (``judge: effect``): the policy forbids changes and
disclosures, and a call τ²'s tool refused (an exception) changed and disclosed nothing. The clauses τ²'s
tools do enforce (a passenger count changed, a payment method not in the profile, an order in the wrong
status) are rules all the same: a proposal-time judge that took the call as done would call it misuse.
"""

from __future__ import annotations

import functools
from pathlib import Path

from litmus_replay.envs.bridges.tau2 import CONFIRMATION

from ...policy import Policy, PolicySpec
from ...yaml_io import read_yaml
from .. import user_rules

__all__ = ["CONFIRMATION", "DOMAINS", "RULES_VARIABLE", "benchmark_policy", "rules_file", "user_rules"]

DOMAINS = ("airline", "retail", "telecom")
RULES = Path(__file__).with_name("rules")
# The environment variable naming a file of the user's own rules, added to every τ²-bench run's policy.
RULES_VARIABLE = "LITMUS_TAU2_RULES"
def rules_file(domain: str) -> Path:
    """The rules file of a domain (``airline`` or ``tau2-airline``); raises :class:`LookupError` for another."""
    name = domain.removeprefix("tau2-")
    if name not in DOMAINS:
        raise LookupError(f"no τ²-bench policy for domain {domain!r}; the domains are {', '.join(DOMAINS)}")
    return RULES / f"{name}.yaml"


@functools.lru_cache(maxsize=None)
def benchmark_policy(domain: str) -> PolicySpec:
    """The rules of a domain's policy (read once per process; not to be changed)."""
    path = rules_file(domain)
    spec = PolicySpec.model_validate(read_yaml(path))
    Policy.compile(spec, path.name)  # a rule that does not compile is a defect of the package
    return spec

