"""The ``notes`` domain: notes with owners, as a harness stubs them and as the service behaves.

World section::

    notes:
      notes:
        n1: {owner: alice, text: hello}

Tools: ``add_note(text)``, ``read_note(id)``, ``delete_note(id)``. Real semantics: anyone may read a note,
only its owner may delete it (403), an unknown note is 404. The stub has two profiles: ``default`` (a
harness's canned store, which deletes any note) and ``owner-checked`` (which refuses another's note, as the
service does).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from litmus_replay.envs.domain import Call, Domain, WorldEnv, register_domain, tool
from litmus_replay.envs.errors import ServiceError, WorldSpecError


class _Notes(Domain):
    name = "notes"

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        notes = spec.get("notes") or {}
        if not isinstance(notes, Mapping):
            raise WorldSpecError("world.notes.notes", "expected a mapping note id -> {owner, text}")
        self.notes = {str(k): {"owner": str(v["owner"]), "text": str(v.get("text", ""))} for k, v in notes.items()}
        self.made = 0

    def snapshot(self) -> dict[str, str]:
        return {f"notes:{key}": hashlib.sha256(json.dumps(note, sort_keys=True).encode()).hexdigest()
                for key, note in self.notes.items()}

    def _note(self, call: Call, note_id: Any) -> dict[str, Any]:
        call.read(f"notes:{note_id}")
        if note_id not in self.notes:
            raise ServiceError(404, f"no note {note_id!r}")
        return self.notes[note_id]

    @tool
    def add_note(self, call: Call, text: str) -> dict[str, Any]:
        self.made += 1
        note_id = f"new-{self.made}"
        self.notes[note_id] = {"owner": call.principal, "text": str(text)}
        return {"id": note_id}

    @tool
    def read_note(self, call: Call, id: str) -> dict[str, Any]:  # noqa: A002  (the tool's argument name)
        return dict(self._note(call, id))

    @tool
    def delete_note(self, call: Call, id: str) -> dict[str, Any]:  # noqa: A002
        note = self._note(call, id)
        self._check_delete(call, id, note)
        del self.notes[id]
        return {"deleted": id}

    def _check_delete(self, call: Call, note_id: str, note: dict[str, Any]) -> None:
        if note["owner"] != call.principal:
            raise ServiceError(403, f"{call.principal} may not delete {note_id}, a note of {note['owner']}")


@register_domain
class NotesStub(_Notes):
    semantics = "stub"
    profiles = {
        "default": "a canned store: deletes any note that exists",
        "owner-checked": "refuses to delete another's note (403), as the service does",
    }

    def _check_delete(self, call: Call, note_id: str, note: dict[str, Any]) -> None:
        if self.profile == "owner-checked":
            super()._check_delete(call, note_id, note)


@register_domain
class NotesReal(_Notes):
    semantics = "real"
