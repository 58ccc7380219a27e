"""The README and the docs pages say what the code has: the README stays short and opens with the commands
CI and the tests run, every page is in the site's navigation, and the tables that list what the code
defines (detectors, pair classes, schemas, entry-point groups, benchmark scripts) list all of it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import click
import yaml

from litmus_replay.replay.cli import main
from litmus_replay.replay.detectors import DETECTORS
from litmus_replay.replay.scoring import PairClass

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_the_readme_is_short_and_opens_with_the_commands_ci_and_the_tests_run():
    assert len(README.encode("utf-8")) <= 10_000
    for command in ("pip install -e . && litmus-replay revalidate corpus/runs --worlds corpus/worlds --out out",
                    "pip install -e '.[test]' && python -m pytest",
                    'python -m pytest -m "not slow"'):
        assert f"```bash\n{command}\n```" in README, command
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test]' && python -m pytest\n" in ci  # CI runs the README's test command verbatim


def test_the_readme_and_the_pages_link_to_files_that_exist():
    for source in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        text = source.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            assert (source.parent / target).exists(), f"{source.relative_to(ROOT)} links to a missing {target}"


def _nav_pages(entries) -> set[str]:
    pages = set()
    for entry in entries:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            pages |= _nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_every_page_is_in_the_navigation():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # tags and all, as text
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md") if "_extensions" not in path.parts}
    assert pages == _nav_pages(config["nav"])


def test_the_detectors_table_lists_every_detector():
    reports = page("guides/reports.md")
    for name in DETECTORS:
        assert f"| `{name}` |" in reports, name


def test_the_pair_classes_table_lists_every_class():
    concepts = page("concepts.md")
    for cls in PairClass:
        assert f"| `{cls.value}` |" in concepts, cls


def test_the_schemas_page_names_every_shipped_schema_and_every_name_the_command_takes():
    schemas = page("reference/schemas.md")
    for file in (ROOT / "replay" / "schemas").glob("*.json"):
        assert f"`replay/schemas/{file.name}`" in schemas, file.name
    choices = next(param for param in main.get_command(click.Context(main), "schema").params if param.name == "what")
    for name in choices.type.choices:
        assert f"| `{name}`" in schemas, name


def test_every_entry_point_group_is_on_the_extending_page():
    extending = page("extending.md")
    groups = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"])
    for source in ROOT.glob("[ear]*/**/*.py"):
        groups |= set(re.findall(r'(?:GROUP|ENTRY_POINT_GROUP)\s*=\s*"([\w.]+)"', source.read_text(encoding="utf-8")))
    assert {"litmus_replay.domains", "litmus_replay.worlds", "pytest11"} <= groups
    for group in groups:
        assert f"`{group}`" in extending, group


def test_every_benchmark_named_in_the_docs_exists():
    named = set()
    for source in DOCS.rglob("*.md"):
        named |= set(re.findall(r"benchmarks/(\w+\.py)", source.read_text(encoding="utf-8")))
    assert named
    for script in named:
        assert (ROOT / "benchmarks" / script).is_file(), script
