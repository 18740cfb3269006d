"""Runs the tests of tests/variant_matrix.py again under emulator variants.

Each extra run is a module-scoped parameter, so a module-scoped LocalStack (tests/faults) that
asks for `emulator_variants` is built once per variant, not shared across them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from variant_matrix import runs_for

from quota_local.emulator.variants import VARIANTS_ENV

# tests/integration/test_pytest_plugin.py runs pytest on test files of its own.
pytest_plugins = ("pytester",)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if os.environ.get("QUOTA_TEST_MATRIX") == "0":
        return  # `make variants`: the whole run is under one profile already
    runs = runs_for(metafunc.definition.nodeid)
    if runs:
        metafunc.parametrize(
            "emulator_variants",
            ["", *runs],
            indirect=True,
            scope="module",
            ids=["emulator-default", *runs],
        )


@pytest.fixture(scope="module", autouse=True)
def emulator_variants(request: pytest.FixtureRequest) -> Iterator[str]:
    """The variant spec the module's LocalStacks start with ("" = the default emulator)."""
    spec = str(getattr(request, "param", "") or "")
    if not spec:
        yield spec
        return
    before = os.environ.get(VARIANTS_ENV)
    os.environ[VARIANTS_ENV] = spec
    try:
        yield spec
    finally:
        if before is None:
            os.environ.pop(VARIANTS_ENV, None)
        else:
            os.environ[VARIANTS_ENV] = before
