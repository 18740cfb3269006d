"""The optional compiled scheduler core; everything else about the package is in pyproject.toml.

With `QUOTA_COMPILE_CORE=1` in the environment, the scheduler core and the simulator around it
(`CORE`) are compiled with mypyc, as black and mypy ship theirs: the same source files, built
into C extension modules that Python imports instead of them (about twice as fast,
docs/performance.md, "Simulator"). The build then needs mypy and a C compiler with the Python
headers; with pip's build isolation mypy is not there, so install with `--no-build-isolation`
from an environment that has mypy and setuptools (`make venv` does). Without the variable, or
when the compile fails, the package installs as pure Python; the failure is printed as a
warning (pip shows a build's output only with `-v`). `quotactl --version` says which core runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tomllib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

SOURCE = Path("local/quota_local")
MANIFEST = "compiled_core.json"


def _load_compiled_core() -> Any:
    # Standard library only; loaded from its file, the package itself may not import yet.
    spec = importlib.util.spec_from_file_location("_compiled_core", SOURCE / "compiled_core.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compiled_core = _load_compiled_core()
# In import order (the modules a stale build falls back on, quota_local/compiled_core.py).
CORE: tuple[str, ...] = compiled_core.CORE


def _refused(message: str) -> list[Any]:
    """No extensions: the compile was asked for and cannot run. A build beside the sources (an
    earlier `make venv`'s) would be imported instead of them: it goes too (setuptools runs no
    build_ext without extensions, so OptionalBuildExt cannot remove it)."""
    _warn(message)
    for name in (*CORE, "core__mypyc"):
        for suffix in EXTENSION_SUFFIXES:
            (SOURCE / f"{name}{suffix}").unlink(missing_ok=True)
    (SOURCE / MANIFEST).unlink(missing_ok=True)
    return []


def _warn(message: str) -> None:
    print(
        f"WARNING: the scheduler core is not compiled, it runs as Python: {message}",
        file=sys.stderr,
    )


def _extensions() -> list[Any]:
    if os.environ.get("QUOTA_COMPILE_CORE") != "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return _refused(
            "mypy (mypyc) is not installed where the package is built (--no-build-isolation?)"
        )
    missing = _missing_mypy_plugins()
    if missing:
        # mypy would stop on its settings (pyproject.toml) before compiling anything.
        packages = " ".join(sorted({plugin.partition(".")[0] for plugin in missing}))
        return _refused(
            f"mypy's plugin {', '.join(missing)} (pyproject.toml, [tool.mypy] plugins) cannot be"
            f" imported where the package is built: install {packages} there first (the version"
            ' constraints.txt pins; docs/local.md, "What-if simulation")'
        )
    try:
        # One shared library inside the package (quota_local/core__mypyc...), not at top level.
        # mypy reads its settings from pyproject.toml (mypy_path, plugins); the notes about
        # settings for modules outside the core would count as errors here.
        return list(
            mypycify(
                ["--no-warn-unused-configs", *(str(SOURCE / f"{name}.py") for name in CORE)],
                group_name="quota_local.core",
            )
        )
    except (Exception, SystemExit) as error:  # mypyc refused the source (it exits on errors)
        return _refused(f"mypyc failed ({error}; its errors are above)")


def _missing_mypy_plugins() -> list[str]:
    settings = tomllib.loads(Path("pyproject.toml").read_text())
    plugins: list[str] = settings.get("tool", {}).get("mypy", {}).get("plugins", [])
    missing = []
    for plugin in plugins:
        try:
            found = importlib.util.find_spec(plugin)
        except ImportError:  # its package is not there
            found = None
        if found is None:
            missing.append(plugin)
    return missing


class OptionalBuildExt(build_ext):
    """Builds the compiled core if it can; a failure leaves the pure-Python package."""

    def run(self) -> None:
        if not self.extensions:
            return
        in_place = self.inplace  # an editable install: the modules go beside the sources
        try:
            super().run()
        except Exception as error:
            _warn(str(error))
            self._remove_outputs(in_place)
            return
        self._write_manifest()

    def _package_dir(self) -> Path:
        return Path(self.get_ext_fullpath("quota_local.scheduling")).parent

    def _remove_outputs(self, in_place: bool) -> None:
        # Nothing compiled may be imported beside the sources after a failure: neither a part
        # built before it nor, in a checkout, an earlier build.
        for ext in self.extensions:
            built = Path(self.build_lib) / self.get_ext_filename(ext.name)
            built.unlink(missing_ok=True)
            if in_place:
                (SOURCE / built.name).unlink(missing_ok=True)
        if in_place:
            (SOURCE / MANIFEST).unlink(missing_ok=True)

    def _write_manifest(self) -> None:
        # What the extensions were built from, the modules they were compiled against included:
        # quota_local.compiled_core runs the sources instead when one differs (a checkout edited
        # after `make venv`); the Makefile rebuilds when one changes.
        root = Path()
        sources = {}
        for relative in compiled_core.compiled_against(root):
            top = relative.partition("/")[0]
            path = root / compiled_core.PROJECT[top] / relative
            sources[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        record = {"modules": list(CORE), "sources": sources}
        (self._package_dir() / MANIFEST).write_text(json.dumps(record, indent=1) + "\n")


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
