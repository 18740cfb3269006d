"""Where the project's files are when the local stack runs from a source checkout."""

from __future__ import annotations

from pathlib import Path


def project_root() -> Path:
    """The checkout root (holds template.yaml and functions/)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "template.yaml").is_file() or not (root / "functions").is_dir():
        raise RuntimeError(
            f"template.yaml and functions/ not found under {root}: the local stack runs the "
            "deployed handlers from a source checkout; install it with `pip install -e .`"
        )
    return root
