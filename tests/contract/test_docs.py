"""The reliability page names only tests that exist (a renamed test must not leave the fault
table pointing at nothing)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"
# The abbreviations the page's table uses, as the page defines them.
FILES = {
    "F": "tests/faults/test_faults.py",
    "P": "tests/property/test_properties.py",
    "B": "tests/badinput/test_corpus.py",
    "C": "tests/integration/test_alert_safety.py",
    "R": "tests/integration/test_reconcile_flow.py",
    "A": "tests/integration/test_alerts_flow.py",
    "S": "tests/integration/test_slack_webhook.py",
    "G": "tests/integration/test_reconcile_safety.py",
    "T": "tests/integration/test_guard_coverage.py",
    "AT": "tests/integration/test_alerts_true.py",
}


def test_the_page_defines_the_abbreviations_it_uses() -> None:
    text = " ".join(PAGE.read_text().split())

    for key, path in FILES.items():
        assert f"`{key}` `{path}`" in text or f"`{key}` is `{path}`" in text, key


def test_every_test_the_reliability_page_names_exists() -> None:
    text = PAGE.read_text()
    named = re.findall(r"\b([A-Z]{1,2})::(test_\w+)", text)
    assert len(named) >= 30, "the fault table names the tests that prove each fault"

    missing = [
        f"{key}::{name}"
        for key, name in named
        if not re.search(rf"^def {name}\(", (ROOT / FILES[key]).read_text(), re.MULTILINE)
    ]
    paths = re.findall(r"\b(tests/[\w/]+\.py)", text)
    missing += [p for p in paths if not (ROOT / p).is_file()]
    assert missing == []


def test_every_corpus_case_the_page_names_exists() -> None:
    text = PAGE.read_text()
    cases = re.findall(r"\[([\w.-]+\.(?:yaml|json))\]", text)
    assert cases

    corpus = ROOT / "tests" / "badinput" / "corpus"
    assert [c for c in cases if not (corpus / c).is_file()] == []
