"""The direction of imports in DESIGN.md, and no import cycle: the import-linter contracts in pyproject.toml,
plus the rules a contract cannot say, over the same import graph (grimp; imports inside functions count)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = ("litmus_replay.envs", "litmus_replay.replay", "litmus_replay.adapters")
# The envs core runs inside a sandbox or container from a read-only mount: the standard library and pyfakefs
# only. The host side of the runtimes (and the Docker SDK behind the docker engine) is not core.
HOST_SIDE = ("litmus_replay.envs.runtimes",)
# A bridge's real semantics are its benchmark's own package, imported lazily behind an optional extra.
BRIDGES = ("litmus_replay.envs.bridges",)
CORE_EXTERNALS = {"pyfakefs"}
# ... and what one module reads faster with where it can be imported, and without where not (a server in an
# image of its own: test_protocol_decode runs one without it).
OPTIONAL_IMPORTS = {"litmus_replay.envs.protocol": {"msgspec"}}
# ... and the plug-in loader every registry shares, which imports only the standard library.
ADAPTERS_MAY_IMPORT = ("litmus_replay.adapters", "litmus_replay.replay.model", "litmus_replay.replay.errors",
                       "litmus_replay.replay.limits", "litmus_replay.envs.plugins")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # litmus_replay is a regular package (the checkout's __init__.py): its folders are not top-level packages.
    return grimp.build_graph("litmus_replay", include_external_packages=True, cache_dir=None)


def _project_edges(graph: grimp.ImportGraph) -> nx.DiGraph:
    edges = nx.DiGraph()
    for module in graph.modules:
        if module.startswith(PACKAGES):
            edges.add_node(module)
            edges.add_edges_from((module, imported) for imported in graph.find_modules_directly_imported_by(module)
                                 if imported.startswith(PACKAGES))
    return edges


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_import_linter_contracts_are_kept():
    # In a child interpreter: import-linter configures logging for its process (it would silence ours).
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_module_imports_itself_back(graph):
    cycles = sorted(nx.simple_cycles(_project_edges(graph)), key=len)
    assert cycles == [], f"import cycle: {' -> '.join(cycles[0] + cycles[0][:1])}"


def test_adapters_reach_only_the_model_errors_and_limits(graph):
    wrong = sorted((module, imported) for module, imported in _project_edges(graph).edges
                   if _within(module, ("litmus_replay.adapters",)) and not _within(imported, ADAPTERS_MAY_IMPORT))
    assert wrong == []


def test_the_envs_core_needs_only_the_standard_library_and_pyfakefs(graph):
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    wrong = sorted(
        (module, imported)
        for module in graph.modules
        if _within(module, ("litmus_replay.envs",)) and not _within(module, HOST_SIDE + BRIDGES)
        for imported in graph.find_modules_directly_imported_by(module)
        if not imported.startswith(PACKAGES)
        and imported.split(".")[0] not in stdlib | CORE_EXTERNALS | OPTIONAL_IMPORTS.get(module, set())
    )
    assert wrong == []


def test_a_bridge_imports_its_benchmark_only_when_a_world_opens():
    import subprocess

    code = ("import sys, litmus_replay.envs.bridges.agentdojo as b; "
            "print(sorted(m for m in ('agentdojo', 'yaml', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_judging_calls_does_not_import_the_cel_librarys_command_line():
    import subprocess

    code = ("import sys, litmus_replay.replay.policy as p; "
            "p.Policy.compile(p.PolicySpec(rules=[p.RuleSpec(id='r', when='call.tool == \"x\"')])); "
            "print(sorted(m for m in ('cel.cli', 'prompt_toolkit', 'typer') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_plugin_loader_the_adapters_may_import_brings_nothing_else_of_the_project(graph):
    imported = graph.find_modules_directly_imported_by("litmus_replay.envs.plugins")
    assert sorted(module for module in imported if module.startswith(PACKAGES)) == []
