"""constraints.txt is the lock of this repository's virtualenv: what `make venv` installs is
exactly what it pins, every dependency of a dependency included, so a fresh clone, CI and the
package check's wheelhouse get the same versions."""

from __future__ import annotations

from importlib.metadata import distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# The installer's own (a virtualenv's bootstrap, not a dependency) and the project itself.
NOT_LOCKED = frozenset({"pip", "setuptools", "wheel", "batch-quota-controller"})


def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"constraints.txt: {line} is not an exact pin"
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_the_virtualenv_is_exactly_the_lock() -> None:
    installed = {
        canonicalize_name(d.metadata["Name"]): d.version
        for d in distributions()
        if canonicalize_name(d.metadata["Name"]) not in NOT_LOCKED
    }
    locked = _locked()
    unlocked = {n: v for n, v in installed.items() if n not in locked}
    assert not unlocked, f"installed but not in constraints.txt: {unlocked}"
    moved = {n: (locked[n], v) for n, v in installed.items() if locked[n] != v}
    assert not moved, f"(locked, installed) differ: {moved}"
    assert not set(locked) - set(installed), "locked but not installed"
