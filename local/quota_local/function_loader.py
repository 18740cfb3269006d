"""The real handlers of `functions/`, loaded as the local stack runs them.

Each `functions/<name>/app.py` is loaded once per process under its own module name (the
handlers are not modules of `quota_local`: SAM wants them in their own folders), and each
invocation is followed by what a Lambda invocation's end would do to Powertools' metrics.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from importlib import resources
from types import ModuleType
from typing import Any

from quota_local.paths import function_file
from quota_local.process_patches import drop_unpublished_metrics

_modules: dict[str, ModuleType] = {}


def load_handler(function: str) -> Any:
    """The `lambda_handler` of functions/<function>/app.py (loaded once per process)."""
    if function not in _modules:
        name = f"quota_local_function_{function}"
        # A real file even when the package is not on disk (as_file extracts it).
        with resources.as_file(function_file(function)) as path:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise RuntimeError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        _modules[function] = module
    inner = _modules[function].lambda_handler

    @functools.wraps(inner)
    def invoke(event: Any, context: Any) -> Any:
        try:
            return inner(event, context)
        finally:
            drop_unpublished_metrics()

    return invoke
