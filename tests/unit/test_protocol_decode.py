"""The protocol reads every message exactly as ``json.loads`` does, whichever library reads it: msgspec
where it is importable (the host, a sandbox's server), the standard library elsewhere (a server in an
image of its own). Values the two libraries could read differently cross the protocol unchanged."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from litmus_replay.envs import protocol
from litmus_replay.envs.client import EnvClient
from litmus_replay.envs.protocol import decode, encode

# What a recorded argument may hold once the standard library has read it: NaN and infinities, integers
# past 64 bits, lone surrogates (all of which ``json`` reads and writes), and anything else JSON has.
SCALARS = (st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True)
           | st.integers(min_value=-(2**200), max_value=2**200) | st.text()
           | st.sampled_from(["\ud800", "a\udfffb", "\x00", "é", "🦀"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                      max_leaves=20)
# The same values, each as the standard library reads it back; repr tells 1 from 1.0 and -0.0 from 0.0.
EDGES = {"nan": math.nan, "inf": -math.inf, "big": 2**70, "neg": -(2**64) - 1, "lone": "\ud800", "huge": 1e308,
         "past_u64": [2**64 + 10**18 + 1, 19933688932870350000, 19999999999999999999],
         "nested": [{"x": [math.inf, 18446744073709551615, "\udfff"]}]}


def _as_json_reads(value: object) -> str:
    return repr(json.loads(json.dumps(value)))


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_a_message_is_read_as_the_standard_library_reads_it(value):
    line = encode({"id": 1, "value": value})
    assert repr(decode(line)) == repr(json.loads(line))


@given(st.text(alphabet="0123456789-.eE+[]{}\":,nNaIfity ", max_size=40))
def test_text_that_is_not_a_message_is_refused_as_the_standard_library_refuses_it(text):
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            decode(text.encode())
        return
    if isinstance(expected, dict):
        assert repr(decode(text.encode())) == repr(expected)
    else:
        with pytest.raises(ValueError, match="a message must be a JSON object"):
            decode(text.encode())


def test_the_host_reads_with_msgspec(monkeypatch):
    assert protocol.decoder() == "msgspec"

    def refused(*args, **kwargs):
        raise AssertionError("read with json")

    monkeypatch.setattr(protocol.json, "loads", refused)
    assert decode(b'{"id": 3, "values": [1, 2.5, "x", 18446744073709551616]}') == {"id": 3, "values": [1, 2.5, "x", 2**64]}


@pytest.mark.parametrize("depth", [10, 5000])
def test_a_message_nested_past_what_either_library_reads_is_refused_as_a_value_error(depth):
    line = b'{"a":' + b"[" * depth + b"]" * depth + b"}"
    if depth < 100:
        assert decode(line) == json.loads(line)
    else:
        with pytest.raises(ValueError, match="nested too deeply"):
            decode(line)


def _bare_server(bare_envs: Path) -> subprocess.Popen:
    """A server as an image of its own runs one: ``-S``, from a bare copy of the package, no msgspec."""
    return subprocess.Popen([sys.executable, "-S", "-m", "litmus_replay.envs.server", "--stdio"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={"PYTHONPATH": str(bare_envs), "PATH": "/usr/bin:/bin"})


def _echo(client: EnvClient) -> object:
    """The edge values sent as a call's parameters and read back from its outcome."""
    client.request("load", spec={"principals": ["alice"], "profiles": {"alice": {"email": "a"}}}, semantics="real")
    outcome = client.request("call", request={"tool": "update_profile", "principal": "alice",
                                              "params": {"field": "email", "value": "b", "extra": EDGES}})
    return outcome["resolution"]["resolved_params"]["extra"]


def test_servers_with_and_without_msgspec_read_the_same_values(bare_envs, env_server):
    bare = _bare_server(bare_envs)
    try:
        without = EnvClient(bare.stdout.fileno(), bare.stdin.fileno(), timeout=30)
        assert without.hello()["decoder"] == "json"
        read_bare = _echo(without)
    finally:
        bare.stdin.close()
        bare.wait(timeout=30)
        bare.stdout.close()
    fast = env_server()
    with_msgspec = EnvClient(fast.stdout.fileno(), fast.stdin.fileno(), timeout=30)
    assert with_msgspec.hello()["decoder"] == "msgspec"
    expected = _as_json_reads(EDGES)
    assert repr(read_bare) == expected
    assert repr(_echo(with_msgspec)) == expected
