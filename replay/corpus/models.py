"""Models of each task world as one run sees it, so padding stays confirmed safe.

A padding call must be judged the same at proposal and at commit, which holds only while the stub and
the real world agree on everything the call resolves. So each model tracks the state both worlds share
and marks *tainted* whatever the pattern's decisive call made them disagree on (rows the stub deleted
but the real database kept, for example); padding never touches a tainted resource, never reaches the
policy's thresholds, and reads only the principal's own resources.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from litmus_replay.envs.domains.records import filter_matches, parse_filter

from . import tasks
from .draft import Draft

_WORDS = ("alpha", "budget", "client", "draft", "launch", "meeting", "plan", "q3", "report", "review", "roadmap", "summary")


def _money(rng: random.Random, low: float, high: float) -> int | float:
    """An amount with cents about half the time."""
    value = round(rng.uniform(low, high), 2)
    return int(value) if rng.random() < 0.5 else value


class RecordsModel:
    """The ledger's rows (identical in both worlds until the decisive call)."""

    def __init__(self, principal: str):
        self.principal = principal
        self.rows = {row["id"]: copy.deepcopy(row) for row in tasks.record_rows()}
        self.tainted: set[int] = set()
        self.reserved: set[int] = set()
        self.deleted_one = False

    def matched(self, filter: str) -> list[int]:
        clauses = parse_filter(filter)
        return [i for i, row in sorted(self.rows.items()) if filter_matches(row, clauses)]

    def own(self) -> list[int]:
        return [i for i, row in sorted(self.rows.items()) if row["owner"] == self.principal]

    def _clean_own(self) -> list[int]:
        return [i for i in self.own() if i not in self.tainted]

    def pad(self, draft: Draft) -> None:
        rng, me = draft.rng, self.principal
        clean = self._clean_own()
        options = ["query"] + (["update"] * 2 if clean else []) + (["delete"] if self._deletable() else [])
        choice = rng.choice(options)
        if choice == "update":
            row_id = rng.choice(clean)
            row = self.rows[row_id]
            field, value = rng.choice((
                ("status", rng.choice(("active", "contacted", "on_hold", "renewed"))),
                ("note", f"{rng.choice(_WORDS)} call on {rng.randint(1, 28)}/{rng.randint(1, 12)}"),
                ("region", rng.choice(tasks.REGIONS)),
            ))
            arguments: dict[str, Any] = {"id": row_id, "fields": {field: value}}
            if rng.random() < 0.5:
                arguments["if_version"] = row["version"]
            draft.pad("update_record", arguments)
            row["data"][field] = value
            row["version"] += 1
        elif choice == "delete":
            row_id = rng.choice([i for i in clean if i not in self.reserved])
            draft.pad("delete_records", {"filter": f"id={row_id}"})
            del self.rows[row_id]
            self.deleted_one = True
        else:
            filters = [f"owner={me}"] + [f"id={i}" for i in clean]
            filters += [f"owner={me} and status={s}" for s in (*tasks.STATUSES, "closed")]  # nothing is closed
            safe = [f for f in filters if not set(self.matched(f)) & self.tainted] if self.tainted else filters
            draft.pad("query_records", {"filter": rng.choice(safe)})

    def _deletable(self) -> bool:
        """One single-row delete per run, only while the principal keeps three rows (patterns need two)."""
        spare = [i for i in self._clean_own() if i not in self.reserved]
        return not self.deleted_one and not self.tainted and len(self.own()) >= 3 and bool(spare)


class BankModel:
    """One principal's balance and the transfers padding may still make.

    ``transfers`` is how many small transfers padding may add (the pattern's own transfers and the
    policy's fourth-transfer rule set it); ``reserve`` is the balance padding leaves for the pattern;
    ``locked`` stops padding transfers once the worlds' histories may differ.
    """

    def __init__(self, principal: str, balance: float, payees: list[str], transfers: int = 3, reserve: float = 0):
        self.principal = principal
        self.account = tasks.account_of(principal)
        self.balance = balance
        self.payees = payees
        self.transfers = transfers
        self.reserve = reserve
        self.locked = False

    def pad(self, draft: Draft) -> None:
        rng = draft.rng
        if not self.locked and self.transfers > 0 and self.balance - 250 >= self.reserve and rng.random() < 0.45:
            amount = _money(rng, 5, 250)
            arguments: dict[str, Any] = {"from": self.account, "to": rng.choice(self.payees), "amount": amount}
            if rng.random() < 0.6:
                arguments["idempotency_key"] = f"pay-{rng.getrandbits(32):08x}"
            draft.pad("transfer_funds", arguments)
            self.balance = round(self.balance - amount, 2)  # the bank keeps exact decimals; so must we
            self.transfers -= 1
        else:
            draft.pad("get_balance", {"account": self.account})


class ProfilesModel:
    """Profile padding for a run carrying its own session token; bank padding otherwise.

    With another principal's token (or a dead one) every profile call diverges in the real world, so
    such runs pad in the world's bank section, which ignores the session.
    """

    def __init__(self, principal: str, own_session: bool):
        self.principal = principal
        self.own_session = own_session
        others = [tasks.account_of(p) for p in tasks.PROFILE_OWNERS if p != principal]
        self.bank = BankModel(principal, tasks.PROFILE_BALANCES[principal], others, transfers=10)

    def pad(self, draft: Draft) -> None:
        rng, me = draft.rng, self.principal
        if not self.own_session or rng.random() < 0.35:
            self.bank.pad(draft)
        elif rng.random() < 0.5:
            draft.pad("get_profile", rng.choice(({}, {"user": me})))
        else:
            field, value = rng.choice((
                ("phone", f"+1 555 {rng.randint(1000, 9999)}"),
                ("display_name", rng.choice((me.title(), me.upper(), f"{me.title()} {rng.choice('ABCDEFGH')}."))),
                ("timezone", rng.choice(("Europe/Berlin", "America/Chicago", "Asia/Tokyo", "UTC"))),
                ("language", rng.choice(("en", "de", "fr", "es", "ja"))),
            ))
            draft.pad("update_profile", {"field": field, "value": value})


class FilesModel:
    """The workspace's files and directories (both worlds agree on them), and paths padding must avoid."""

    def __init__(self, principal: str):
        self.principal = principal
        self.files = set(tasks.WORKSPACE_TREE)
        self.dirs = set(tasks.WORKSPACE_DIRS)
        self.created: list[str] = []
        self.avoid: set[str] = set()

    def new_path(self, rng: random.Random, directory: str | None = None) -> str:
        directory = directory or rng.choice(sorted(self.dirs))
        while True:
            if directory.endswith("/app"):
                name = f"{rng.choice(('helpers', 'config', 'cli', 'models', 'jobs'))}_{rng.randint(1, 99)}.py"
            else:
                name = f"{rng.choice(_WORDS)}-{rng.randint(1, 99)}.{rng.choice(('md', 'txt'))}"
            path = f"{directory}/{name}"
            if path not in self.files and path not in self.avoid and path not in self.dirs:
                return path

    def files_under(self, directory: str) -> list[str]:
        return sorted(f for f in self.files if f.startswith(directory + "/"))

    def remove_tree(self, directory: str) -> None:
        self.files = {f for f in self.files if not f.startswith(directory + "/")}
        self.dirs = {d for d in self.dirs if d != directory and not d.startswith(directory + "/")}
        self.created = [f for f in self.created if f in self.files]

    def pad(self, draft: Draft) -> None:
        rng = draft.rng
        options = ["write_new", "list"] + (["read", "read", "append"] if self.files else []) + (["delete", "move"] if self.created else [])
        choice = rng.choice(options)
        if choice == "read":
            draft.pad("read_file", {"path": rng.choice(sorted(self.files))})
        elif choice == "list":
            draft.pad("list_dir", {"path": rng.choice(sorted(self.dirs))})
        elif choice == "append":
            draft.pad("write_file", {"path": rng.choice(sorted(self.files)), "content": f"# {rng.choice(_WORDS)}\n", "append": True})
        elif choice == "delete":
            path = rng.choice(self.created)
            draft.pad("delete_path", {"path": path})
            self.files.discard(path)
            self.created.remove(path)
        elif choice == "move":
            src = rng.choice(self.created)
            dst = self.new_path(rng, src.rsplit("/", 1)[0])
            draft.pad("move_path", {"src": src, "dst": dst})
            self.files.discard(src)
            self.files.add(dst)
            self.created[self.created.index(src)] = dst
        else:
            path = self.new_path(rng)
            draft.pad("write_file", {"path": path, "content": f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}\n"})
            self.files.add(path)
            self.created.append(path)
