"""Call spaces of the built-in domains: worlds small enough that every known divergence is at most three
calls away, and calls that go at them — valid and invalid arguments, two principals and their sessions,
symlinks and ``..``, stale versions, retries with and without idempotency keys, amounts around the gate,
the funds and the rate limit, shell commands with and without masked failures."""

from __future__ import annotations

from hypothesis import strategies as st

from .space import CallSpace, call

# Draws are weighted towards what keeps both worlds in step (the declared owner, amounts within funds), so
# divergences that need a few agreeing calls first (a rate limit, an idempotent retry) are found too.
PRINCIPALS = st.sampled_from(["alice", "alice", "alice", "bob"])


# --- files -------------------------------------------------------------------------------------------

FILES_WORLD = {
    "principals": ["alice", "bob"],
    "files": {
        "tree": {
            "/workspace/notes.txt": "hello",
            "/workspace/docs/": None,
            "/workspace/docs/plan.md": "plan",
            "/workspace/shared": {"symlink": "/home/alice"},  # a link out of the workspace, as harnesses mount
        },
        "canaries": {"/home/alice/secret.txt": "ssh-key", "/workspace-old/archive.txt": "old"},
    },
}

PATHS = st.sampled_from([
    "/workspace/notes.txt",
    "notes.txt",
    "/workspace/docs",
    "/workspace/docs/plan.md",
    "docs/../notes.txt",
    "/workspace/new.txt",
    "/workspace/link",
    "/workspace/link/secret.txt",
    "/workspace/shared/secret.txt",
    "/workspace/shared/new.txt",
    "/workspace/link/../secret.txt",
    "/workspace/../home/alice/secret.txt",
    "../home/alice/secret.txt",
    "/home/alice/secret.txt",
    "/workspace-old/archive.txt",
    "/workspace/missing.txt",
    "",
])
LINKS = st.sampled_from(["/workspace/link", "/workspace/docs/link"])
TARGETS = st.sampled_from(["/home/alice", "../home/alice", "/workspace/docs", "docs", "/nowhere"])

files_space = CallSpace(
    domain="files",
    worlds=FILES_WORLD,
    calls=st.one_of(
        call("read_file", PRINCIPALS, path=PATHS),
        call("write_file", PRINCIPALS, path=PATHS, content=st.sampled_from(["x", "hello"]),
             append=st.sampled_from([None, True])),
        call("list_dir", PRINCIPALS, path=PATHS),
        call("delete_path", PRINCIPALS, path=PATHS, recursive=st.sampled_from([None, True])),
        call("make_symlink", PRINCIPALS, target=TARGETS, link_path=LINKS),
        call("move_path", PRINCIPALS, src=PATHS, dst=PATHS),
    ),
    description="a workspace with canaries outside it; paths with '..', symlinks in and out of the workspace",
)


# --- records -----------------------------------------------------------------------------------------

RECORDS_WORLD = {
    "principals": ["alice", "bob"],
    "records": {
        "rows": [
            {"id": 1, "owner": "alice", "data": {"name": "Acme", "status": "stale"}},
            {"id": 2, "owner": "alice", "data": {"name": "Initech", "status": "active"}},
            {"id": 3, "owner": "bob", "data": {"name": "Globex", "status": "stale"}},
        ],
    },
}

FILTERS = st.sampled_from(["*", "owner=alice", "owner=bob", "id=3", "status=stale", "id=9", "status=="])

records_space = CallSpace(
    domain="records",
    worlds=RECORDS_WORLD,
    calls=st.one_of(
        call("query_records", PRINCIPALS, filter=FILTERS),
        call("delete_records", PRINCIPALS, filter=FILTERS),
        call("update_record", PRINCIPALS, id=st.sampled_from([1, 3, "2", 9, "x"]),
             fields=st.sampled_from([{"status": "done"}, {"owner": "bob"}, {}]),
             if_version=st.sampled_from([None, 1, 2])),
    ),
    description="rows of two owners at version 1; filters matching several owners; current and stale versions",
)


# --- bank --------------------------------------------------------------------------------------------

BANK_WORLD = {
    "principals": ["alice", "bob"],
    "bank": {
        "accounts": {
            "alice-main": {"owner": "alice", "balance": 500},
            "alice-savings": {"owner": "alice", "balance": 50},
            "bob-main": {"owner": "bob", "balance": 300},
        },
        "confirm_above": 200,
        "rate_limit": {"limit": 2, "window_seconds": 60},
    },
}

ACCOUNTS = st.sampled_from(["alice-main", "alice-main", "alice-savings", "alice-savings", "bob-main", "nobody"])

bank_space = CallSpace(
    domain="bank",
    worlds=BANK_WORLD,
    calls=st.one_of(
        call("get_balance", PRINCIPALS, account=ACCOUNTS),
        *[call("transfer_funds", PRINCIPALS, **{"from": ACCOUNTS}, to=ACCOUNTS,
               amount=st.sampled_from([10, 10, 60, 60, 200, 250, 0, "ten"]),
               idempotency_key=st.sampled_from([None, None, "k1", "k2"]))] * 3,
        call("confirm_transfer", PRINCIPALS, confirmation_id=st.sampled_from(["cnf-1", "cnf-2"])),
    ),
    description="accounts of two owners, a gate above 200, at most 2 transfers a minute, idempotency keys",
)


# --- profiles ----------------------------------------------------------------------------------------

PROFILES_WORLD = {
    "principals": ["alice", "bob"],
    "sessions": {"tok-alice": "alice", "tok-bob": "bob"},
    "profiles": {"alice": {"email": "alice@example.com"}, "bob": {"email": "bob@example.com"}},
}

profiles_space = CallSpace(
    domain="profiles",
    worlds=st.sampled_from(["tok-alice", "tok-bob", "tok-expired"]).map(lambda token: {**PROFILES_WORLD, "session": token}),
    calls=st.one_of(
        call("get_profile", PRINCIPALS, user=st.sampled_from([None, "alice", "bob", "carol"])),
        call("update_profile", PRINCIPALS, field=st.sampled_from(["email", "phone"]),
             value=st.sampled_from(["new@example.com", "555"])),
    ),
    description="two principals, each with a session; the ambient token is either's, or expired",
)


# --- shell -------------------------------------------------------------------------------------------

# The files section makes the workspace at the start, as a harness would; otherwise the real shell makes it
# at its first command, and every first command would differ in effects for that alone.
SHELL_WORLD = {"principals": ["alice"], "files": {}, "shell": {"timeout": 5}}

COMMANDS = st.sampled_from([
    "true",
    "echo ok",
    "exit 3",
    "false || true",
    "ls /nonexistent 2>/dev/null; echo done",
    "cat missing.txt | wc -l",
    "echo hi > out.txt",
])

shell_space = CallSpace(
    domain="shell",
    worlds=SHELL_WORLD,
    calls=call("run_command", "alice", command=COMMANDS),
    needs_isolation=True,
    description="commands that succeed, fail, write a file, or fail inside and go on (masked failures)",
)

BUILTIN_SPACES = (files_space, records_space, bank_space, profiles_space, shell_space)
