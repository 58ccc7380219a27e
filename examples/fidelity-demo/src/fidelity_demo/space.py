"""The calls the fidelity lab tries on the ``notes`` domain: two principals, their notes, unknown ids."""

from __future__ import annotations

from hypothesis import strategies as st

from litmus_replay.replay.fidelity import CallSpace, call

from . import domain  # noqa: F401  (registers the domain)

PRINCIPALS = st.sampled_from(["alice", "bob"])
IDS = st.sampled_from(["n1", "n2", "new-1", "n9"])

notes_space = CallSpace(
    domain="notes",
    worlds={
        "principals": ["alice", "bob"],
        "notes": {"notes": {"n1": {"owner": "alice", "text": "hello"}, "n2": {"owner": "bob", "text": "hi"}}},
    },
    calls=st.one_of(
        call("add_note", PRINCIPALS, text=st.sampled_from(["todo", "done"])),
        call("read_note", PRINCIPALS, id=IDS),
        call("delete_note", PRINCIPALS, id=IDS),
    ),
    description="two principals' notes; reads, deletes of one's own and another's, unknown ids",
)
