"""The docs name only what exists and list what is there: the reliability page names only tests
that exist (a renamed test must not leave the fault table pointing at nothing), ARCHITECTURE.md
only files and functions that exist, deploy.md every parameter, alarm and function of the
template, and the counts the docs give are current."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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


ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
# Where a path of the table is looked for: the product package, then the repository.
PATH_ROOTS = (ROOT / "layers" / "core" / "quota_controller", ROOT)


def behaviour_table() -> dict[str, list[tuple[Path | None, str, list[str]]]]:
    """Each row of ARCHITECTURE.md's "Where each behaviour lives": the behaviour, and per file
    it names, the file (None when missing) and the functions named after it."""
    text = ARCHITECTURE.read_text()
    section = text.split("### Where each behaviour lives", 1)[1].split("\n#", 1)[0]
    rows: dict[str, list[tuple[Path | None, str, list[str]]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("behaviour", "---"):
            continue
        places: list[tuple[Path | None, str, list[str]]] = []
        for name in re.findall(r"`([^`]+)`", cells[1]):
            if name.endswith(".py"):
                found = next((r / name for r in PATH_ROOTS if (r / name).is_file()), None)
                places.append((found, name, []))
            elif places and re.fullmatch(r"[A-Za-z_][\w.]*", name):
                places[-1][2].append(name)
        rows[cells[0]] = places
    return rows


def test_the_behaviour_table_names_the_behaviours_users_ask_about() -> None:
    rows = behaviour_table()
    for behaviour in (
        "a reduction is blocked until approved",
        "an alert names the change that caused a preemption",
        "the resync repairs drift",
    ):
        assert behaviour in rows, behaviour
        assert rows[behaviour], f"{behaviour}: no file named"


def test_every_file_and_function_of_the_behaviour_table_exists() -> None:
    missing = []
    for behaviour, places in behaviour_table().items():
        for path, name, functions in places:
            if path is None:
                missing.append(f"{behaviour}: {name}")
                continue
            source = path.read_text()
            for function in functions:
                leaf = function.rsplit(".", 1)[-1]
                if not re.search(rf"^\s*(?:def|class) {re.escape(leaf)}\b", source, re.MULTILINE):
                    missing.append(f"{behaviour}: {name} {function}")
    assert missing == []


DEPLOY = ROOT / "docs" / "deploy.md"


def _deploy_section(start: str, end: str) -> str:
    return DEPLOY.read_text().split(start, 1)[1].split(end, 1)[0]


def _template_resources(kind: str) -> dict[str, dict[str, Any]]:
    from quota_local.template import load_template

    resources = load_template()["Resources"]
    return {k: v for k, v in resources.items() if v["Type"] == kind}


def _alarm_names() -> dict[str, str]:
    """Each alarm's logical id and its name without the `${NamePrefix}-` prefix."""
    alarms = _template_resources("AWS::CloudWatch::Alarm")
    return {
        k: v["Properties"]["AlarmName"]["Fn::Sub"].removeprefix("${NamePrefix}-")
        for k, v in alarms.items()
    }


def test_deploy_md_names_every_parameter_alarm_and_function_of_the_template() -> None:
    from quota_local.template import load_template

    parameters = _deploy_section("### Parameters", "\n#")
    alarms = _deploy_section("## Alarms: what each means", "\n## ")
    inventory = DEPLOY.read_text().split("## Prerequisites", 1)[0]

    missing = [
        f"parameter {p}" for p in load_template()["Parameters"] if f"`{p}`" not in parameters
    ]
    missing += [f"alarm {a}" for a in _alarm_names().values() if f"`{a}`" not in alarms]
    missing += [
        f"function {f}"
        for f in _template_resources("AWS::Serverless::Function")
        if f"`{f}`" not in inventory
    ]
    assert missing == []


def test_deploy_md_states_each_functions_reserved_concurrency_and_the_account_minimum() -> None:
    functions = _template_resources("AWS::Serverless::Function")
    section = _deploy_section("- **Lambda concurrency.**", "- **Deploying identity**")
    rows = dict(re.findall(r"^\s*\| `(\w+)` \| (\d+) \|", section, re.MULTILINE))

    reserved = {k: v["Properties"]["ReservedConcurrentExecutions"] for k, v in functions.items()}
    assert {k: int(v) for k, v in rows.items()} == reserved
    always = sum(n for k, n in reserved.items() if "Condition" not in functions[k])
    at_most = sum(reserved.values())
    # Lambda keeps 100 executions unreserved.
    for figure in (always, at_most, 100 + always, 100 + at_most):
        assert re.search(rf"\b{figure}\b", section), figure


def test_deploy_md_names_the_alarms_the_dashboard_leaves_out() -> None:
    from quota_local.template import load_template

    body = load_template()["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    shown = set(re.findall(r"\$\{(\w+)\.Arn\}", body))
    left_out = [name for k, name in _alarm_names().items() if k not in shown]
    dashboard = _deploy_section("- **Dashboard**", "- **Tracing**")

    assert left_out, "the optional functions' alarms are not on the dashboard"
    assert [name for name in left_out if f"`{name}`" not in dashboard] == []
    words = {3: "three", 4: "four", 7: "seven"}
    assert words.get(len(left_out), str(len(left_out))) in dashboard


def test_the_docs_counts_of_corpus_cases_and_golden_scenarios_are_current() -> None:
    corpus = len(list((ROOT / "tests" / "badinput" / "corpus").iterdir()))
    golden = (ROOT / "tests" / "golden" / "test_reconcile_golden.py").read_text()
    scenarios = len(re.findall(r"^def scenario_\w+\(", golden, re.MULTILINE))

    for page in ("README.md", "docs/reliability.md"):
        assert f"{corpus} invalid documents and table items" in (ROOT / page).read_text(), page
    for page in ("docs/reliability.md", "docs/ARCHITECTURE.md"):
        text = " ".join((ROOT / page).read_text().split())
        assert re.search(rf"\b{scenarios} reconcile scenarios\b", text), page
