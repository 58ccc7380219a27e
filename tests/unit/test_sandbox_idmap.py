"""How the sandbox chooses its id maps: root's host range, an ordinary user's subordinate ids, or the
user's one uid with a one-line notice; and which kernel setting is named when user namespaces are off."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.envs.runtimes import _idmap
from litmus_replay.envs.runtimes._idmap import MappingUnavailable, plan, subordinate_range, userns_disabled

NEED = 65535


@pytest.fixture
def ordinary_user(monkeypatch, tmp_path):
    """An ordinary user 'ann' (uid 1000, gid 1000) with subordinate id files under tmp_path."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: 1000)
    monkeypatch.setattr(_idmap.pwd, "getpwuid", lambda uid: type("pw", (), {"pw_name": "ann"})())
    monkeypatch.setattr(_idmap.shutil, "which", lambda name: f"/usr/bin/{name}")
    subuid, subgid = tmp_path / "subuid", tmp_path / "subgid"
    monkeypatch.setattr(_idmap, "SUBUID", str(subuid))
    monkeypatch.setattr(_idmap, "SUBGID", str(subgid))
    return subuid, subgid


@pytest.fixture
def root_host(monkeypatch, tmp_path):
    """Root, with the host's id files (subuid, subgid, passwd, group) under tmp_path, empty at first."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getegid", lambda: 0)
    files = {}
    for name in ("SUBUID", "SUBGID", "PASSWD", "GROUP"):
        files[name] = tmp_path / name.lower()
        files[name].write_text("")
        monkeypatch.setattr(_idmap, name, str(files[name]))
    files["PASSWD"].write_text("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/nonexistent:/bin/false\n")
    return files


def test_root_maps_its_host_range(root_host):
    idmap = plan("auto", 100000)
    assert idmap.mode == "host-range" and idmap.uid_lines == ((0, 100000, 65536),) and idmap.notice is None
    assert idmap.host_uid(10001) == 110001 and idmap.host_uid(65536) is None


def test_root_maps_by_default_a_range_above_what_useradd_and_nspawn_hand_out(root_host):
    assert plan("auto").uid_lines == ((0, 0x70000000, 65536),)


def test_root_never_maps_ids_a_subordinate_range_a_user_or_a_group_holds(root_host):
    # the first ordinary account's range, as useradd gives it, and someone's range over the default block
    root_host["SUBUID"].write_text("ann:100000:65536\ncarol:1879048192:100000\n")
    root_host["GROUP"].write_text(f"big:x:{0x70000000 + 200000}:\n")
    base = plan("auto").uid_lines[0][1]
    held = [(1879048192, 100000), (0x70000000 + 200000, 1), (100000, 65536)]
    assert base % 65536 == 0 and base >= 0x70000000
    assert not [(start, count) for start, count in held if start < base + 65536 and base < start + count]
    assert plan("auto").uid_lines == ((0, base, 65536),)  # the same block every time


@pytest.mark.parametrize("name, line", [("SUBUID", "ann:100000:65536"), ("SUBGID", "ann:150000:65536"),
                                        ("PASSWD", "eve:x:120000:120000::/home/eve:/bin/sh"), ("GROUP", "eve:x:165535:")])
def test_a_uid_base_someone_holds_is_refused_with_a_free_one(root_host, name, line):
    root_host[name].write_text(line + "\n")
    with pytest.raises(MappingUnavailable) as refused:
        plan("host-range", 100000)
    message = str(refused.value)
    assert str(root_host[name]) in message and line.split(":")[0] in message
    assert "uid_base=1879048192 (free)" in message


def test_an_ordinary_user_with_a_range_maps_it_through_the_helpers(ordinary_user):
    subuid, subgid = ordinary_user
    subuid.write_text("bob:100000:65536\nann:231072:65536\n")
    subgid.write_text("1000:300000:70000\n")  # by uid works too
    idmap = plan("auto", 100000)
    assert idmap.mode == "subordinate" and idmap.helpers == ("/usr/bin/newuidmap", "/usr/bin/newgidmap")
    assert idmap.uid_lines == ((0, 1000, 1), (1, 231072, NEED))
    assert idmap.gid_lines == ((0, 1000, 1), (1, 300000, NEED))
    assert idmap.host_uid(0) == 1000 and idmap.host_uid(10001) == 231072 + 10000
    assert not idmap.shared_uid and idmap.notice is None and not idmap.staged_by_host_root


@pytest.mark.parametrize("subuid_text, helpers, missing", [
    ("", True, "no range"),
    ("ann:231072:1000\n", True, "no range"),  # too small for the principals
    ("ann:231072:65536\n", False, "newuidmap and newgidmap are not installed"),
])
def test_without_a_range_or_the_helpers_the_principals_share_the_users_uid_and_it_says_so(
        ordinary_user, monkeypatch, subuid_text, helpers, missing):
    subuid, subgid = ordinary_user
    subuid.write_text(subuid_text)
    subgid.write_text(subuid_text)
    if not helpers:
        monkeypatch.setattr(_idmap.shutil, "which", lambda name: None)
    idmap = plan("auto", 100000)
    assert idmap.mode == "single-uid" and idmap.shared_uid and not idmap.setgroups
    assert idmap.uid_lines == ((0, 1000, 1),) and idmap.helpers is None
    notice = idmap.notice
    assert notice is not None and "\n" not in notice and missing in notice
    assert "apt-get install uidmap" in notice and "usermod --add-subuids" in notice and "ann" in notice
    with pytest.raises(MappingUnavailable, match=missing):
        plan("subordinate", 100000)  # asked for by name: refused, with the remedy


def test_an_ordinary_user_cannot_ask_for_a_host_range(ordinary_user):
    with pytest.raises(MappingUnavailable, match="root"):
        plan("host-range", 100000)


@given(st.lists(st.tuples(st.sampled_from(["ann", "1000", "bob", "#x", ""]), st.integers(-5, 2**32),
                          st.integers(-5, 200000)), max_size=6))
def test_the_subordinate_range_is_the_first_of_the_users_that_is_large_enough(tmp_path_factory, entries):
    path = tmp_path_factory.mktemp("sub") / "subuid"
    path.write_text("".join(f"{name}:{start}:{count}\n" for name, start, count in entries) + "garbage\n")
    found = subordinate_range(str(path), "ann", 1000, NEED)
    fitting = [(s, c) for n, s, c in entries if n in ("ann", "1000") and s > 0 and c >= NEED]
    assert found == (fitting[0] if fitting else None)


@pytest.mark.parametrize("name, value, euid, off", [
    ("user.max_user_namespaces", "0", 0, True),
    ("user.max_user_namespaces", "0", 1000, True),
    ("kernel.unprivileged_userns_clone", "0", 1000, True),
    ("kernel.unprivileged_userns_clone", "0", 0, False),  # root is not concerned
    ("kernel.apparmor_restrict_unprivileged_userns", "1", 1000, True),
    ("kernel.apparmor_restrict_unprivileged_userns", "0", 1000, False),
])
def test_a_disabling_kernel_setting_is_named(monkeypatch, name, value, euid, off):
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    files = {"/proc/sys/" + name.replace(".", "/"): value}
    reason = userns_disabled(files.get)
    if off:
        assert reason is not None and f"{name} = {value}" in reason and f"sysctl -w {name}=" in reason
    else:
        assert reason is None
