"""The notes stub measured against the notes service with the stub_fidelity fixture.

``owner-checked`` is faithful and passes. ``default`` is the canned store most harnesses ship: it deletes
another's note that the service refuses, and this test fails, printing the minimal counterexample.
"""

from fidelity_demo.space import notes_space


def test_owner_checked_stub_is_faithful(stub_fidelity):
    result = stub_fidelity(notes_space, profile="owner-checked", min_agreement=1.0, examples=30)
    assert not result.counterexamples


def test_canned_stub_is_faithful(stub_fidelity):
    stub_fidelity(notes_space, profile="default", min_agreement=0.99, examples=30)
