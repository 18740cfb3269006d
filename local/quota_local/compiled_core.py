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

`QUOTA_PURE_CORE=1` in the environment makes it import the sources too, build or not (to
compare both cores, measure coverage or profile the Python); `--version` says "pure" then.

What a build depends on is more than the core's five files: mypyc compiles them against the
types of every project module they import (`quota_controller.domain.config`'s model, timeline,
validation, and what those import). `compiled_against` finds those modules from the imports
themselves; setup.py hashes all of them into the record, and the Makefile rebuilds when one
changes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
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


CORE: tuple[str, ...] = ("ledger", "scheduling", "simulation_results", "workload", "simulate")
# The project's packages and the folders they live in, in a checkout (pyproject.toml,
# [tool.setuptools.packages.find]).
PROJECT = {"quota_controller": "layers/core", "quotactl": "cli", "quota_local": "local"}


def compiled_against(root: Path, modules: Sequence[str] = CORE) -> list[str]:
    """The files (relative to their package's folder: `quota_controller/domain/config/model.py`)
    of the quota_local `modules` and of every project module they import, directly or not,
    with the packages on the way: what mypyc reads the types of when it compiles them. `root`:
    the checkout (setup.py's folder)."""
    import ast

    found: set[str] = set()
    todo = [f"quota_local.{name}" for name in modules]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        if parts[0] not in PROJECT:
            continue
        folder = root / PROJECT[parts[0]]
        candidates = [Path(*parts) / "__init__.py", Path(*parts).with_suffix(".py")]
        relative = next((c for c in candidates if (folder / c).is_file()), None)
        if relative is None or relative.as_posix() in found:
            continue  # a name imported from a module, not a module
        found.add(relative.as_posix())
        package = parts if relative.name == "__init__.py" else parts[:-1]
        todo += [".".join(parts[:n]) for n in range(1, len(parts))]
        for node in ast.walk(ast.parse((folder / relative).read_bytes())):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    above = package[: len(package) - node.level + 1]
                    base = ".".join([*above, *([base] if base else [])])
                todo.append(base)
                todo += [f"{base}.{alias.name}" for alias in node.names]  # a submodule, maybe
    return sorted(found)


def _package_folder(top: str, quota_local: Path) -> Path | None:
    """Where the installed package `top` is, without importing it."""
    if top == "quota_local":
        return quota_local
    spec = importlib.util.find_spec(top)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def stale_modules(package: Path = _PACKAGE) -> list[str]:
    """The core's modules when a file the compiled build was built from (a core source, or a
    project module it was compiled against) differs from what it was then, else [] (all of them
    go back to their source then: compiled modules call each other directly). `package`: the
    folder of quota_local."""
    manifest = package / MANIFEST.name
    if not manifest.is_file():
        return []  # a pure-Python install: nothing to check, nothing more to import
    built = json.loads(manifest.read_text())
    sources = built.get("sources") if isinstance(built, dict) else None
    if not isinstance(sources, dict):
        return list(CORE)  # a record of an older kind: which files it covered is unknown
    for relative, digest in sources.items():
        top, _, rest = str(relative).partition("/")
        folder = _package_folder(top, package)
        path = folder / rest if folder else None
        if path is None or not path.is_file():
            return list(built["modules"])
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return list(built["modules"])
    return []


def guard_stale_build() -> None:
    """Import the core from its sources when its compiled build is older than them, or when
    `QUOTA_PURE_CORE=1` asks for the Python core."""
    if any(isinstance(finder, _Sources) for finder in sys.meta_path):
        return
    modules = list(CORE) if os.environ.get("QUOTA_PURE_CORE") == "1" else stale_modules()
    if modules:
        sys.meta_path.insert(0, _Sources(modules))
