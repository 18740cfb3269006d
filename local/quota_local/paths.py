"""Where the deployment's files are: template.yaml and the handlers functions/<name>/app.py.

They ship inside the package, in `quota_local/deployment/`, and are found with
`importlib.resources`, so the local stack works from an installed wheel in any directory. In a
checkout that folder holds symlinks to the repository's template.yaml and functions/ (SAM reads
them there); the wheel and the sdist hold copies (docs/ARCHITECTURE.md, "Packaging").
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

_PACKAGE = "quota_local"
_FOLDER = "deployment"


def deployment_files() -> Traversable:
    """The folder that holds template.yaml and functions/."""
    return resources.files(_PACKAGE) / _FOLDER


def template_file() -> Traversable:
    """The SAM template the local stack builds from."""
    return _existing(deployment_files() / "template.yaml", "template.yaml")


def function_file(function: str) -> Traversable:
    """The handler module of one function (`alert` -> functions/alert/app.py)."""
    folder = deployment_files() / "functions"
    source = folder / function / "app.py"
    if not source.is_file() and folder.is_dir():
        known = sorted(entry.name for entry in folder.iterdir() if (entry / "app.py").is_file())
        raise LookupError(f"no function {function!r}; the functions are: {', '.join(known)}")
    return _existing(source, f"functions/{function}/app.py")


def _existing(entry: Traversable, name: str) -> Traversable:
    if not entry.is_file():
        raise RuntimeError(
            f"{name} is missing from the installed quota_local package ({_PACKAGE}/{_FOLDER}): "
            "reinstall batch-quota-controller; in a checkout, quota_local/deployment holds "
            "symlinks, so clone with symlinks enabled (git config core.symlinks true)"
        )
    return entry


def project_root() -> Path:
    """The checkout root, for what runs only in a checkout (the test suite); the local stack
    itself uses the package's own files above."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "template.yaml").is_file() or not (root / "functions").is_dir():
        raise RuntimeError(f"template.yaml and functions/ not found under {root}: not a checkout")
    return root
