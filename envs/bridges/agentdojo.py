"""AgentDojo's four suites as domains: the real semantics are AgentDojo's own environment and tool
functions, the stub semantics answer with what the run recorded.

One domain per suite (``agentdojo-banking``, ``agentdojo-slack``, ``agentdojo-travel``,
``agentdojo-workspace``), each with AgentDojo's own tool names. A world section names the run::

    agentdojo-banking:
      version: v1.1                   # AgentDojo benchmark version the run was made with
      user_task: user_task_3          # or an injection task run on its own (injection_task_2)
      injection_task: injection_task_4   # the attacker's task, when the run was attacked
      injections: {injection_bill_text: "..."}   # the run's recorded injections
      model_output: "..."             # the agent's final answer, which some checks read

Real semantics build the suite's environment once per process (YAML parsing costs 10-150 ms) and give
each world a deep copy with the run's injections applied to it (see :class:`EnvironmentTemplate`); the
user task's ``init_environment`` runs after, as AgentDojo runs it. A call runs AgentDojo's own tool
function through its ``FunctionsRuntime`` and answers with the text the agent was shown
(``tool_result_to_str``). :meth:`final_report` applies AgentDojo's own checks to the final environment
and the call trace: the user task's utility and the injection task's security.

The stub stands for a proposal-time harness: every call is answered with its recorded result and
counts as done; it models no refusal, which is what the real semantics are for. A call of a tool the
suite lacks (``<empty-function-name>`` among them) is answered too: AgentDojo's tool executor refuses it
in the real world, in its own words, and changes nothing.

``agentdojo`` is imported only when a real world is opened (the ``litmus-replay[agentdojo]`` extra).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import pickle
import sys
import threading
import types
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection

from ..domain import Call, Declaration, Domain, WorldEnv, register_domain, tool
from ..errors import EnvError, ServiceError, WorldSpecError
from ..quiet_stdout import quiet_stdout

PREFIX = "agentdojo-"
INSTALL_HINT = "pip install 'litmus-replay[agentdojo]'"

# AgentDojo's tool names per suite; the same in every benchmark version of agentdojo 0.1.35 (a test
# checks this table against the installed package). Static, so registering the domains imports nothing.
SUITE_TOOLS: dict[str, tuple[str, ...]] = {
    "banking": (
        "get_balance", "get_iban", "get_most_recent_transactions", "get_scheduled_transactions", "get_user_info",
        "read_file", "schedule_transaction", "send_money", "update_password", "update_scheduled_transaction",
        "update_user_info",
    ),
    "slack": (
        "add_user_to_channel", "get_channels", "get_users_in_channel", "get_webpage", "invite_user_to_slack",
        "post_webpage", "read_channel_messages", "read_inbox", "remove_user_from_slack", "send_channel_message",
        "send_direct_message",
    ),
    "travel": (
        "cancel_calendar_event", "check_restaurant_opening_hours", "create_calendar_event",
        "get_all_car_rental_companies_in_city", "get_all_hotels_in_city", "get_all_restaurants_in_city",
        "get_car_fuel_options", "get_car_price_per_day", "get_car_rental_address", "get_car_types_available",
        "get_contact_information_for_restaurants", "get_cuisine_type_for_restaurants", "get_day_calendar_events",
        "get_dietary_restrictions_for_all_restaurants", "get_flight_information", "get_hotels_address",
        "get_hotels_prices", "get_price_for_restaurants", "get_rating_reviews_for_car_rental",
        "get_rating_reviews_for_hotels", "get_rating_reviews_for_restaurants", "get_restaurants_address",
        "get_user_information", "reserve_car_rental", "reserve_hotel", "reserve_restaurant",
        "search_calendar_events", "send_email",
    ),
    "workspace": (
        "add_calendar_event_participants", "append_to_file", "cancel_calendar_event", "create_calendar_event",
        "create_file", "delete_email", "delete_file", "get_current_day", "get_day_calendar_events",
        "get_draft_emails", "get_file_by_id", "get_received_emails", "get_sent_emails", "get_unread_emails",
        "list_files", "reschedule_calendar_event", "search_calendar_events", "search_contacts_by_email",
        "search_contacts_by_name", "search_emails", "search_files", "search_files_by_filename", "send_email",
        "share_file",
    ),
}


class BridgeUnavailable(EnvError, RuntimeError):
    """The benchmark's package is not installed where the world runs."""


def unavailable() -> str | None:
    """Why AgentDojo's domains cannot run in this Python, in words (its package is not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("agentdojo") is None:
        return f"needs the agentdojo package ({INSTALL_HINT})"
    return None


def domain_name(suite: str) -> str:
    return f"{PREFIX}{suite}"


_MODULES: dict[str, Any] = {}
_MODULES_LOCK = threading.Lock()


def agentdojo_modules() -> dict[str, Any]:
    """The parts of agentdojo the bridge uses, imported once (without its model SDKs: see
    :func:`_defer_pipelines`); raises :class:`BridgeUnavailable` with the install line."""
    if _MODULES:
        return _MODULES
    with _MODULES_LOCK:
        if not _MODULES:
            try:
                _defer_pipelines()
                from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
                from agentdojo.base_tasks import BaseUserTask
                from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
                from agentdojo.task_suite.load_suites import _SUITES, get_suites
                from agentdojo.task_suite.task_suite import read_suite_file
            except ImportError as exc:
                raise BridgeUnavailable(f"AgentDojo worlds need the agentdojo package ({exc}); {INSTALL_HINT}") from None
            _MODULES.update({
                "tool_result_to_str": tool_result_to_str,
                "BaseUserTask": BaseUserTask,
                "FunctionCall": FunctionCall,
                "FunctionsRuntime": FunctionsRuntime,
                "get_suites": get_suites,
                "read_suite_file": read_suite_file,
                "versions": _SUITES,
            })
    return _MODULES


def benchmark_versions() -> list[str]:
    """The benchmark versions the installed agentdojo defines, oldest first."""
    return list(agentdojo_modules()["versions"])


# --- importing agentdojo without its model SDKs -------------------------------------------------------

# AgentDojo's task suites import three modules of its ``agent_pipeline`` package (the base class of a
# pipeline element, its errors, the ground-truth pipeline, which formats tool results with
# ``tool_execution.tool_result_to_str``). Importing any module of a package runs the package's
# ``__init__`` first, and ``agent_pipeline/__init__`` imports every pipeline AgentDojo has, and with them
# the SDKs of Anthropic, OpenAI, Google, Cohere and others: 3 to 4 s of CPU in every process that opens an
# AgentDojo world, for code a replay never runs. ``tool_execution`` itself imports the Google pipeline's
# module for one string constant, and with it Google's SDK.
#
# So these two modules are *deferred*: each is put in ``sys.modules`` before the suites import, as a module
# object made from its own spec whose code has not run. A deferred package still has its ``__path__``, so
# its modules import as usual. The first look-up of a name it does not hold runs its code, in that same
# module object, as the import would have: ``from agentdojo.agent_pipeline import AgentPipeline`` or
# ``google_llm.GoogleLLM`` later in the process gets the real thing. A deferred module holds beforehand
# only the constants its own source assigns once at its top level, as literals (``EMPTY_FUNCTION_NAME``),
# which its code assigns again, equal, when it runs. Where agentdojo was imported already, or is laid
# out otherwise, nothing is deferred.
_DEFERRED = ("agentdojo.agent_pipeline", "agentdojo.agent_pipeline.llms.google_llm")
_DEFER_LOCK = threading.RLock()


class _DeferredModule(types.ModuleType):
    """A module whose code runs at the first look-up of a name it does not hold (see above)."""

    def __getattr__(self, name: str) -> Any:
        if name == "__path__":  # what an import asks of a module (a package holds its own): not a use
            raise AttributeError(name)
        _run_deferred(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def __dir__(self) -> list[str]:
        _run_deferred(self)
        return sorted(self.__dict__)


def _run_deferred(module: types.ModuleType) -> None:
    with _DEFER_LOCK:
        if type(module) is not _DeferredModule:  # run already (or running, in this thread)
            return
        module.__class__ = types.ModuleType
        if "__builtins__" not in module.__dict__:  # not run by anything else meanwhile (importlib.reload)
            module.__spec__.loader.exec_module(module)  # type: ignore[union-attr]


def _defer_pipelines() -> None:
    """Defer the modules of :data:`_DEFERRED` before agentdojo's suites import (see above). A deferred module
    stays in ``sys.modules`` after: the suites' classes refer to it."""
    if _DEFERRED[0] in sys.modules:
        return
    try:
        for name in _DEFERRED:
            _defer(name)
    except Exception:  # agentdojo laid out otherwise: import it as it is
        pass


def _defer(name: str) -> None:
    import importlib
    import importlib.util

    if name in sys.modules:
        return
    parent_name, _, child = name.rpartition(".")
    parent = importlib.import_module(parent_name)  # the parent package first, as an import would
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return
    constants = _literal_constants(spec.origin) if spec.origin and spec.origin.endswith(".py") else {}
    if constants is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(constants)
    module.__class__ = _DeferredModule
    sys.modules[name] = module
    setattr(parent, child, module)


def _literal_constants(path: str) -> dict[str, Any] | None:
    """The names a module's source binds once at its top level, each to an immutable literal, and their
    values; None when the source cannot be read."""
    import ast

    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    bound: Counter[str] = Counter()
    literals: dict[str, Any] = {}
    for node in tree.body:
        for child in ast.walk(node):  # every binding at any depth of a top-level statement (if, try, for, with)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound[child.name] += 1
            elif isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
                bound[child.id] += 1
            elif isinstance(child, ast.alias):
                bound[(child.asname or child.name).split(".")[0]] += 1
            elif isinstance(child, ast.ExceptHandler) and child.name:
                bound[child.name] += 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if _immutable(value):
                literals[node.targets[0].id] = value
    return {name: value for name, value in literals.items() if bound[name] == 1}


def _immutable(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_immutable(item) for item in value)
    return value is None or type(value) in (str, bytes, int, float, bool, complex)


def suite_for(version: str, suite: str) -> Any:
    """AgentDojo's task suite of one benchmark version; raises :class:`LookupError` naming the valid ones."""
    suites = agentdojo_modules()["get_suites"](version)
    if not suites:
        raise LookupError(f"unknown AgentDojo benchmark version {version!r}; known: {', '.join(benchmark_versions())}")
    if suite not in suites:
        raise LookupError(f"no suite {suite!r} in AgentDojo {version}; known: {', '.join(sorted(suites))}")
    return suites[suite]


def find_task(suite: Any, task_id: str) -> Any | None:
    """A user task, or an injection task run on its own as AgentDojo's ``injection_task_N/none`` runs are."""
    user_tasks, injection_tasks = _tasks(suite)
    return user_tasks.get(task_id) or injection_tasks.get(task_id)


def injection_tasks(suite: Any) -> dict[str, Any]:
    """A suite's injection tasks, by id (not to be changed)."""
    return _tasks(suite)[1]


_TASKS: dict[int, tuple[Any, dict[str, Any], dict[str, Any]]] = {}


def _tasks(suite: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A suite's user and injection tasks, as its ``user_tasks`` and ``injection_tasks`` give them, looked up
    once: each of those properties picks every task's version anew (a suite registers its tasks when its
    module is imported, and no task after)."""
    known = _TASKS.get(id(suite))
    if known is None or known[0] is not suite:
        known = _TASKS[id(suite)] = (suite, suite.user_tasks, suite.injection_tasks)
    return known[1], known[2]


# --- the environment, built once and copied per run -----------------------------------------------

_CANARY = "LITMUSINJECTION{}END"


class EnvironmentTemplate:
    """A suite's environment, parsed once, from which each run's environment is a copy.

    AgentDojo formats the injections into the environment's YAML text and parses it whole. Here the
    text is parsed once with a canary in every injection slot; each YAML scalar that holds a slot is
    kept as source text, and a run's environment is a copy of the parsed one in which every such string
    is replaced by its own scalar re-parsed with the run's injections: the same YAML decoding (folding,
    escapes) as AgentDojo's, at the cost of a few small scalars instead of the whole file. Where a
    run's injection would change the YAML's structure rather than one scalar's value, the run falls back
    to AgentDojo's own full build.
    """

    def __init__(self, version: str, suite_name: str):
        self.suite = suite_for(version, suite_name)
        self.version = version
        modules = agentdojo_modules()
        self.text = modules["read_suite_file"](self.suite.name, "environment.yaml", self.suite.data_path)
        self.defaults: dict[str, str] = self.suite.get_injection_vector_defaults()
        canaries = {vector: _CANARY.format(index) for index, vector in enumerate(self.defaults)}
        self.canaries = canaries
        # Versions that share a suite's environment file and type share its parse (most of them do): a
        # run replayed in several versions parses each environment once.
        key = (self.text, self.suite.environment_type, tuple(canaries))
        parsed = _PARSED.get(key)
        if parsed is None:
            parsed = _PARSED[key] = _parse(self.text.format(**canaries), self.suite.environment_type, canaries)
        self.base, self._pickled, self.scalars, self.paths = parsed

    def environment(self, injections: Mapping[str, str]) -> Any:
        """A fresh environment with the run's injections (the defaults for the slots it does not name)."""
        return self.copy(injections)[0]

    def copy(self, injections: Mapping[str, str]) -> tuple[Any, bool]:
        """:meth:`environment`, and whether it is a copy of the parsed one (False where AgentDojo built it)."""
        unknown = sorted(set(injections) - set(self.defaults))
        if unknown:
            raise LookupError(f"injection vectors unknown to {self.suite.name} {self.version}: {', '.join(unknown)}")
        values = {**self.defaults, **injections}
        decoded: dict[str, str] = {}
        for canary_value, source in self.scalars.items():
            value = _decode_scalar(source.format(**values))
            if not isinstance(value, str):  # the injection changes the YAML's structure: build it as AgentDojo does
                return self.suite.load_and_inject_default_environment(dict(injections)), False
            decoded[canary_value] = value
        environment = pickle.loads(self._pickled)
        owners = {}
        for path in self.paths:
            owner = _replace(environment, path, decoded)
            owners[id(owner)] = owner
        for owner in owners.values():  # fields derived from a replaced string (a file's size) follow it
            _revalidate(owner)
        return environment, True

    @functools.cached_property
    def separate(self) -> bool:
        """Whether no object of the parsed environment belongs to two of its sections (so neither do those of
        a copy: a copy keeps the parsed one's structure; a run's strings replace strings)."""
        return _separate_sections(self.base)


_PARSED: dict[tuple[str, Any, tuple[str, ...]], tuple[Any, bytes, dict[str, str], list[Any]]] = {}


def _parse(canary_text: str, environment_type: Any, canaries: Mapping[str, str]) -> tuple[Any, bytes, dict[str, str], list[Any]]:
    """An environment file with a canary in every injection slot: the parsed environment, its pickle (a
    copy loads from it about four times faster than a deep copy), each scalar that holds a slot (its parsed
    canary value -> its source text with ``{slot}``s), and the paths to the strings that hold one."""
    import yaml

    loader = yaml.SafeLoader(canary_text)  # what yaml.safe_load does, its node tree read on the way
    try:
        document = loader.get_single_node()
        scalars: dict[str, str] = {}
        for node in _scalar_nodes(document):  # before constructing, which may rewrite merge keys' nodes
            if "LITMUSINJECTION" in node.value:
                source = canary_text[node.start_mark.index : node.end_mark.index]
                for vector, canary in canaries.items():
                    source = source.replace(canary, "{" + vector + "}")
                scalars[node.value] = source
        data = loader.construct_document(document) if document is not None else None
    finally:
        loader.dispose()
    base = environment_type.model_validate(data)
    pickled = pickle.dumps(base, protocol=pickle.HIGHEST_PROTOCOL)
    return base, pickled, scalars, list(_string_paths(base, lambda text: text in scalars))


@functools.lru_cache(maxsize=8192)
def _decode_scalar(text: str) -> Any:
    """One YAML scalar's value (libyaml where PyYAML has it, 20 times faster); None when the text no
    longer parses."""
    import yaml

    # libyaml and PyYAML's own reader agree on printable ASCII; anything else is read as AgentDojo reads it.
    plain = text.isascii() and all(char.isprintable() or char in "\n\t" for char in text)
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader) if plain else yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _scalar_nodes(node: Any) -> Any:
    import yaml

    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.ScalarNode):
            yield current
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.extend((key, value))


def _children(value: Any) -> list[tuple[tuple[str, Any], Any]]:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return [(("attr", name), getattr(value, name)) for name in type(value).model_fields]
    if isinstance(value, dict):
        return [(("key", key), item) for key, item in value.items()] + [(("dictkey", key), key) for key in value]
    if isinstance(value, list):
        return [(("index", index), item) for index, item in enumerate(value)]
    return []


def _string_paths(root: Any, wanted: Callable[[str], bool]) -> Any:
    """Paths (steps from the root) to every string, value or dict key, for which ``wanted`` holds."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), root)]
    while stack:
        path, value = stack.pop()
        for step, child in _children(value):
            if isinstance(child, str):
                if wanted(child):
                    yield (*path, step)
            elif step[0] != "dictkey":
                stack.append(((*path, step), child))


def _replace(root: Any, path: tuple[tuple[str, Any], ...], decoded: Mapping[str, str]) -> Any:
    """Replace the string at ``path`` by its decoded form; returns the innermost model holding it."""
    from pydantic import BaseModel

    parent = owner = root
    for kind, key in path[:-1]:
        parent = getattr(parent, key) if kind == "attr" else parent[key]
        if isinstance(parent, BaseModel):
            owner = parent
    kind, key = path[-1]  # a string reached twice (an object shared in the model) is replaced once
    if kind == "attr":
        value = getattr(parent, key)
        setattr(parent, key, decoded.get(value, value))
    elif kind == "dictkey":  # rebuild the mapping in order, the key renamed
        items = list(parent.items())
        parent.clear()
        parent.update((decoded.get(k, k) if k == key else k, v) for k, v in items)
    else:
        parent[key] = decoded.get(parent[key], parent[key])
    return owner


def _revalidate(model: Any) -> None:
    """Run a model's own after-validators again, in place, as building it from the text would have."""
    for decorator in type(model).__pydantic_decorators__.model_validators.values():
        if decorator.info.mode == "after":
            decorator.func(model)


_TEMPLATES: dict[tuple[str, str], EnvironmentTemplate] = {}
_TEMPLATES_LOCK = threading.Lock()


def environment_template(version: str, suite: str) -> EnvironmentTemplate:
    """This process's template of a suite's environment (built on first use)."""
    key = (version, suite)
    with _TEMPLATES_LOCK:
        template = _TEMPLATES.get(key)
        if template is None:
            template = _TEMPLATES[key] = EnvironmentTemplate(version, suite)
        return template


# --- state: resources and digests -------------------------------------------------------------------


class EnvironmentState:
    """Resource id -> digest of an environment: one resource per item of every collection (an e-mail, a
    transaction, a file, a channel's messages) and per scalar field, so a call's effects name what it
    touched. A section whose JSON did not change keeps its digests: most calls only read.

    ``changed`` names the sections that may have changed since the last call (None: any of them); the others
    keep their digests without being written out again."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self._sections: dict[str, tuple[str, dict[str, str]]] = {}

    def __call__(self, environment: Any, changed: Collection[str] | None = None) -> dict[str, str]:
        state: dict[str, str] = {}
        for name in type(environment).model_fields:
            if changed is not None and name not in changed and name in self._sections:
                state.update(self._sections[name][1])
                continue
            section = getattr(environment, name)
            dumped = section.model_dump_json() if hasattr(section, "model_dump_json") else json.dumps(
                section, default=_json_default, sort_keys=True)
            cached = self._sections.get(name)
            if cached is None or cached[0] != dumped:
                base = f"{self.prefix}:{name}"
                known = _SECTION_STATES.get((base, dumped))  # the same initial section, seen by an earlier world
                if known is None:
                    known = _section_state(section, base)
                    if len(_SECTION_STATES) >= _SECTION_STATES_MAX:
                        _evict_oldest(_SECTION_STATES)
                    _SECTION_STATES[(base, dumped)] = known
                cached = self._sections[name] = (dumped, known)
            state.update(cached[1])
        return state


_SECTION_STATES: dict[tuple[str, str], dict[str, str]] = {}


def _evict_oldest(cache: dict[Any, Any]) -> None:
    """Drop a bounded cache's oldest entry; worker threads share these caches, so another may have done it."""
    try:
        cache.pop(next(iter(cache)), None)
    except (StopIteration, RuntimeError):  # emptied, or changed size under us: the cap holds well enough
        pass
_SECTION_STATES_MAX = 256


def _separate_sections(environment: Any) -> bool:
    """Whether no object (a model, a list, a dict, a set) is reachable from two sections of ``environment``."""
    from pydantic import BaseModel

    owner: dict[int, str] = {}
    for name in type(environment).model_fields:
        stack = [getattr(environment, name)]
        while stack:
            value = stack.pop()
            if isinstance(value, BaseModel):
                children: Any = [*value.__dict__.values(), *(value.__pydantic_extra__ or {}).values()]
            elif isinstance(value, dict):
                children = [*value, *value.values()]
            elif isinstance(value, (list, tuple, set, frozenset)):
                children = value
            else:
                continue
            seen = owner.get(id(value))
            if seen is not None:
                if seen != name:
                    return False
                continue  # met before in this section
            owner[id(value)] = name
            stack.extend(children)
    return True


@functools.lru_cache(maxsize=1024)
def _touched(version: str, suite: str, tool: str, environment_type: Any) -> frozenset[str] | None:
    """The sections of the environment a call of ``tool`` is given, which are all it can change, or None
    when that cannot be told (a dependency AgentDojo computes from the whole environment)."""
    function = _functions_runtime(version, suite).functions.get(tool)
    if function is None:  # an unknown tool changes nothing: AgentDojo answers with an error
        return frozenset()
    names = set()
    for dependency in function.dependencies.values():
        name = dependency.env_dependency
        if not isinstance(name, str) or name not in environment_type.model_fields:
            return None
        names.add(name)
    return frozenset(names)


def _section_state(section: Any, base: str) -> dict[str, str]:
    from pydantic import BaseModel

    if not isinstance(section, BaseModel):
        return {base: _digest(section)}
    state: dict[str, str] = {}
    for field_name in type(section).model_fields:
        value = getattr(section, field_name)
        where = f"{base}/{field_name}"
        if isinstance(value, dict):
            for key, item in value.items():
                state[f"{where}/{key}"] = _digest(item)
        elif isinstance(value, list) and value and not isinstance(value[0], (str, int, float)):
            for index, item in enumerate(value):
                state[f"{where}/{index}"] = _digest(item)
        else:
            state[where] = _digest(value)
    return state


def _digest(value: Any) -> str:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        data = value.model_dump_json().encode()
    else:
        data = json.dumps(value, default=_json_default, sort_keys=True).encode()
    return hashlib.blake2b(data, digest_size=10).hexdigest()


def _json_default(value: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


# --- the domains ------------------------------------------------------------------------------------


def _section(spec: Mapping[str, Any], field: str) -> dict[str, Any]:
    """The run's coordinates from a domain section, checked; raises :class:`WorldSpecError` naming the field."""

    def text(key: str, required: bool) -> str | None:
        value = spec.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            raise WorldSpecError(f"{field}.{key}", "expected a non-empty string")
        return value

    injections = spec.get("injections") or {}
    if not isinstance(injections, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in injections.items()):
        raise WorldSpecError(f"{field}.injections", "expected a mapping of injection vector -> text")
    output = spec.get("model_output")
    if output is not None and not isinstance(output, str):
        raise WorldSpecError(f"{field}.model_output", "expected a string")
    return {
        "version": text("version", True),
        "user_task": text("user_task", True),
        "injection_task": text("injection_task", False),
        "injections": dict(injections),
        "model_output": output,
    }


class AgentDojoReal(Domain):
    """A suite's environment with AgentDojo's own tool functions."""

    semantics = "real"
    suite: ClassVar[str]
    # The whole environment is a Python object in memory; agentdojo and its dependencies are not made
    # visible inside a sandbox or container, so isolated runtimes open these worlds in process.
    declaration = Declaration(in_memory=True, runtimes=("inprocess",), answers_unknown_tools=True)

    unavailable = staticmethod(unavailable)

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        with quiet_stdout():  # AgentDojo's code prints; the table is on stdout (see ..quiet_stdout)
            self._open(spec)

    def _open(self, spec: Mapping[str, Any]) -> None:
        field = f"world.{self.name}"
        run = _section(spec, field)
        self.modules = agentdojo_modules()
        try:
            template = environment_template(run["version"], self.suite)
        except LookupError as exc:
            raise WorldSpecError(f"{field}.version", str(exc.args[0])) from None
        self.task_suite = template.suite
        self.user_task = find_task(template.suite, run["user_task"])
        if self.user_task is None:
            raise WorldSpecError(f"{field}.user_task", f"no task {run['user_task']!r} in {self.suite} {run['version']}")
        self.injection_task = None
        if run["injection_task"] is not None:
            self.injection_task = injection_tasks(template.suite).get(run["injection_task"])
            if self.injection_task is None:
                raise WorldSpecError(f"{field}.injection_task",
                                     f"no injection task {run['injection_task']!r} in {self.suite} {run['version']}")
        try:
            environment, copied = template.copy(run["injections"])
        except LookupError as exc:
            raise WorldSpecError(f"{field}.injections", str(exc.args[0])) from None
        base_task = self.modules["BaseUserTask"]
        if isinstance(self.user_task, base_task):
            environment = self.user_task.init_environment(environment)
        self.environment = environment
        self.pre_environment = template.environment(run["injections"])
        if isinstance(self.user_task, base_task):
            self.pre_environment = self.user_task.init_environment(self.pre_environment)
        self.model_output = run["model_output"]
        self.version = run["version"]
        self.runtime = _functions_runtime(run["version"], self.suite)
        self.trace: list[Any] = []
        self._state: dict[str, str] | None = None
        self._tracker = EnvironmentState(self.name)
        # Which sections a call may have changed is known from the sections AgentDojo gives its tool, while no
        # object belongs to two sections: so in a copy of a parsed environment whose task adds nothing to it
        # (the default init_environment), until a call given two sections (which may tie them together).
        self._separate = copied and template.separate and (
            not isinstance(self.user_task, base_task)
            or getattr(type(self.user_task), "init_environment", None) is getattr(base_task, "init_environment", None))
        self._changed: set[str] | None = None  # the sections that may have changed since the last snapshot

    def invoke(self, call: Call) -> Any:
        self._state = None
        self._note_changes(call)
        self.trace.append(self.modules["FunctionCall"](function=call.tool, args=call.params, id=None))
        if call.tool not in self.runtime.functions:  # AgentDojo's tool executor answers it, never the runtime
            raise ServiceError("ToolNotFound", unknown_tool_answer(call.tool))  # type: ignore[arg-type]
        with quiet_stdout():
            result, error = self.runtime.run_function(self.environment, call.tool, call.params)
        if error is not None:
            raise ServiceError(error.split(":", 1)[0], error)  # type: ignore[arg-type]  # code: the exception type
        self._resolve(call)
        with quiet_stdout():
            return self.modules["tool_result_to_str"](result, dump_fn=_safe_dump)

    def _resolve(self, call: Call) -> None:
        """Record what the environment resolved that the call left implicit: the account an updated
        scheduled transfer now reaches when the update did not name one."""
        if call.tool == "update_scheduled_transaction" and not call.params.get("recipient"):
            account = getattr(self.environment, "bank_account", None)
            transaction = next((t for t in getattr(account, "scheduled_transactions", ())
                                if t.id == call.params.get("id")), None)
            if transaction is not None:
                call.resolve(recipient=transaction.recipient)
                call.note(f"scheduled transaction {transaction.id} reaches {transaction.recipient}")

    def _note_changes(self, call: Call) -> None:
        """Add the sections ``call`` may change to those to write out at the next snapshot."""
        touched = _touched(self.version, self.suite, call.tool, type(self.environment)) if self._separate else None
        if touched is None or self._changed is None:
            self._changed = None
        else:
            self._changed |= touched
        if touched is not None and len(touched) > 1:  # it may leave an object in two sections
            self._separate = False

    def snapshot(self) -> dict[str, str]:
        if self._state is None:  # only calls change the environment: the last snapshot holds until the next
            self._state = self._tracker(self.environment, self._changed)
            self._changed = set()
        return self._state

    def view(self) -> Any:
        """The whole environment as bounded JSON, for policies that read ``state``."""
        return _bounded(self.environment.model_dump(mode="json"))

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        """Each resource's value (an e-mail, a transaction, a file, as JSON), for the values effects carry.
        Remembered by digest across this process's worlds: most runs start from the same environment."""
        state = self.snapshot()
        found: dict[str, Any] = {}
        for resource in resources:
            digest = state.get(resource)
            if digest is None:
                continue
            key = (resource, digest)
            value = _VALUES.get(key, _MISSING)
            if value is _MISSING:
                value = _bounded(_resource_value(self.environment, resource))
                if len(_VALUES) >= _VALUES_MAX:
                    _evict_oldest(_VALUES)
                _VALUES[key] = value
            found[resource] = value
        return found

    def final_report(self) -> dict[str, Any]:
        """AgentDojo's own checks on the final environment and the trace: utility, and security when attacked."""
        output = [{"type": "text", "content": self.model_output}] if self.model_output else []
        report: dict[str, Any] = {"benchmark": "agentdojo", "suite": self.suite, "calls": len(self.trace)}
        _share_unchanged(self.pre_environment, self.environment)
        checks = [("utility", self.user_task)]
        if self.injection_task is not None:
            checks.append(("security", self.injection_task))
        for name, task in checks:
            try:
                with quiet_stdout():  # AgentDojo's checks print (workspace, slack): never into the table's stdout
                    report[name] = bool(self.task_suite._check_task_result(
                        task, output, self.pre_environment, self.environment, self.trace))
            except Exception as exc:  # a check that crashes on a replayed state is an answer, not a crash
                report[name] = None
                report[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
        self._state, self._changed = None, None  # the checks are AgentDojo's code: a later snapshot reads it all
        return report


_VALUES: dict[tuple[str, str], Any] = {}
_VALUES_MAX = 65536
_MISSING = object()


def _resource_value(environment: Any, resource: str) -> Any:
    """The JSON value of one resource id (``domain:section/field/key``) of an environment."""
    from pydantic import BaseModel

    _, _, path = resource.partition(":")
    parts = path.split("/", 2)
    value = getattr(environment, parts[0])
    if len(parts) > 1:
        value = getattr(value, parts[1])
    if len(parts) > 2:
        value = value[int(parts[2])] if isinstance(value, list) else value[parts[2]]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=_json_default))


def _bounded(value: Any) -> Any:
    from ..values import bounded

    return bounded(value)


_DUMPS: dict[str, str] = {}
_DUMPS_MAX = 4096


def _safe_dump(data: Any) -> str:
    """``yaml.safe_dump``, as AgentDojo formats a tool's result, remembered: runs read the same records
    again and again, and the pure-Python emitter costs milliseconds (libyaml's folds long lines differently).

    A list (search results, a channel's messages) is remembered item by item: the same e-mail or event comes
    back in many lists. A YAML block sequence is its items' texts one after the other, each item written
    from the start of its own line whatever came before; only an object that appears twice in the data
    (an anchor, ``&id001``, numbered across the whole document) ties them, so such a list is written whole."""
    if isinstance(data, list) and data and _unshared(data):
        return "".join(_dump([item]) for item in data)
    return _dump(data)


def _unshared(data: list[Any]) -> bool:
    """Whether no object appears twice in ``data`` (nothing PyYAML would write as an anchor and an alias),
    every value being a dict with string keys, a list, or a value PyYAML's safe dumper has a representer
    for (scalars, dates and times, AgentDojo's string enums)."""
    import yaml

    representers, multi = yaml.SafeDumper.yaml_representers, yaml.SafeDumper.yaml_multi_representers
    seen: set[int] = set()
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind not in representers and not any(base in multi for base in kind.__mro__):
            return False
        if value is None or isinstance(value, (str, bytes, bool, int, float)):  # never anchored
            continue
        if (kind not in (dict, list) and not isinstance(value, datetime.date)) or id(value) in seen:
            return False  # a set or a tuple; or an object met before
        seen.add(id(value))
        if kind is dict:
            if not all(type(key) is str for key in value):  # keys the cache's JSON key could confuse (1, "1")
                return False
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
    return True


def _dump(data: Any) -> str:
    import yaml

    try:  # datetimes and the like keyed by type and repr, never mistaken for a string
        key = json.dumps(data, default=lambda value: f"\0{type(value).__name__}:{value!r}")
    except (TypeError, ValueError):
        return yaml.safe_dump(data)
    text = _DUMPS.get(key)
    if text is None:
        text = yaml.safe_dump(data)
        if len(_DUMPS) >= _DUMPS_MAX:
            _evict_oldest(_DUMPS)
        _DUMPS[key] = text
    return text


def _share_unchanged(pre: Any, post: Any) -> None:
    """Make the pre-run environment hold the final one's own objects wherever the two are equal.

    AgentDojo's checks diff the two environments with DeepDiff, which skips a pair of identical objects
    at once but walks a pair of equal copies to the last leaf (a third of a second for a workspace). The
    diff of equal parts is empty either way, so the checks answer the same, in a fraction of the time.
    Only after the last call: from here on nothing changes either environment.
    """
    from pydantic import BaseModel

    for section_name in type(pre).model_fields:
        old, new = getattr(pre, section_name), getattr(post, section_name)
        if old == new:
            setattr(pre, section_name, new)
            continue
        if not isinstance(old, BaseModel) or type(old) is not type(new):
            continue
        for field_name in type(old).model_fields:
            before, after = getattr(old, field_name), getattr(new, field_name)
            if before == after:
                setattr(old, field_name, after)
            elif isinstance(before, dict) and isinstance(after, dict):
                for key, item in after.items():
                    if key in before and before[key] == item:
                        before[key] = item
            elif isinstance(before, list) and isinstance(after, list):
                for index, item in enumerate(after[: len(before)]):
                    if before[index] == item:
                        before[index] = item


EMPTY_FUNCTION_NAME = "<empty-function-name>"  # what AgentDojo records for a call a model left unnamed


def unknown_tool_answer(tool: str) -> str:
    """AgentDojo's tool executor's error for a call of a tool the suite lacks (in its own words)."""
    if tool == EMPTY_FUNCTION_NAME:
        return "Empty function name provided. Provide a valid function name."
    return f"Invalid tool {tool} provided."


@functools.lru_cache(maxsize=None)
def _functions_runtime(version: str, suite: str) -> Any:
    return agentdojo_modules()["FunctionsRuntime"](suite_for(version, suite).tools)


class AgentDojoStub(Domain):
    """The harness's view: every call answered with its recorded result, none refused."""

    semantics = "stub"
    suite: ClassVar[str]
    declaration = Declaration(in_memory=True, runtimes=("inprocess",), answers_unknown_tools=True)
    unavailable = staticmethod(unavailable)

    def invoke(self, call: Call) -> Any:
        recorded = call.recorded or {}
        if recorded.get("status") == "error":
            call.note(f"recorded error answered as the reply: {recorded.get('error')}")
            return recorded.get("output") or recorded.get("error")
        return recorded.get("output")

    def snapshot(self) -> dict[str, str]:
        return {}


def _tool_method(name: str) -> Callable[..., Any]:
    def method(self: Domain, call: Call, **params: Any) -> Any:
        raise NotImplementedError  # calls go through the class's invoke
    method.__name__ = name
    return tool(method)


def _suite_domain(base: type[Domain], suite: str) -> type[Domain]:
    members: dict[str, Any] = {name: _tool_method(name) for name in SUITE_TOOLS[suite]}
    members.update(name=domain_name(suite), suite=suite, __module__=__name__,
                   __doc__=f"AgentDojo's {suite} suite ({base.semantics} semantics).")
    cls = type(f"{base.__name__}{suite.title()}", (base,), members)
    return register_domain(cls)


DOMAINS = {
    (suite, semantics): _suite_domain(base, suite)
    for suite in SUITE_TOOLS
    for semantics, base in (("real", AgentDojoReal), ("stub", AgentDojoStub))
}
