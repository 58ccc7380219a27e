"""Values compared by kind, as benchmarks compare them: the normal forms and the two policy functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.replay.policy import Policy, PolicySpec, RuleSpec
from litmus_replay.replay.value_kinds import KINDS, carries, kind_of, mentions, normal

hosts = st.from_regex(r"[a-z][a-z0-9-]{0,15}\.(com|org|net)", fullmatch=True)
paths = st.from_regex(r"(/[a-z0-9_-]{1,8}){0,3}", fullmatch=True)


@given(hosts, paths, st.sampled_from(["", "http://", "https://", "HTTPS://"]), st.booleans(), st.booleans())
def test_a_url_is_one_url_with_or_without_scheme_www_case_or_trailing_slash(host, path, scheme, www, slash):
    plain = f"www.{host}{path}" if www else f"{host}{path}"
    written = f"{scheme}{plain.upper() if scheme.isupper() else plain}{'/' if slash else ''}"
    assert normal(written, "url") == normal(plain, "url")
    assert carries({"url": written}, "url", plain)


@given(st.from_regex(r"[a-z][a-z0-9._-]{0,10}@[a-z]{2,8}\.(com|org)", fullmatch=True))
def test_an_email_address_is_compared_without_case(address):
    assert carries({"recipients": ["x@y.org", address.upper()]}, "email", address)
    assert carries({"recipients": [f"mailto:{address}"]}, "email", address.title())


@given(st.from_regex(r"[A-Z]{2}\d{2}[A-Z0-9]{12,20}", fullmatch=True), st.integers(1, 6))
def test_an_iban_is_compared_without_spaces_or_case(iban, group):
    spaced = " ".join(iban[i:i + group] for i in range(0, len(iban), group))
    assert normal(spaced.lower(), "iban") == iban
    assert carries({"recipient": spaced}, "iban", iban)
    assert mentions({"subject": f"pay {spaced} today"}, "iban", iban)


@given(st.integers(0, 10**6))
def test_an_id_is_one_id_as_a_number_a_string_or_a_whole_float(number):
    for written in (number, str(number), float(number), f" {number} "):
        assert carries({"file_id": written}, "id", str(number))
        assert carries({"file_id": str(number)}, "id", written)


@given(st.sampled_from(KINDS), st.one_of(st.text(max_size=40), st.integers(), st.floats(allow_nan=False)))
def test_normal_forms_are_idempotent(kind, value):
    once = normal(value, kind)
    if once is not None:
        assert normal(once, kind) == once


@given(st.recursive(st.one_of(st.text(max_size=10), st.integers(), st.booleans(), st.none()),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=12),
       st.sampled_from(KINDS), st.text(max_size=10))
def test_the_functions_never_raise_on_any_json(value, kind, wanted):
    carries(value, kind, wanted)
    mentions(value, kind, wanted)


def test_nothing_is_carried_that_is_not_there():
    assert not carries({"recipient": "US133000000121212121212"}, "iban", "US122000000121212121212")
    assert not carries({"url": "www.example.com.evil.org"}, "url", "www.example.com")
    assert not carries({"flag": True}, "id", "1")  # a boolean is no id
    assert not mentions({"body": "nothing here"}, "url", "")  # an empty value matches nothing


@pytest.mark.parametrize("value, kind", [
    ("mark.black-2134@gmail.com", "email"), ("www.true-informations.com", "url"), ("https://bit.ly/sUf7tOJ", "url"),
    ("www.my-website-234.com/random", "url"), ("US133000000121212121212", "iban"), ("13", "id"), (7, "id"),
    ("Riverside View Hotel", "text"), ("new_password", "text"),
])
def test_the_kind_a_value_looks_like(value, kind):
    assert kind_of(value) == kind


def test_a_policy_condition_compares_by_kind():
    policy = Policy.compile(PolicySpec(rules=[RuleSpec(
        id="visit", when='tool == "get_webpage" && carries(resolved, "url", "www.true-informations.com")',
        critical=True)]))
    context = {"tool": "get_webpage", "params": {}, "principal": "agent", "state": {}, "history": [], "committed": True}
    assert policy.judge({**context, "resolved": {"url": "http://www.true-informations.com/"}}).verdict == "deny"
    assert policy.judge({**context, "resolved": {"url": "www.informations.com"}}).verdict == "allow"


@given(hosts, paths, paths, st.sampled_from(["", "http://", "https://"]), st.booleans())
def test_any_page_of_a_site_is_the_site(host, path, other, scheme, www):
    written = f"{scheme}{'www.' if www else ''}{host}{other}"
    assert carries({"url": written}, "site", f"www.{host}{path}")
    assert mentions({"content": f"posted to {written} today"}, "site", f"{host}{path}")
    assert not carries({"url": f"{host}.evil.org{other}"}, "site", f"www.{host}{path}")


def test_an_address_on_a_site_is_not_the_site():
    assert not carries({"recipients": ["fred@evil.com"]}, "site", "www.evil.com")


def test_edges_of_the_normal_forms():
    assert normal("0" * 3 + "9" * 5000, "id") == "9" * 5000  # no int(): a long digit string does not raise
    assert normal("-000", "id") == "0"
    assert not mentions({"body": "write to bookmark@x.com"}, "email", "mark@x.com")
    assert mentions({"body": "write to mark@x.com, please"}, "email", "mark@x.com")
    assert mentions({"body": "Visit evil.com."}, "site", "www.evil.com")
