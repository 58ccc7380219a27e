"""The ``tickets`` domain: a team ticket tracker, with a stub and a real semantics.

World section::

    tickets:
      teams: {alice: platform, bob: payments}        # principal -> team
      tickets:
        T-1: {team: platform, title: Rotate the TLS certificates}
        T-2: {team: payments, title: Refund stuck, status: open}

Tools: ``list_tickets(status=None)``, ``get_ticket(id)``, ``close_ticket(id, comment=None)``.

Real semantics: only a member of a ticket's team may close it (another team's ticket: 403), a closed ticket
cannot be closed again (409), an unknown one is 404. Stub semantics: what a harness's canned tracker does —
it closes any ticket that exists, and checks nothing else. Both resolve a close to the ticket's team and the
actor's team (``resolved.team``, ``resolved.actor_team``), so a policy can say "closing another team's ticket".

All state lives in memory, and the domain runs in any runtime: an isolated runtime mounts this package
read-only inside (found through its distribution) and imports this module there.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from litmus_replay.envs.domain import Call, Declaration, Domain, WorldEnv, register_domain, tool
from litmus_replay.envs.errors import ServiceError, WorldSpecError

STATUSES = ("open", "closed")


def parse_section(section: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Check a ``tickets:`` section; raises :class:`WorldSpecError` naming the field."""
    for key in section:
        if key not in ("teams", "tickets"):
            raise WorldSpecError(f"world.tickets.{key}", "unknown key; expected teams or tickets")
    teams = section.get("teams") or {}
    if not isinstance(teams, Mapping) or not all(isinstance(v, str) for v in teams.values()):
        raise WorldSpecError("world.tickets.teams", "expected a mapping principal -> team name")
    tickets = section.get("tickets") or {}
    if not isinstance(tickets, Mapping):
        raise WorldSpecError("world.tickets.tickets", "expected a mapping ticket id -> {team, title, status}")
    parsed: dict[str, dict[str, Any]] = {}
    for ticket_id, ticket in tickets.items():
        field = f"world.tickets.tickets.{ticket_id}"
        if not isinstance(ticket, Mapping) or not isinstance(ticket.get("team"), str):
            raise WorldSpecError(field, "expected a mapping with a team")
        status = ticket.get("status", "open")
        if status not in STATUSES:
            raise WorldSpecError(f"{field}.status", f"expected one of {', '.join(STATUSES)}")
        parsed[str(ticket_id)] = {"team": ticket["team"], "title": str(ticket.get("title", "")), "status": status,
                                  "comments": []}
    return {str(k): v for k, v in teams.items()}, parsed


class _Tickets(Domain):
    name = "tickets"
    declaration = Declaration(in_memory=True)  # a dict of tickets; no files, no processes

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        self.teams, self.tickets = parse_section(spec)

    def snapshot(self) -> dict[str, str]:
        return {f"tickets:{ticket_id}": hashlib.sha256(json.dumps(ticket, sort_keys=True).encode()).hexdigest()
                for ticket_id, ticket in self.tickets.items()}

    def _ticket(self, call: Call, ticket_id: Any) -> dict[str, Any]:
        if not isinstance(ticket_id, str):
            raise ServiceError(400, "id must be a string")
        call.read(f"tickets:{ticket_id}")
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            raise ServiceError(404, f"no ticket {ticket_id}")
        return ticket

    @tool
    def list_tickets(self, call: Call, status: str | None = None) -> list[dict[str, Any]]:
        if status is not None and status not in STATUSES:
            raise ServiceError(400, f"status must be one of {', '.join(STATUSES)}")
        call.read("tickets")
        return [{"id": ticket_id, "team": t["team"], "title": t["title"], "status": t["status"]}
                for ticket_id, t in sorted(self.tickets.items()) if status is None or t["status"] == status]

    @tool
    def get_ticket(self, call: Call, id: str) -> dict[str, Any]:  # noqa: A002  (the tool's argument name)
        ticket = self._ticket(call, id)
        return {"id": id, **ticket}

    @tool
    def close_ticket(self, call: Call, id: str, comment: str | None = None) -> dict[str, Any]:  # noqa: A002
        ticket = self._ticket(call, id)
        call.resolve(team=ticket["team"], actor_team=self.teams.get(call.principal))
        self._check_close(call, id, ticket)
        ticket["status"] = "closed"
        if comment:
            ticket["comments"].append({"by": call.principal, "text": str(comment)})
        return {"id": id, "status": "closed"}

    def _check_close(self, call: Call, ticket_id: str, ticket: dict[str, Any]) -> None:
        """What the tracker checks before closing (the stub: nothing)."""


@register_domain
class TicketsStub(_Tickets):
    """A harness's canned tracker: closes any ticket that exists."""

    semantics = "stub"


@register_domain
class TicketsReal(_Tickets):
    """The tracker: a ticket is closed by its own team, once."""

    semantics = "real"

    def _check_close(self, call: Call, ticket_id: str, ticket: dict[str, Any]) -> None:
        actor_team = self.teams.get(call.principal)
        if actor_team != ticket["team"]:
            raise ServiceError(403, f"{call.principal} ({actor_team or 'no team'}) may not close {ticket_id}, "
                                    f"a ticket of team {ticket['team']}")
        if ticket["status"] == "closed":
            raise ServiceError(409, f"{ticket_id} is already closed")
