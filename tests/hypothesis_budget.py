"""How many examples the slowest property tests draw: a CI-sized count by default, a larger one for
benchmark-style runs.

``HYPOTHESIS_PROFILE`` picks the budget: unset or ``ci`` (the suite's run, ``scripts/check.sh``), or
``thorough`` (the counts these tests drew before the suite was cut to fit CI's time limit, or more):

    HYPOTHESIS_PROFILE=thorough .venv/bin/python -m pytest tests/test_state_machine.py -q

A test names both counts (``examples(ci=30, thorough=60)``), so what CI draws and what a thorough run
draws are read side by side; the strategies, the properties and the assertions are the same in both. The
same names are registered as hypothesis profiles (``settings.load_profile``) for tests that take the
profile's defaults. Any other value of ``HYPOTHESIS_PROFILE`` is a usage error that names the variable.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILES = ("ci", "thorough")
ENV_VAR = "HYPOTHESIS_PROFILE"


def active_profile() -> str:
    """The budget in force: ``ci`` or ``thorough``. ``ValueError`` naming ``HYPOTHESIS_PROFILE`` otherwise."""
    name = os.environ.get(ENV_VAR, "").strip() or "ci"
    if name not in PROFILES:
        raise ValueError(f"{ENV_VAR}={name!r}: expected one of {', '.join(PROFILES)}")
    return name


def examples(*, ci: int, thorough: int) -> int:
    """The example count of the active budget (``ci`` <= ``thorough``, both positive)."""
    if not 0 < ci <= thorough:
        raise ValueError(f"examples(ci={ci}, thorough={thorough}): need 0 < ci <= thorough")
    return thorough if active_profile() == "thorough" else ci


def load() -> str:
    """Register both budgets as hypothesis profiles and load the active one; its name."""
    settings.register_profile("ci", settings(max_examples=100))
    settings.register_profile("thorough", settings(max_examples=500))
    name = active_profile()
    settings.load_profile(name)
    return name
