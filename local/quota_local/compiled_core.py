"""Which scheduler core runs: compiled with mypyc, or the Python source.

The scheduler core and the simulator around it (`quota_local.scheduling`, `ledger`,
`simulate`, `workload`, `simulation_results`) may be installed compiled (`QUOTA_COMPILE_CORE=1`
at install, setup.py; `make venv` asks for it): C extension modules built from these same
files, which Python imports instead of them. The sources stay the one implementation and the
fallback. A build records the hash of each source it compiled (`compiled_core.json`); in a
checkout edited since, the build is stale, and `guard_stale_build` (run when `quota_local` is
imported) makes Python import the sources instead, rather than old code. Silently: the
sources are what the build would be, and a warning on stderr would change the output of every
command and test; `quotactl --version` says "pure" then.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from pathlib import Path
from types import ModuleType

_PACKAGE = Path(__file__).parent
MANIFEST = _PACKAGE / "compiled_core.json"


def compiled() -> bool:
    """Whether the scheduler core in use is the compiled one."""
    from quota_local import scheduling

    return (scheduling.__file__ or "").endswith(tuple(EXTENSION_SUFFIXES))


def describe() -> str:
    """ "compiled" or "pure" (Python), for `quotactl --version` and the bench."""
    return "compiled" if compiled() else "pure"


class _Sources(MetaPathFinder):
    """Finds the Python source of the core's modules, ahead of their stale compiled build."""

    def __init__(self, modules: Sequence[str]) -> None:
        self._modules = {f"quota_local.{name}" for name in modules}

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,  # noqa: ARG002 (the finder protocol's)
        target: ModuleType | None = None,  # noqa: ARG002
    ) -> ModuleSpec | None:
        if fullname not in self._modules:
            return None
        return importlib.util.spec_from_file_location(
            fullname, _PACKAGE / f"{fullname.rpartition('.')[2]}.py"
        )


def stale_modules(package: Path = _PACKAGE) -> list[str]:
    """The core's modules when a source differs from what the compiled build was built from,
    else [] (all of them go back to their source then: compiled modules call each other
    directly). `package`: the folder of quota_local."""
    manifest = package / MANIFEST.name
    if not manifest.is_file():
        return []  # a pure-Python install: nothing to check, nothing more to import
    import hashlib
    import json

    built: dict[str, str] = json.loads(manifest.read_text())
    for name, digest in built.items():
        path = package / f"{name}.py"
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return list(built)
    return []


def guard_stale_build() -> None:
    """Import the core from its sources when its compiled build is older than them."""
    stale = stale_modules()
    if not stale or any(isinstance(finder, _Sources) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _Sources(stale))
