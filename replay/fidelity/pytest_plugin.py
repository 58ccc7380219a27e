"""pytest plugin (registered through ``pytest11``): the ``stub_fidelity`` fixture.

A sandbox engineer measures their own stub against its real semantics inside their test suite::

    def test_my_stub_is_faithful(stub_fidelity):
        stub_fidelity(my_call_space, min_agreement=0.99)

The fixture runs the lab's state machine on the call space (or a registered domain's, by name), fails the
test when agreement is below ``min_agreement``, printing every minimal counterexample, and otherwise returns
the :class:`~litmus_replay.replay.fidelity.FidelityResult`. Nothing is imported until a test asks for it.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stub_fidelity: a test that measures a stub against its real twin")


@pytest.fixture
def stub_fidelity() -> Any:
    """A function ``(space_or_domain, *, min_agreement=1.0, profile=None, examples=50, seed=0, steps=5,
    runtime="inprocess")`` that measures a stub and fails the test below ``min_agreement``."""
    from litmus_replay.envs.runtime import get_runtime

    from .lab import measure
    from .report import describe_counterexamples
    from .registry import get_space
    from .space import CallSpace

    def check(space: CallSpace | str, *, min_agreement: float = 1.0, profile: str | None = None, examples: int = 50,
              seed: int = 0, steps: int = 5, runtime: str = "inprocess") -> Any:
        chosen = get_space(space) if isinstance(space, str) else space
        with get_runtime(runtime) as real_runtime:
            result = measure(chosen, get_runtime("inprocess"), real_runtime, profile=profile, examples=examples,
                             seed=seed, steps=steps)
        if result.error is not None:
            pytest.fail(f"stub fidelity of {result.label}: the run stopped: {result.error}", pytrace=False)
        if result.agreement < min_agreement:
            pytest.fail(
                f"stub fidelity of {result.label}: agreement {100 * result.agreement:.1f} % over "
                f"{result.tally.compared} calls is below {100 * min_agreement:.1f} %\n"
                + describe_counterexamples(result),
                pytrace=False,
            )
        return result

    return check
