"""Bad input: every file of corpus/ is an invalid quota document or a bad set of config-table
items, and each must be refused everywhere it can enter, with the field path and the rule.

- `quotactl validate` (in process): exit 1, the path and the message, never a traceback;
- `quotactl apply` against a LocalStack: exit 1, nothing written to the table, no Batch call;
- a raw table edit on a LocalStack running the guide layout (the document split into items, or
  the items as they are): no Batch write, Batch keeps the layout, status says Valid False with
  the path, and one CONFIG_REJECTED alert.

A YAML case says what to expect in its first line, `# expect: <path fragment> | <message
fragment>`, and `# table: skip (<why>)` when the config table cannot hold the mistake (its keys
make it impossible). JSON cases have theirs in expectations.yaml.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from quota_controller.domain.config.items import document_to_items, is_config_key, plain
from quota_controller.domain.config.source import parse_text
from quota_local.stack import LocalStack
from quotactl.main import main

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
GOOD = Path(__file__).resolve().parents[2] / "examples" / "quotas.yaml"
QUEUE = "ml-training"
WRITES = ("Create", "Update", "Delete", "TagResource", "UntagResource")
_EXPECT = re.compile(r"^# expect: (?P<path>.*?) \| (?P<message>.+)$")
_TABLE = re.compile(r"^# table: skip \((?P<why>.+)\)$")


@dataclass(frozen=True)
class Case:
    """One corpus file and what it must produce."""

    file: Path
    kind: Literal["document", "items"]
    path: str
    message: str
    table: bool = True
    why: str = ""

    @property
    def name(self) -> str:
        return self.file.name

    def data(self) -> Any:
        text = self.file.read_text(encoding="utf-8")
        if self.kind == "items":
            return json.loads(text)
        return parse_text(text).data


def load_cases() -> list[Case]:
    expectations: dict[str, dict[str, Any]] = yaml.safe_load(
        (HERE / "expectations.yaml").read_text(encoding="utf-8")
    )
    cases = []
    for file in sorted(CORPUS.iterdir()):
        if file.suffix == ".json":
            spec = expectations[file.name]
            cases.append(
                Case(
                    file,
                    spec["kind"],
                    spec["path"],
                    spec["message"],
                    spec.get("table", True),
                    spec.get("why", ""),
                )
            )
            continue
        lines = file.read_text(encoding="utf-8").splitlines()
        head = _EXPECT.match(lines[0]) if lines else None
        assert head, f"{file.name} must start with '# expect: <path> | <message>'"
        skip = _TABLE.match(lines[1]) if len(lines) > 1 else None
        cases.append(
            Case(
                file,
                "document",
                head["path"].strip(),
                head["message"].strip(),
                skip is None,
                skip["why"] if skip else "",
            )
        )
    return cases


CASES = load_cases()
DOCUMENTS = [pytest.param(c, id=c.name) for c in CASES if c.kind == "document"]
TABLE = [pytest.param(c, id=c.name) for c in CASES if c.table]


def test_the_corpus_is_complete() -> None:
    expectations = yaml.safe_load((HERE / "expectations.yaml").read_text(encoding="utf-8"))
    assert len(CASES) >= 50
    assert sorted(expectations) == sorted(f.name for f in CORPUS.glob("*.json"))
    assert {f.suffix for f in CORPUS.iterdir()} <= {".yaml", ".json"}
    assert all(c.table or c.why for c in CASES), "say why the table cannot hold a case"


def on_one_line(output: str, case: Case) -> bool:
    return any(case.path in line and case.message in line for line in output.splitlines())


# -- quotactl validate -------------------------------------------------------------------------


@pytest.mark.parametrize("case", DOCUMENTS)
def test_quotactl_validate_refuses_it_with_the_path_and_the_rule(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", str(case.file)])
    out, err = capsys.readouterr()

    assert code == 1, out
    assert on_one_line(out, case), f"expected {case.path!r} and {case.message!r} in:\n{out}"
    assert "Traceback" not in out + err


# -- quotactl apply ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared() -> Iterator[LocalStack]:
    """The guide layout, converged, on one stack for the whole module."""
    with LocalStack(batch_max_attempts=1, run_jobs=False) as local:
        for item in good_items():
            local.put_item(item)
        local.advance(120)
        assert valid(local)
        yield local


def good_items() -> list[dict[str, Any]]:
    raw = parse_text(GOOD.read_text(encoding="utf-8")).data
    return document_to_items(raw, bookkeeping={"updatedBy": "corpus", "updatedAt": "2026"})


def table_items(stack: LocalStack) -> list[dict[str, Any]]:
    return sorted(
        (plain(i) for i in stack.table.scan(ConsistentRead=True)["Items"]),
        key=lambda i: (str(i["queue"]), str(i["item"])),
    )


def valid(stack: LocalStack) -> bool:
    conditions = stack.status(QUEUE)["conditions"]
    return bool(conditions) and all(
        conditions[k]["status"] == "True" for k in ("Valid", "Applied", "Healthy")
    )


def batch_layout(stack: LocalStack) -> dict[str, Any]:
    """What Batch runs for the guide layout (read through the user's client, not counted)."""
    batch = stack.batch
    envs = batch.describe_service_environments(serviceEnvironments=[f"{QUEUE}-env"])
    return {
        "queues": batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"],
        "environments": envs["serviceEnvironments"],
        "shares": batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"],
    }


def batch_writes(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {
        k: after[k] - before.get(k, 0)
        for k in after
        if k.startswith(WRITES) and after[k] != before.get(k, 0)
    }


@pytest.mark.parametrize("case", DOCUMENTS)
def test_quotactl_apply_refuses_it_and_writes_nothing(
    case: Case, shared: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = shared
    table, calls = table_items(stack), stack.batch_calls()
    where = ["--table", stack.table_name, "--region", stack.region]
    code = main(["apply", "-f", str(case.file), *where, "--by", "corpus"])
    out, err = capsys.readouterr()
    after = table_items(stack)
    if after != table:  # put the guide layout back before failing
        restore(stack, [dict(i) for i in after if i not in table])

    assert code == 1, out + err
    assert on_one_line(out + err, case), f"expected {case.path!r}, {case.message!r}:\n{err}"
    assert "Traceback" not in out + err
    assert after == table, "quotactl apply wrote to the table"
    assert stack.batch_calls() == calls, "something reached Batch"


# -- a raw edit of the config table ------------------------------------------------------------


def split(case: Case) -> list[dict[str, Any]]:
    """The items a console user would write for the case."""
    data = case.data()
    if case.kind == "items":
        return list(data) if isinstance(data, list) else [data]
    try:
        items = document_to_items(data)
    except (KeyError, TypeError, AttributeError):
        # No usable jobQueue: the QUEUE item of the guide's queue, written without it.
        queue_item = {"queue": QUEUE, "item": "QUEUE"}
        queue_item.update({k: v for k, v in data.items() if k != "quotaShares"})
        shares = [s for s in data.get("quotaShares") or [] if isinstance(s, dict)]
        return [queue_item] + [
            {"queue": QUEUE, "item": f"SHARE#{s['quotaShareName']}", **s} for s in shares
        ]
    # The split keeps the fields it knows; a typo at the top level stays on the QUEUE item.
    items[0].update({k: v for k, v in data.items() if k not in items[0] and k != "quotaShares"})
    return items


def restore(stack: LocalStack, written: list[dict[str, Any]]) -> None:
    """Put the guide layout back: good items as they were, the other written items gone."""
    good = {(i["queue"], i["item"]): i for i in good_items()}
    for item in written:
        key = (str(item["queue"]), str(item["item"]))
        if key in good:
            stack.put_item(good[key])
        else:
            stack.delete_item(*key)
    stack.run_until_idle()
    waited = 0
    while not valid(stack) and waited < 600:
        stack.advance(30)
        waited += 30
    assert valid(stack), "the guide layout could not be restored"


@pytest.mark.parametrize("case", TABLE)
def test_a_raw_table_edit_is_rejected_and_batch_keeps_the_layout(
    case: Case, shared: LocalStack
) -> None:
    stack = shared
    items = split(case)
    queues = sorted({str(i["queue"]) for i in items})
    layout, calls, alerts = batch_layout(stack), stack.batch_calls(), len(stack.alerts())
    try:
        for item in items:
            stack.put_item(item)
        stack.run_until_idle()
        if not any(is_config_key(i["item"]) for i in items):
            stack.resync()  # the stream's filter drops unknown sort keys: the resync finds them
            stack.run_until_idle()

        assert batch_writes(calls, stack.batch_calls()) == {}, "a write reached Batch"
        assert batch_layout(stack) == layout, "the running layout changed"
        where = re.sub(r"^quotaShares\[\d+\]\.?", "", case.path)
        invalid = [
            cond["message"]
            for queue in queues
            for view in [stack.status(queue)]
            for conds in [view["conditions"], *(s["conditions"] for s in view["shares"].values())]
            for cond in [conds.get("Valid", {})]
            if cond.get("status") == "False"
        ]
        assert any(where in m and case.message in m for m in invalid), (where, invalid)
        rejected = [
            a
            for a in stack.alerts()[alerts:]
            if a["kind"] == "CONFIG_REJECTED" and a["jobQueue"] in queues
        ]
        assert len(rejected) == 1, [a["summary"] for a in stack.alerts()[alerts:]]
        assert case.message in rejected[0]["detail"]
    finally:
        restore(stack, items)


def test_a_new_queue_whose_only_item_has_a_mistyped_sort_key_is_rejected_by_the_resync(
    shared: LocalStack,
) -> None:
    """The stream's filter drops the item (its sort key is not config), so the resync must find
    the queue: it lists every partition holding an item the controller did not write."""
    stack, queue = shared, "ml-typo"
    layout, calls, alerts = batch_layout(stack), stack.batch_calls(), len(stack.alerts())
    raw = parse_text(GOOD.read_text(encoding="utf-8")).data
    item = {"queue": queue, "item": "queue", **{k: v for k, v in raw.items() if k != "quotaShares"}}
    try:
        stack.put_item(item)
        stack.run_until_idle()
        stack.resync()
        stack.run_until_idle()

        valid_cond = stack.status(queue)["conditions"]["Valid"]
        assert valid_cond["status"] == "False"
        assert "item 'queue'" in valid_cond["message"]
        rejected = [a for a in stack.alerts()[alerts:] if a["jobQueue"] == queue]
        assert [a["kind"] for a in rejected] == ["CONFIG_REJECTED"]
        assert batch_writes(calls, stack.batch_calls()) == {}, "a write reached Batch"
        assert batch_layout(stack) == layout
    finally:
        stack.delete_item(queue, "queue")
        stack.resync()
        stack.run_until_idle()
    # Removed again, the queue's status goes too (nothing of it was ever in Batch).
    assert stack.status(queue)["conditions"] == {}
