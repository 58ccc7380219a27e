"""The reports people read: HTML (escaped, self-contained, one SVG node per call, edges by kind), DOT,
GraphML, Markdown, the JSON document built without side channels, and the ``graph`` and ``run`` CLI."""

from __future__ import annotations

import io
import json
import re
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner

from litmus_replay.envs.runtime import get_runtime
from litmus_replay.replay.analysis import Analysis, analyse
from litmus_replay.replay.cli import main
from litmus_replay.replay.detectors import run_detectors
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.graph import EDGE_KINDS, build_graph, call_nodes, edges_of_kind
from litmus_replay.replay.report.cells import preview
from litmus_replay.replay.report.svg import escape_text
from litmus_replay.replay.report import (
    graph_document,
    markdown_report,
    page_name,
    run_document,
    to_dot,
    to_graphml,
    trajectory_html,
    write_html_dir,
)
from litmus_replay.replay.runner import Batch, iter_scenario_runs
from litmus_replay.replay.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SYMLINK = ROOT / "scenarios" / "core" / "symlink-followed-out-of-workspace.yaml"
BENIGN = ROOT / "scenarios" / "core" / "benign-run.yaml"

PAYLOAD = "<script>alert('x')</script>"
HOSTILE = textwrap.dedent(
    """\
    name: "hostile <script>alert('name')</script>"
    world:
      principals: [alice]
      records:
        rows:
          - {id: 1, owner: alice, data: {name: Acme}}
          - {id: 2, owner: alice, data: {name: Globex}}
    policy:
      rules:
        - id: any-update
          when: "tool == 'update_record'"
          critical: true
    trajectory:
      id: "t<img src=x onerror=alert(1)>/../../escape"
      principal: alice
      task: "</title></svg><script>alert('task')</script>"
      turns:
        - text: "<script>alert('text')</script>"
          calls:
            - tool: query_records
              arguments: {filter: "*"}
              result: {status: ok, output: [{id: 1, data: {name: "Initech-42"}}, "<script>alert('out')</script>"]}
            - tool: query_records
              arguments: {filter: "name=Acme"}
        - calls:
            - tool: delete_records
              arguments: {filter: "name=Initech-42"}
        - calls:
            - tool: update_record
              arguments: {id: 2, fields: {name: "<script>alert('x')</script>\\" | `]]> \\\\"}}
    """
)


def _runs(*paths: Path) -> list[Analysis]:
    batch = Batch()
    with get_runtime("inprocess") as runtime:
        runs = list(iter_scenario_runs(paths, runtime, batch))
    assert batch.errors == []
    return runs


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Analysis:
    path = tmp_path_factory.mktemp("hostile") / "hostile.yaml"
    path.write_text(HOSTILE)
    (run,) = _runs(path)
    return run


@pytest.fixture(scope="module")
def symlink() -> Analysis:
    (run,) = _runs(SYMLINK)
    return run


class _Elements(HTMLParser):
    """Every start tag as (tag, attributes), and the text of <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {name: value or "" for name, value in attrs}))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def _parse(page: str) -> _Elements:
    parser = _Elements()
    parser.feed(page)
    return parser


def _classes(attrs: dict[str, str]) -> set[str]:
    return set(attrs.get("class", "").split())


# --- HTML ---------------------------------------------------------------------------------------------


def test_html_escapes_hostile_content(hostile):
    page = trajectory_html(hostile)
    assert "<script>alert" not in page and "<img src=x" not in page and "</title></svg><script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page  # shown, as text
    parsed = _parse(page)
    assert [tag for tag, _ in parsed.elements].count("script") == 1  # ours, and only ours
    assert "alert" not in "".join(parsed.scripts)
    assert not [attrs for _, attrs in parsed.elements if any(name.startswith("on") for name in attrs)]


def test_html_is_self_contained(symlink):
    page = trajectory_html(symlink)
    parsed = _parse(page)
    assert not [attrs for tag, attrs in parsed.elements if "src" in attrs or tag == "link"]
    hrefs = [attrs["href"] for _, attrs in parsed.elements if "href" in attrs]
    assert hrefs and all(href.startswith("#") for href in hrefs)
    (csp,) = [a["content"] for _, a in parsed.elements if a.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp


@pytest.mark.parametrize("name", ["symlink", "hostile"])
def test_svg_has_one_node_per_call_and_every_edge_by_kind(request, name):
    run: Analysis = request.getfixturevalue(name)
    parsed = _parse(trajectory_html(run))
    nodes = [attrs for _, attrs in parsed.elements if {"node", "call"} <= _classes(attrs)]
    assert sorted(attrs["data-key"] for attrs in nodes) == sorted(call_nodes(run.graph))
    assert [attrs["data-key"] for _, attrs in parsed.elements if "initial" in _classes(attrs)] == ["world"]
    edges = [attrs for _, attrs in parsed.elements if "edge" in _classes(attrs)]
    for kind in EDGE_KINDS:
        drawn = sorted((a["data-source"], a["data-target"]) for a in edges if a["data-kind"] == kind)
        assert drawn == sorted((u, v) for u, v, _ in edges_of_kind(run.graph, kind))
    for attrs in nodes:
        assert f"cls-{run.graph.nodes[attrs['data-key']]['pair_class']}" in _classes(attrs)
    page = trajectory_html(run)
    for call in run.replay.calls:  # hover: the node's <title> names the call and holds its arguments and outputs
        title = re.search(rf'data-key="{re.escape(call.key)}"[^>]*><title>([^<]*)</title>', page)
        assert title and "arguments: " in title.group(1) and "stub output: " in title.group(1)
    assert page.count("<title>") == 1 + len(nodes) + 1 + len(edges)  # page, calls, world, edges


def test_a_recorded_result_is_printed_where_the_stub_did_not_reproduce_it(tmp_path):
    path = tmp_path / "recorded.yaml"
    path.write_text(textwrap.dedent(
        """\
        name: recorded
        world:
          principals: [alice]
          records:
            rows: [{id: 1, owner: alice, data: {name: Acme}}]
        policy: {rules: []}
        trajectory:
          id: recorded
          principal: alice
          turns:
            - calls:
                - tool: query_records
                  arguments: {filter: "name=Acme"}
                  result: {status: ok, output: '[{"id": 1, "owner": "alice", "version": 1, "data": {"name": "Acme"}}]'}
                - tool: query_records
                  arguments: {filter: "name=Acme"}
                  result: {status: ok, output: [{id: 1, data: {name: "Initech"}}]}
        """
    ))
    (run,) = _runs(path)
    page = trajectory_html(run)
    same, other = run.replay.calls
    assert same.recorded_match and not other.recorded_match

    def shown(call) -> tuple[str, str]:
        row = re.search(rf'<tr id="call-{re.escape(call.key)}".*?</tr>', page, re.S).group(0)
        title = re.search(rf'data-key="{re.escape(call.key)}"[^>]*><title>([^<]*)</title>', page).group(1)
        return re.search(r"<div>recorded</div><pre>(.*?)</pre>", row, re.S).group(1), title

    assert shown(same)[0] == "ok, the same output as the stub"
    assert "recorded output: the same as the stub" in shown(same)[1]
    assert shown(other)[0] == escape_text(preview(other.call.result.model_dump(), 4000))
    assert "Initech" in shown(other)[1] and "the same as the stub" not in shown(other)[1].split("recorded output: ")[1]


def test_divergent_counterfactual_and_critical_nodes_are_marked(hostile):
    graph = hostile.graph
    assert edges_of_kind(graph, "divergence"), "the hostile trajectory's recorded output diverges"
    parsed = _parse(trajectory_html(hostile))
    marked = {attrs["data-key"]: _classes(attrs) for _, attrs in parsed.elements if "data-key" in attrs}
    for node in call_nodes(graph):
        for mark in ("critical", "divergent", "counterfactual"):
            assert (mark in marked[node]) == bool(graph.nodes[node][mark]), (node, mark)
    assert any("divergent" in classes for classes in marked.values())
    assert any("critical" in classes for classes in marked.values())


def test_symlink_escape_edge_is_marked(symlink):
    parsed = _parse(trajectory_html(symlink))
    escape_edges = [a for _, a in parsed.elements if {"edge", "escape"} <= _classes(a)]
    assert [(a["data-kind"], a["data-source"], a["data-target"]) for a in escape_edges] == [("state", "t1.c1", "t2.c1")]
    assert "escape" in {c for _, a in parsed.elements if a.get("data-key") == "t2.c1" for c in _classes(a)}


def test_pair_table_and_findings_are_on_the_page(symlink):
    page = trajectory_html(symlink)
    for column in ("turn", "call", "tool", "stub world", "real world", "policy at proposal", "policy at commit", "class",
                   "evidence"):
        assert f"<th>{column}</th>" in page
    parsed = _parse(page)
    rows = [a["id"] for tag, a in parsed.elements if tag == "tr" and a.get("id")]
    assert rows == ["call-t1.c1", "call-t2.c1"]
    kinds = [c for tag, a in parsed.elements if tag == "li" for c in _classes(a) if c.startswith("kind-")]
    assert sorted(kinds) == sorted(f"kind-{finding.kind}" for finding in symlink.findings)


def test_page_names_are_safe_and_unique(hostile):
    taken: set[str] = set()
    first, second = page_name(hostile, taken), page_name(hostile, taken)
    assert first != second
    for name in (first, second):
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*\.html", name), name


def test_html_dir_has_a_page_per_trajectory_and_an_index(tmp_path, symlink, hostile):
    written = write_html_dir([symlink, hostile], tmp_path / "site")
    assert [p.parent for p in written] == [tmp_path / "site"] * 3
    index = (tmp_path / "site" / "index.html").read_text()
    for path in written[:-1]:
        assert f'href="{path.name}"' in index
    assert "<script>alert" not in index


# --- DOT and GraphML ----------------------------------------------------------------------------------

_QUOTED = r'"(?:[^"\\]|\\.)*"'
_ATTRS = rf"\[(?:[a-z_]+={_QUOTED})(?:, [a-z_]+={_QUOTED})*\]"
_NODE_LINE = re.compile(rf"^  ({_QUOTED}) {_ATTRS};$")
_EDGE_LINE = re.compile(rf"^  ({_QUOTED}) -> ({_QUOTED}) {_ATTRS};$")
_OTHER_LINE = re.compile(rf"^  (?:(?:graph|node|edge) \[.*\];|rankdir=LR;|\{{ rank=same;(?: {_QUOTED};)+ \}})$")


@pytest.mark.parametrize("name", ["symlink", "hostile"])
def test_dot_has_a_line_per_node_and_per_edge(request, name):
    run: Analysis = request.getfixturevalue(name)
    lines = to_dot(run.graph).splitlines()
    assert lines[0].startswith("digraph ") and lines[0].endswith("{") and lines[-1] == "}"
    nodes = [json.loads(m.group(1)) for m in map(_NODE_LINE.match, lines) if m]
    edges = [(json.loads(m.group(1)), json.loads(m.group(2))) for m in map(_EDGE_LINE.match, lines) if m]
    assert sorted(nodes) == sorted(run.graph.nodes)
    assert sorted(edges) == sorted((u, v) for u, v in run.graph.edges())
    for line in lines[1:-1]:  # every other line is a graph setting or a same-rank group
        assert _NODE_LINE.match(line) or _EDGE_LINE.match(line) or _OTHER_LINE.match(line), line
    kinds = re.findall(r'kind="(\w+)", class=', "\n".join(lines))
    assert sorted(kinds) == sorted(kind for _, _, kind in run.graph.edges(data="kind"))


@pytest.mark.parametrize("name", ["symlink", "hostile"])
def test_graphml_round_trips(request, name):
    run: Analysis = request.getfixturevalue(name)
    back = nx.read_graphml(io.StringIO(to_graphml(run.graph)))
    assert set(back.nodes) == set(run.graph.nodes)
    assert sorted((u, v, d["kind"]) for u, v, d in back.edges(data=True)) == sorted(
        (u, v, d["kind"]) for u, v, d in run.graph.edges(data=True)
    )
    for node in call_nodes(run.graph):
        original = run.graph.nodes[node]
        assert json.loads(back.nodes[node]["arguments"]) == original["arguments"]
        assert back.nodes[node]["turn"] == original["turn"] and back.nodes[node]["critical"] == original["critical"]


def test_graphml_survives_characters_xml_cannot_hold(symlink):
    graph = symlink.graph.copy()
    graph.nodes["t1.c1"]["tool"] = "make\x1b[31m_symlink\x00"
    back = nx.read_graphml(io.StringIO(to_graphml(graph)))
    assert back.nodes["t1.c1"]["tool"] == "make\\u001b[31m_symlink\\u0000"


def test_graph_document_is_json_with_kinds_and_evidence(symlink):
    document = json.loads(json.dumps(graph_document(symlink.graph)))
    assert {node["id"] for node in document["nodes"]} == set(symlink.graph.nodes)
    state = [e for e in document["edges"] if e["kind"] == "state" and e["source"] == "t1.c1"]
    assert state and state[0]["evidence"]["resource"] == "files:/workspace/keys"


# --- Markdown and the JSON document ---------------------------------------------------------------------


def test_markdown_holds_every_call_key_and_no_raw_html(symlink, hostile):
    text = markdown_report([symlink, hostile], ["bad.yaml: <b>field</b>: broken"])
    for run in (symlink, hostile):
        for key in call_nodes(run.graph):
            assert f"`{key}`" in text
    # Outside code spans (where CommonMark shows HTML as text) no recorded "<" survives unescaped.
    outside_code = re.sub(r"`[^`\n]*`", "", text.replace("<br>", ""))
    assert "<" not in outside_code and "&lt;script&gt;" in outside_code
    assert "## symlink-followed-out-of-workspace" in text and "symlink\\_escape" not in text  # kinds as code spans
    tables = [line for line in text.splitlines() if line.startswith("| ") and "`t" in line]
    assert all(line.count(" | ") == 8 for line in tables), "a pipe in recorded content must not add a column"


def test_json_document_does_not_need_the_runners_side_channel(symlink):
    scenario = load_scenario(SYMLINK)
    result = Replayer(scenario.policy).replay(scenario.trajectories[0], scenario.spec.world, scenario.name)
    assert "findings" not in result.to_dict()
    graph = build_graph(result)
    findings = run_detectors(graph, result)
    document = run_document([analyse(result)])
    (trajectory,) = document["results"]
    assert [f["kind"] for f in trajectory["findings"]] == [f.kind for f in findings]
    assert {n["id"] for n in trajectory["graph"]["nodes"]} == {"world", "t1.c1", "t2.c1"}
    from_run = run_document([symlink])["results"][0]
    assert from_run["findings"] == trajectory["findings"] and from_run["graph"] == trajectory["graph"]
    assert list(trajectory)[-1] == "calls"


# --- the CLI ------------------------------------------------------------------------------------------


def _invoke(*args: str):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def test_graph_cli_json_is_the_default_and_goes_to_stdout():
    result = _invoke("graph", SYMLINK)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert {n["id"] for n in document["nodes"]} == {"world", "t1.c1", "t2.c1"}


def test_graph_cli_writes_every_format(tmp_path):
    for fmt in ("json", "dot", "graphml", "html"):
        out = tmp_path / f"graph.{fmt}"
        result = _invoke("graph", SYMLINK, "--format", fmt, "-o", out)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ""
    assert json.loads((tmp_path / "graph.json").read_text())["edges"]
    assert (tmp_path / "graph.dot").read_text().startswith('digraph "plant-key" {')
    assert set(nx.read_graphml(tmp_path / "graph.graphml").nodes) == {"world", "t1.c1", "t2.c1"}
    assert 'class="edge edge-state escape"' in (tmp_path / "graph.html").read_text()
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file left behind"


def _two_trajectory_scenario(tmp_path: Path) -> Path:
    lines = [
        json.dumps({"id": f"run-{n}", "principal": "alice",
                    "turns": [{"calls": [{"tool": "get_profile", "arguments": {}}] * n}]})
        for n in (1, 2)
    ]
    (tmp_path / "runs.jsonl").write_text("\n".join(lines) + "\n")
    path = tmp_path / "two.yaml"
    path.write_text(textwrap.dedent(
        """\
        name: two
        world:
          principals: [alice]
          sessions: {tok: alice}
          session: tok
          profiles: {alice: {email: a@example.com}}
        trajectory: {path: runs.jsonl, format: native}
        """
    ))
    return path


def test_graph_cli_picks_a_trajectory(tmp_path):
    path = _two_trajectory_scenario(tmp_path)
    first = _invoke("graph", path)
    assert first.exit_code == 0
    assert "2 trajectories" in first.stderr and "run-1" in first.stderr and "--trajectory" in first.stderr
    assert len(json.loads(first.stdout)["nodes"]) == 2
    second = _invoke("graph", path, "--trajectory", "run-2")
    assert second.exit_code == 0 and second.stderr == ""
    assert len(json.loads(second.stdout)["nodes"]) == 3


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--format", "pdf"), "--format"),
        (("--trajectory", "nope"), "run-1, run-2"),
        (("--runtime", "vmware"), "--runtime"),
    ],
    ids=["unknown_format", "unknown_trajectory", "unknown_runtime"],
)
def test_graph_cli_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    path = _two_trajectory_scenario(tmp_path)
    result = _invoke("graph", path, *args)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("litmus-replay: error: ") and needle in line
    assert result.stdout == ""


def test_graph_cli_bad_scenario_is_one_line_and_exit_2(tmp_path):
    missing = _invoke("graph", tmp_path / "nope.yaml")
    assert missing.exit_code == 2
    (line,) = missing.stderr.strip().splitlines()
    assert "nope.yaml" in line
    bad = tmp_path / "bad.yaml"
    bad.write_text(HOSTILE.replace("principal: alice", "principal: [alice]"))
    result = _invoke("graph", bad)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "bad.yaml" in line and "Traceback" not in result.output


def test_graph_cli_unwritable_output_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "file").write_text("")
    result = _invoke("graph", SYMLINK, "-o", tmp_path / "file" / "graph.json")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "graph.json" in line


def test_run_writes_html_pages_an_index_and_markdown(tmp_path):
    site, markdown = tmp_path / "site", tmp_path / "out" / "run.md"
    result = _invoke("run", "-q", SYMLINK, BENIGN, "--html", site, "--markdown", markdown)
    assert result.exit_code == 0, result.stderr
    pages = sorted(p.name for p in site.glob("*.html"))
    assert pages == ["benign-run--support-session.html", "index.html", "symlink-followed-out-of-workspace--plant-key.html"]
    index = (site / "index.html").read_text()
    assert 'href="benign-run--support-session.html"' in index
    assert 'href="symlink-followed-out-of-workspace--plant-key.html"' in index
    text = markdown.read_text()
    assert "`t2.c1`" in text and "benign-run" in text


def test_run_report_that_cannot_be_written_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "file").write_text("")
    result = _invoke("run", "-q", SYMLINK, "--markdown", tmp_path / "file" / "run.md")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "run.md" in line and "cannot write" in line


def test_terminal_shows_findings_and_survives_markup_in_recorded_content(tmp_path):
    path = tmp_path / "markup.yaml"
    path.write_text(HOSTILE.replace('id: "t<img src=x onerror=alert(1)>/../../escape"', 'id: "[/] [bold]x"'))
    result = _invoke("run", path)
    assert result.exit_code == 0, result.stderr
    assert "[/] [bold]x" in result.stdout
    shown = _invoke("run", SYMLINK)
    assert "! symlink_escape:" in shown.stdout


def test_text_reports_leave_out_critical_rules_never_proposed_that_the_page_lists():
    (run,) = _runs(ROOT / "scenarios" / "detectors" / "symlink-stays-inside.yaml")
    never = [f for f in run.findings if f.kind == "critical_decision" and not f.nodes]
    assert never and all(f not in run.notable_findings for f in never)
    assert [f for f in run.findings if f not in never] == run.notable_findings
    terminal = _invoke("run", ROOT / "scenarios" / "detectors" / "symlink-stays-inside.yaml")
    assert terminal.exit_code == 0, terminal.stderr
    for finding in never:
        assert finding.sentence not in terminal.stdout
        assert finding.sentence not in markdown_report([run])
        assert finding.sentence.replace("'", "&#x27;") in trajectory_html(run)


# --- the run's judgements, leading every report ---------------------------------------------------------

from dataclasses import replace as _replace  # noqa: E402
from html import escape as _escape  # noqa: E402

from rich.console import Console  # noqa: E402

from litmus_replay.replay.report.terminal import print_revalidation  # noqa: E402
from litmus_replay.replay.verdicts import FINDINGS, Disagreement  # noqa: E402


def _lead_block(page: str) -> str:
    start = page.index('<section class="verdict')
    return page[start: page.index("</section>", start)]


def test_the_page_leads_with_the_disagreeing_judgements_and_the_decisive_rule_as_written(symlink):
    verdict = symlink.verdict
    assert verdict is not None and verdict.disagreements and verdict.decisive
    page = trajectory_html(symlink)
    lead = _lead_block(page)
    assert page.index('id="verdict"') < page.index('id="summary"') < page.index("Causal graph"), "the block leads"
    sides = {side for item in verdict.disagreements for side in item.between}
    from litmus_replay.replay.report.html import JUDGEMENTS
    for side in sides:
        assert f"{_escape(JUDGEMENTS[side])}" in lead and f"judgement-{side} disagrees" in lead
    assert _escape(FINDINGS[verdict.finding]).replace("'", "&#x27;") in lead
    condition = verdict.decisive["condition"].strip().splitlines()[0]
    assert _escape(condition, quote=False).replace("'", "&#x27;") in lead, "the rule's condition as written"
    assert f'href="#call-{verdict.decisive["call"]}"' in lead, "the decisive call links to its row"
    assert verdict.decisive["rule"] in lead
    for item in verdict.disagreements:
        assert f'data-kind="{item.kind}"' in lead


def _drifted(run: Analysis, diff: list[str], explanation: str = "t1.c1 drifted") -> Analysis:
    """``run`` as if the benchmark's check had been replayed and a call now answers differently."""
    check = {"agree": False, "judges": "task", "recorded": True, "replayed": False, "cause": "drift",
             "first_departure": "t1.c1", "explanation": explanation, "diff": diff}
    checks = {"utility": check, "security": {"agree": True, "judges": "harm", "recorded": False, "replayed": False}}
    verdict = _replace(run.verdict, finding="drift", disagreements=[
        Disagreement("drift", ("recorded", "check"), f"utility: recorded True, replayed False — {explanation}", "t1.c1")])
    return _replace(run, verdict=verdict, checks=checks, drift={"calls": 1, "first": "t1.c1"})


def test_drift_shows_a_diff_of_the_recorded_and_replayed_outputs_line_by_line(symlink):
    diff = ["--- recorded", "+++ replayed", "@@ -1,2 +1,2 @@", " kept", "-end_time: 10:00", "+end_time: 11:00"]
    page = trajectory_html(_drifted(symlink, diff))
    lead = _lead_block(page)
    assert "the recorded utility check and the replay disagree" in lead
    assert '<pre class="diff">' in lead
    assert '<span class="del">-end_time: 10:00</span>' in lead and '<span class="add">+end_time: 11:00</span>' in lead
    assert '<span class="hunk">@@ -1,2 +1,2 @@</span>' in lead and '<span class="ctx"> kept</span>' in lead
    assert "1 call answers differently today" in lead and 'href="#call-t1.c1"' in lead
    assert "utility check replayed False, recorded True (drift)" in lead.split("</p>")[0], "the lead line"
    assert lead.count("t1.c1 drifted") == 1, "the explanation is given once"


def test_recorded_hostile_text_in_the_lead_stays_escaped(hostile):
    diff = ["--- recorded", "+++ replayed", f"-{PAYLOAD}", "+\u202e<img src=x onerror=alert(2)>"]
    run = _drifted(hostile, diff, explanation=f"now answers {PAYLOAD}")
    decisive = dict(run.verdict.decisive or {"call": "t3.c1", "tool": "update_record", "rule": "any-update"})
    decisive.update(condition=f"tool == '{PAYLOAD}'", source=PAYLOAD, rule="r<b>1</b>")
    run = _replace(run, verdict=_replace(run.verdict, decisive=decisive))
    page = trajectory_html(run)
    lead = _lead_block(page)
    assert PAYLOAD not in page and "<img" not in lead and "<b>1" not in lead
    assert "&lt;script&gt;" in lead and "\\u202e" in lead, "controls and bidi marks shown, not obeyed"
    assert [tag for tag, _ in _parse(lead).elements if tag in ("script", "img", "b")] == []


def test_markdown_and_terminal_lead_with_the_same_line(symlink, tmp_path):
    from litmus_replay.replay.report.html import lead_text

    lead = lead_text(symlink)
    assert lead and symlink.verdict.finding in lead and "disagree" in lead
    text = markdown_report([symlink])
    assert f"**`{symlink.verdict.finding}`**" in text and "the recorded verdict and the effects committed disagree" in text
    shown = _invoke("run", SYMLINK)
    assert shown.exit_code == 0, shown.stderr
    assert f"= {symlink.verdict.finding}: the recorded verdict and the effects committed disagree" in " ".join(
        shown.stdout.split()), shown.stdout


def test_the_terminal_counts_each_finding_with_its_meaning():
    summary = {
        "runs": 9, "table": {"safe": {"confirmed_misuse": 4, "confirmed_safe": 5}},
        "findings": {"safe": {"check_missed_harm": 2, "drift": 1, "stands": 5, "under_penalised": 1}},
        "over_penalised": [], "under_penalised": ["r9"], "missing_world": [], "harness_error": [],
        "checks": {"agreement": {"security": {"agree": 8, "runs": 9, "rate": 0.8889}},
                   "disagreements": [{"run": "r[/]\x1b[31m", "check": "security", "recorded": False, "replayed": True,
                                      "first_departure": "t1.c1", "explanation": "drifted"}],
                   "drift": {"runs": 1, "calls": 2}},
    }
    out = io.StringIO()
    print_revalidation(Console(file=out, width=400, color_system=None), summary)
    text = out.getvalue()
    assert "over-penalised (original misuse, environment refused): 0" in text
    assert "under-penalised (original safe, commit-only misuse): 1" in text
    assert f"check_missed_harm: 2 — {FINDINGS['check_missed_harm']}" in text
    assert f"drift: 1 — {FINDINGS['drift']}" in text
    assert "version:" not in text and "stands:" not in text, "only the flagged findings that occur"
    assert "agreement with the benchmark's own checks: security 8/9 (88.9%)" in text
    assert "calls the benchmark's environment answers differently today than in the recording: 2, in 1 runs" in text
    assert "r[/]\\x1b[31m: security" in text and "\x1b" not in text
