"""The HTML report in a real browser: headless Chromium loads the page written by ``run --html`` for the
symlink-escape scenario without a console message, and the DOM it builds holds one SVG node per call and
the escape edge. A screenshot is left in ``build/test-artifacts/`` for a person to look at.

Chromium is Debian's ``chromium`` package. Without it these tests skip, unless LITMUS_REQUIRE_BROWSER=1
(as in CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from litmus_replay.replay.cli import main
from litmus_replay.replay.report.export import CLASS_COLOURS
from litmus_replay.replay.report.svg import ESCAPE_COLOUR
from litmus_replay.replay.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "core" / "symlink-followed-out-of-workspace.yaml"
PAGE = "symlink-followed-out-of-workspace--plant-key.html"
ARTIFACTS = ROOT / "build" / "test-artifacts"
BROWSER_NAMES = ("chromium", "chromium-browser")
# Chromium logs every console message (console.error, an uncaught exception, a CSP violation) as a line
# like `INFO:CONSOLE:12] "Uncaught ReferenceError: ..."` (older builds: `CONSOLE(12)`).
CONSOLE_LINE = re.compile(r"CONSOLE[(:]\d*\)?|Uncaught")


def _browser() -> str:
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    reason = "headless Chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("LITMUS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"LITMUS_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> str:
    return _browser()


def _chromium(browser: str, page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
        f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *extra, page.resolve().as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def screenshot(browser: str, page: Path, profile: Path, name: str, size: str) -> subprocess.CompletedProcess[str]:
    """Open the page in Chromium and keep a screenshot under ARTIFACTS for review: the page must load
    without a console message and draw a real picture, not a blank one."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / name
    shot.unlink(missing_ok=True)
    proc = _chromium(browser, page, profile, f"--screenshot={shot}", f"--window-size={size}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_errors(proc.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, "a real picture, not a blank page"
    assert re.search(rb"IHDR", data)
    return proc


def dump_dom(browser: str, page: Path, profile: Path, fragment: str = "") -> str:
    """The page's DOM after its script ran, as headless Chromium dumps it (no console message allowed)."""
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
               f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--dump-dom",
               page.resolve().as_uri() + fragment]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_errors(proc.stderr) == [], proc.stderr[-2000:]
    return proc.stdout


def console_errors(stderr: str) -> list[str]:
    """The console lines in Chromium's log: any message at all counts (the report page logs nothing)."""
    return [line for line in stderr.splitlines() if CONSOLE_LINE.search(line)]


class _Svg(HTMLParser):
    """Start tags inside the causal graph's <svg>."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        attributes = {name: value or "" for name, value in attrs}
        if tag == "svg" and "causal-graph" in attributes.get("class", "").split():
            self.depth = 1
        elif self.depth:
            self.elements.append((tag, attributes))
            if tag == "svg":
                self.depth += 1

    def handle_endtag(self, tag):
        if tag == "svg" and self.depth:
            self.depth -= 1


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    result = CliRunner().invoke(main, ["run", "-q", str(SCENARIO), "--html", str(site)])
    assert result.exit_code == 0, result.output
    return site / PAGE


def test_detection_catches_console_errors(browser, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>broken</title></head><body><p>x</p>"
        "<script>console.error('deliberate'); notDefinedAnywhere();</script></body></html>"
    )
    proc = _chromium(browser, broken, tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = console_errors(proc.stderr)
    assert any("deliberate" in line for line in errors), proc.stderr[-2000:]
    assert any("Uncaught" in line and "notDefinedAnywhere" in line for line in errors), proc.stderr[-2000:]


def test_page_loads_without_console_errors_and_draws_the_graph(browser, report, tmp_path):
    proc = _chromium(browser, report, tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_errors(proc.stderr) == []
    svg = _Svg()
    svg.feed(proc.stdout)
    classes = [(set(attrs.get("class", "").split()), attrs) for _, attrs in svg.elements]
    nodes = sorted(attrs["data-key"] for cls, attrs in classes if {"node", "call"} <= cls)
    assert nodes == ["t1.c1", "t2.c1"], "one node per call"
    assert [attrs["data-key"] for cls, attrs in classes if {"node", "initial"} <= cls] == ["world"]
    escapes = [(a["data-kind"], a["data-source"], a["data-target"]) for cls, a in classes if {"edge", "escape"} <= cls]
    assert escapes == [("state", "t1.c1", "t2.c1")]
    kinds = sorted(a["data-kind"] for cls, a in classes if "edge" in cls)
    assert kinds == ["data", "state", "state"]  # the link's path carried whole: one data edge, not one per word
    drawn = {kind: [a["d"] for tag, a in svg.elements if tag == "path" and a.get("class") == kind] for kind in ("line", "hit")}
    assert len(drawn["line"]) == len(kinds) and drawn["hit"] == drawn["line"], "the script lays a hit path under every edge"


def test_screenshot_for_review(browser, report, tmp_path):
    """The picture left for review is the page as drawn: the window's size, each call's class in its
    colour, and the escape edge."""
    screenshot(browser, report, tmp_path / "profile", "symlink-followed-out-of-workspace.png", "1400,1000")
    width, height, colours = png_colours((ARTIFACTS / "symlink-followed-out-of-workspace.png").read_bytes())
    assert (width, height) == (1400, 1000)
    expected = load_scenario(SCENARIO).spec.expect.calls
    for cls in set(expected.values()):
        fill = _rgb(CLASS_COLOURS[str(cls)][0])
        assert fill in colours, f"no pixel of {cls}'s colour {CLASS_COLOURS[str(cls)][0]}"
    assert _rgb(ESCAPE_COLOUR) in colours, "the escape edge is drawn"


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def png_colours(data: bytes) -> tuple[int, int, set[tuple[int, int, int]]]:
    """Width, height and the set of RGB colours of an 8-bit RGB or RGBA PNG without interlacing (what
    Chromium's screenshots are), decoded here so the tests need no imaging library."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        position += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    step = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * step
    previous = bytearray(stride)
    colours: set[tuple[int, int, int]] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(step, stride):
                line[i] = (line[i] + line[i - step]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - step] if i >= step else 0
                line[i] = (line[i] + (left + previous[i]) // 2) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - step] if i >= step else 0
                b, c = previous[i], previous[i - step] if i >= step else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        colours.update(zip(line[0::step], line[1::step], line[2::step]))
        previous = line
    return width, height, colours
