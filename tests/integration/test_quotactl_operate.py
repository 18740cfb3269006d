"""quotactl's operator commands end to end on the LocalStack: the real CLI entry point, real
boto3 clients (moto intercepts them), the config table, the reconciler and the Batch emulator."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from boto3.dynamodb.types import Binary
from builders import DocBuilder, g5, guide_layout

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.config.items import plain
from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"
WRITES = ("Create", "Update", "Delete", "TagResource", "UntagResource")


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


@pytest.fixture
def doc_file(tmp_path: Path) -> Any:
    """Writes a document to a YAML file; returns its path as a string."""

    def write(doc: dict[str, Any], name: str = "quotas.yaml") -> str:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return str(path)

    return write


def quotactl(stack: LocalStack, *argv: str) -> int:
    return main([*argv, "--table", stack.table_name])


def items(stack: LocalStack, queue: str = QUEUE) -> dict[str, dict[str, Any]]:
    page = stack.table.query(
        KeyConditionExpression="#q = :q",
        ExpressionAttributeNames={"#q": "queue"},
        ExpressionAttributeValues={":q": queue},
        ConsistentRead=True,
    )
    return {i["item"]: plain(i) for i in page["Items"]}


def config_keys(stack: LocalStack) -> list[str]:
    return sorted(k for k in items(stack) if k == "QUEUE" or k.startswith("SHARE#"))


def batch_writes(stack: LocalStack) -> dict[str, int]:
    return {k: v for k, v in stack.batch_calls().items() if k.startswith(WRITES)}


def batch_share(stack: LocalStack, name: str) -> dict[str, Any]:
    """The share as Batch holds it (not as a lagging read shows it)."""
    with stack.emulator.true_reads():
        shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    return next(s for s in shares if s["quotaShareName"] == name)


def conditions(view: dict[str, Any]) -> dict[str, str]:
    return {k: v["status"] for k, v in view["conditions"].items()}


def team_b_at(limit: int, **fields: Any) -> dict[str, Any]:
    doc = guide_layout().set(**fields).build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = limit
    return doc


@pytest.fixture
def converged(stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]) -> LocalStack:
    assert quotactl(stack, "apply", "-f", doc_file(guide_layout().build())) == 0
    stack.advance(120)
    assert conditions(stack.status(QUEUE))["Applied"] == "True"
    capsys.readouterr()
    return stack


@pytest.fixture
def busy(stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]) -> LocalStack:
    """team-b has a limit of 2 and runs two jobs of one instance each, the lower-priority one
    dispatched last (every reading of Batch's victim order takes it first)."""
    assert quotactl(stack, "apply", "-f", doc_file(team_b_at(2))) == 0
    stack.advance(120)
    for n in (1, 0):
        job = stack.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name=f"train-{n}", priority=n)
        stack.emulator.set_job_status(job, "RUNNING")
        stack.advance(1)
    capsys.readouterr()
    return stack


# -- apply -------------------------------------------------------------------------------------


def test_apply_writes_the_items_and_the_stack_converges(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = quotactl(stack, "apply", "-f", doc_file(guide_layout().build()), "--by", "alice")

    out = capsys.readouterr().out
    assert code == 0
    assert "SHARE#team-a  written" in out
    assert config_keys(stack) == ["QUEUE", "SHARE#team-a", "SHARE#team-b", "SHARE#team-c"]
    assert items(stack)["SHARE#team-a"]["updatedBy"] == "alice"
    stack.advance(120)
    assert conditions(stack.status(QUEUE)) == {
        "Valid": "True",
        "Applied": "True",
        "Healthy": "True",
        "Blocked": "False",
    }
    assert batch_share(stack, "team-c")["resourceSharingConfiguration"] == {"strategy": "LEND"}


def test_apply_records_the_caller_arn_when_no_name_is_given(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(stack, "apply", "-f", doc_file(guide_layout().build()), "-o", "json") == 0

    data = json.loads(capsys.readouterr().out)
    assert data["updatedBy"].startswith("arn:aws:sts::123456789012:")
    assert items(stack)["QUEUE"]["updatedBy"] == data["updatedBy"]
    assert data["written"] == ["QUEUE", "SHARE#team-a", "SHARE#team-b", "SHARE#team-c"]


def test_apply_of_an_invalid_file_writes_nothing(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().build()
    doc["quotaShares"][0]["capacityLimits"][0]["maxCapacity"] = 0

    code = quotactl(stack, "apply", "-f", doc_file(doc))

    err = capsys.readouterr().err
    assert code == 1
    assert "invalid (1 error)" in err
    assert "quotaShares[0].capacityLimits[0].maxCapacity" in err
    assert items(stack) == {}


def test_dry_run_writes_nothing(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = quotactl(stack, "apply", "-f", doc_file(guide_layout().build()), "--dry-run")

    out = capsys.readouterr().out
    assert code == 0
    assert "Dry run, nothing written" in out
    assert "SHARE#team-a  would write" in out
    assert items(stack) == {}


def test_without_prune_absent_share_items_are_kept_and_reported(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().build()
    del doc["quotaShares"][2]

    assert quotactl(converged, "apply", "-f", doc_file(doc)) == 0

    out = capsys.readouterr().out
    assert "SHARE#team-c  kept (not in the file)" in out
    assert "run with --prune to delete it" in out
    assert "SHARE#team-c" in config_keys(converged)


def test_prune_deletes_absent_share_items(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().build()
    del doc["quotaShares"][2]

    assert quotactl(converged, "apply", "-f", doc_file(doc), "--prune", "-o", "json") == 0

    data = json.loads(capsys.readouterr().out)
    assert data["deleted"] == ["SHARE#team-c"]
    assert data["kept"] == []
    assert config_keys(converged) == ["QUEUE", "SHARE#team-a", "SHARE#team-b"]
    converged.advance(300)
    names = [
        s["quotaShareName"]
        for s in converged.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    ]
    assert names == ["team-a", "team-b"]


def test_unchanged_items_are_not_rewritten(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    before = items(converged)
    assert converged.stream is not None
    invocations = converged.stream.invocations
    converged.advance(60)  # a later stamp: a rewrite would show in updatedAt

    assert quotactl(converged, "apply", "-f", doc_file(team_b_at(2)), "-o", "json") == 0

    data = json.loads(capsys.readouterr().out)
    assert data["written"] == ["SHARE#team-b"]
    assert data["unchanged"] == ["QUEUE", "SHARE#team-a", "SHARE#team-c"]
    after = items(converged)
    for key in ("QUEUE", "SHARE#team-a", "SHARE#team-c"):
        assert after[key]["updatedAt"] == before[key]["updatedAt"]
    assert after["SHARE#team-b"]["updatedAt"] != before["SHARE#team-b"]["updatedAt"]
    converged.run_until_idle()
    assert converged.stream.invocations == invocations + 1  # one record: team-b


def test_applying_the_same_file_again_writes_nothing(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    before = items(converged)

    assert quotactl(converged, "apply", "-f", doc_file(guide_layout().build())) == 0

    assert "Nothing to write" in capsys.readouterr().out
    assert items(converged) == before


def someone_edits_after_the_read(monkeypatch: pytest.MonkeyPatch, edit: Any) -> None:
    """Another person changes the table right after `apply` has read the queue's items."""
    read = DynamoConfigStore.load_partition
    pending = [edit]

    def load(self: DynamoConfigStore, queue: str) -> list[dict[str, Any]]:
        result = read(self, queue)
        while pending:
            pending.pop()()
        return result

    monkeypatch.setattr(DynamoConfigStore, "load_partition", load)


def raw_item(stack: LocalStack, key: str) -> dict[str, Any]:
    return dict(stack.table.get_item(Key={"queue": QUEUE, "item": key})["Item"])


@pytest.mark.parametrize(
    ("edit", "key", "extra"),
    [
        pytest.param("state", "SHARE#team-a", [], id="a-field-changed-in-the-console"),
        pytest.param("approve", "QUEUE", [], id="an-approval-given-meanwhile"),
        pytest.param("add-field", "SHARE#team-a", [], id="a-field-added-in-the-console"),
        pytest.param("limit", "SHARE#team-c", ["--prune"], id="a-pruned-share-edited-meanwhile"),
    ],
)
def test_apply_never_overwrites_an_edit_made_after_it_read_the_table(
    converged: LocalStack,
    doc_file: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    edit: str,
    key: str,
    extra: list[str],
) -> None:
    def bobs_edit() -> None:
        item = raw_item(converged, key)
        if edit == "approve":
            item["approvedChange"] = "0123456789ab"  # an approval written meanwhile
        elif edit == "state":
            item["state"] = "DISABLED"
        elif edit == "add-field":
            item["tags"] = {"owner": "bob"}
        else:
            item["capacityLimits"] = [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}]
        converged.put_item(item)

    doc = guide_layout().set(reductionPolicy="block").queue(priority=20).build()
    doc["quotaShares"][0]["capacityLimits"][0]["maxCapacity"] = 2  # alice edits team-a
    if extra:
        del doc["quotaShares"][2]  # and drops team-c
    someone_edits_after_the_read(monkeypatch, bobs_edit)
    capsys.readouterr()

    assert quotactl(converged, "apply", "-f", doc_file(doc), "--by", "alice", *extra) == 1

    err = capsys.readouterr().err
    assert f"job queue {QUEUE} changed in the table since it was read ({key})" in err
    assert "nothing was written" in err
    after = items(converged)
    assert "priority" not in after["QUEUE"]["jobQueue"]  # none of alice's items was written
    assert after["SHARE#team-a"]["updatedBy"] != "alice"
    if edit == "approve":
        assert after["QUEUE"]["approvedChange"] == "0123456789ab"
    elif edit == "state":
        assert after[key]["state"] == "DISABLED"
    elif edit == "add-field":
        assert after[key]["tags"] == {"owner": "bob"}
    else:
        assert after[key]["capacityLimits"][0]["maxCapacity"] == 2  # not deleted
    monkeypatch.undo()
    # Run again: it reads bob's edit and writes over what it now knows.
    assert quotactl(converged, "apply", "-f", doc_file(doc), "--by", "alice", *extra) == 0
    assert items(converged)["QUEUE"]["jobQueue"]["priority"] == 20


def test_apply_refuses_a_valid_file_that_would_make_the_queue_invalid_with_the_kept_items(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    twenty = DocBuilder(QUEUE).env(**g5(20))
    for n in range(20):
        twenty.share(f"team-{n:02d}", "RESERVE", **g5(1))
    assert quotactl(stack, "apply", "-f", doc_file(twenty.build())) == 0
    before = items(stack)
    renamed = twenty.build()
    renamed["quotaShares"][19]["quotaShareName"] = "team-renamed"
    capsys.readouterr()

    assert quotactl(stack, "apply", "-f", doc_file(renamed)) == 1

    err = capsys.readouterr().err
    assert "would not be with the items the table keeps (SHARE#team-19)" in err
    assert "21 quota shares" in err
    assert "run with --prune" in err
    assert items(stack) == before
    assert quotactl(stack, "apply", "-f", doc_file(renamed), "--prune") == 0
    assert "SHARE#team-renamed" in items(stack)
    assert "SHARE#team-19" not in items(stack)


def test_apply_refuses_a_file_the_reconciler_would_reject_for_a_stray_item(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    converged.put_item({"queue": QUEUE, "item": "SHARE-team-d", "state": "ENABLED"})  # a typo
    converged.run_until_idle()
    before = items(converged)
    capsys.readouterr()

    assert quotactl(converged, "apply", "-f", doc_file(team_b_at(2))) == 1

    err = capsys.readouterr().err
    assert "item 'SHARE-team-d'" in err
    assert items(converged) == before


def stray_item(stack: LocalStack) -> dict[str, dict[str, Any]]:
    """A share item with a typo in its sort key, which the reconciler rejects the queue for;
    the table's items then."""
    stack.put_item({"queue": QUEUE, "item": "SHARE-team-d", "state": "ENABLED"})
    stack.run_until_idle()
    return items(stack)


def test_lend_refuses_a_queue_the_reconciler_rejects_for_a_stray_item(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().env(**g5(4)).build()
    doc["quotaShares"][0]["capacityLimits"][0]["maxCapacity"] = 2  # team-a has one to lend
    assert quotactl(stack, "apply", "-f", doc_file(doc)) == 0
    stack.advance(120)
    lend = ["lend", QUEUE, "--from", "team-a", "--to", "team-b", "ml.g5.xlarge=1"]
    lend += ["--until", "2030-01-01T00:00Z"]
    assert quotactl(stack, *lend, "--dry-run") == 0  # a loan lend makes
    before = stray_item(stack)
    capsys.readouterr()

    assert quotactl(stack, *lend) == 1

    err = capsys.readouterr().err
    assert "config is rejected as it is" in err
    assert "item 'SHARE-team-d'" in err
    assert items(stack) == before


def test_windows_says_a_queue_rejected_for_a_stray_item_has_no_window_in_force(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stray_item(converged)
    capsys.readouterr()

    assert quotactl(converged, "windows", QUEUE) == 1

    err = capsys.readouterr().err
    assert "config is rejected, so no window of it is in force" in err
    assert "item 'SHARE-team-d'" in err


# -- plan --------------------------------------------------------------------------------------


def test_plan_on_a_converged_queue_prints_no_actions(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = doc_file(guide_layout().build())

    assert quotactl(converged, "plan", "-f", path) == 0
    out = capsys.readouterr().out
    assert "0 actions, 0 waits" in out
    assert "No changes" in out

    assert quotactl(converged, "plan", "-f", path, "-o", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["converged"] is True
    assert data["actions"] == []


def test_plan_of_a_lowered_share_shows_the_jobs_at_risk_and_writes_nothing(
    busy: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    table_before = items(busy)
    writes_before = batch_writes(busy)
    path = doc_file(team_b_at(1, reductionPolicy="block"))

    assert quotactl(busy, "plan", "-f", path) == 0
    out = capsys.readouterr().out
    assert "UpdateQuotaShare  quota share team-b  blocked" in out
    assert "share team-b: ml.g5.xlarge 2 -> 1 (in use: 2, new ceiling: 1)" in out
    assert "at risk: train-0" in out
    assert "RUNNING" in out
    # Not held yet: the id comes from the reconcile that holds it (an approval never
    # approves a change made after it), so plan says where to find it.
    assert (
        f"`quotactl status {QUEUE} --table {busy.table_name}` shows it, then quotactl approve "
        "that id" in out
    )
    # No id anywhere: one computed now would be refused by approve once the hold is dated.
    assert "blocked by reductionPolicy block: once held, approve its change id" in out
    assert "approve change" not in out
    assert "approvedChange:" not in out

    assert quotactl(busy, "plan", "-f", path, "-o", "yaml") == 0
    data = yaml.safe_load(capsys.readouterr().out)
    (action,) = data["actions"]
    assert action["decision"] == "blocked"
    assert action["reason"] == "blocked by reductionPolicy block: once held, approve its change id"
    assert action["reductions"] == ["share team-b: ml.g5.xlarge 2 -> 1"]
    assert [j["jobName"] for j in action["risks"][0]["jobs"]] == ["train-0"]
    assert action["risks"][0]["jobs"][0]["status"] == "RUNNING"
    assert data["approveCommand"] is None

    assert batch_writes(busy) == writes_before
    assert items(busy) == table_before


def test_plan_at_a_lowering_edge_says_the_hold_begins_when_the_edge_comes(
    busy: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    start = busy.clock.now()
    lowering = {
        "name": "b-down",
        "from": (start + timedelta(hours=1)).isoformat(),
        "until": (start + timedelta(hours=2)).isoformat(),
        "quotaShares": [
            {
                "quotaShareName": "team-b",
                "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1}],
            }
        ],
    }
    path = doc_file(team_b_at(2, reductionPolicy="block", windows=[lowering]))
    at = (start + timedelta(minutes=90)).strftime("%Y-%m-%dT%H:%M:%SZ")

    assert quotactl(busy, "plan", "-f", path, "--at", at) == 0
    out = capsys.readouterr().out
    assert "UpdateQuotaShare  quota share team-b  blocked" in out
    assert (
        f"  Once the edge comes (the layout in force at {at}), the reconciler holds it under a "
        f"change id of its own: `quotactl status {QUEUE} --table {busy.table_name}` shows it"
    ) in out
    assert "Once applied" not in out, "the hold begins at the edge, not when the file is applied"

    # The same reduction in the base layout, previewed at the same moment: no edge between.
    base = doc_file(team_b_at(1, reductionPolicy="block"))
    assert quotactl(busy, "plan", "-f", base, "--at", at) == 0
    out = capsys.readouterr().out
    assert "UpdateQuotaShare  quota share team-b  blocked" in out
    assert "  Once applied, the reconciler holds it" in out
    assert "Once the edge comes" not in out


def test_plan_previews_share_items_the_table_keeps(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().build()
    del doc["quotaShares"][2]
    path = doc_file(doc)

    # Without --prune, apply keeps SHARE#team-c, so the reconciler would leave the share alone.
    assert quotactl(converged, "plan", "-f", path, "-o", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["actions"] == []
    assert data["keptItems"] == ["SHARE#team-c"]

    assert quotactl(converged, "plan", "-f", path, "--prune", "-o", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert [(a["operation"], a["quotaShareName"]) for a in data["actions"]] == [
        ("UpdateQuotaShare", "team-c")
    ]
    assert data["prunedItems"] == ["SHARE#team-c"]


def test_plan_of_an_invalid_file_reads_nothing(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().build()
    doc["quotaShares"][0]["resourceSharingConfiguration"] = {"strategy": "LEND", "borrowLimit": 5}

    assert quotactl(stack, "plan", "-f", doc_file(doc)) == 1

    err = capsys.readouterr().err
    assert "borrowLimit: only allowed with strategy LEND_AND_BORROW" in err
    assert stack.batch_calls() == {}


# -- status and history ------------------------------------------------------------------------


def test_status_as_a_table_and_as_data(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(converged, "status", QUEUE) == 0
    out = capsys.readouterr().out
    assert f"job queue {QUEUE}: configured, status current" in out
    lines = out.splitlines()
    assert lines[2].split() == [
        "RESOURCE",
        "CURRENT",
        "VALID",
        "APPLIED",
        "HEALTHY",
        "BLOCKED",
        "MESSAGE",
    ]
    # One row per resource, all well: nothing in MESSAGE.
    assert [line.split() for line in lines[3:7]] == [
        [*where, "yes", "True", "True", "True", "False", "-"]
        for where in (["queue"], ["share", "team-a"], ["share", "team-b"], ["share", "team-c"])
    ]

    assert quotactl(converged, "status", QUEUE, "--conditions") == 0
    out = capsys.readouterr().out
    assert "share team-b  yes      Applied  True    Applied" in out
    assert len([line for line in out.splitlines() if line.startswith("share team-b")]) == 4

    assert quotactl(converged, "status", QUEUE, "-o", "json") == 0
    view = json.loads(capsys.readouterr().out)
    assert view["current"] is True
    assert view["conditions"]["Applied"]["reason"] == "Applied"
    assert sorted(view["shares"]) == ["team-a", "team-b", "team-c"]

    assert quotactl(converged, "status", "-o", "yaml") == 0
    assert [v["jobQueue"] for v in yaml.safe_load(capsys.readouterr().out)] == [QUEUE]


def test_status_shows_a_config_not_yet_reconciled(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(converged, "apply", "-f", doc_file(team_b_at(2))) == 0
    capsys.readouterr()

    assert quotactl(converged, "status", QUEUE, "-o", "json") == 0
    view = json.loads(capsys.readouterr().out)
    assert view["current"] is True  # the queue item did not change
    assert view["shares"]["team-b"]["current"] is False


def test_status_says_a_queue_whose_items_are_all_gone_is_being_torn_down(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in config_keys(converged):
        converged.delete_item(QUEUE, key)
    converged.run_until_idle()  # the teardown starts: shares are disabled first
    capsys.readouterr()

    assert quotactl(converged, "status", QUEUE) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"job queue {QUEUE}: no config (being torn down)"
    )


def test_status_and_plan_of_a_queue_with_a_binary_set_typed_in_the_console(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    share = raw_item(converged, "SHARE#team-a")
    share["tags"] = {Binary(b"a"), Binary(b"b")}  # a BS attribute
    converged.put_item(share)
    converged.run_until_idle()
    capsys.readouterr()

    assert quotactl(converged, "status", QUEUE) == 0
    assert "tags: must be a mapping of fields (got a list)" in capsys.readouterr().out
    assert quotactl(converged, "plan", "-f", doc_file(guide_layout().build())) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_plan_reads_a_status_item_edited_by_hand_as_the_reconciler_does(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """appliedTags typed as text in the console: the reconciler reads the item without it;
    plan (the same decision) reads it the same way and previews what the reconciler does."""
    status = raw_item(converged, "STATUS#SHARE#team-a")
    status["appliedTags"] = "team=a"
    converged.put_item(status)

    assert quotactl(converged, "plan", "-f", doc_file(guide_layout().build()), "-o", "json") == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    preview = [(a["operation"], a["resource"]) for a in json.loads(out.out)["actions"]]

    before = batch_writes(converged)
    assert quotactl(converged, "reconcile", QUEUE) == 0
    capsys.readouterr()
    made = {k: n - before.get(k, 0) for k, n in batch_writes(converged).items()}
    assert {k: n for k, n in made.items() if n} == dict(Counter(op for op, _ in preview))


def test_status_of_an_unknown_queue_fails(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(stack, "status", "nope") == 1
    assert "job queue nope has no config and no status" in capsys.readouterr().err


def test_history_of_an_unknown_queue_fails_and_of_a_queue_without_changes_does_not(
    stack: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(stack, "history", "nope") == 1
    assert "job queue nope has no config, no status and no change records" in (
        capsys.readouterr().err
    )

    assert quotactl(stack, "apply", "-f", doc_file(team_b_at(2))) == 0  # not reconciled yet
    capsys.readouterr()
    assert quotactl(stack, "history", QUEUE) == 0
    assert capsys.readouterr().out.startswith(f"No change records for job queue {QUEUE}")


def test_history_lists_the_changes_newest_first(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(converged, "apply", "-f", doc_file(team_b_at(2)), "--by", "bob") == 0
    converged.advance(60)
    capsys.readouterr()

    assert quotactl(converged, "history", QUEUE, "--limit", "3", "-o", "json") == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 3
    assert records[0]["operation"] == "UpdateQuotaShare"
    assert records[0]["quotaShareName"] == "team-b"
    assert records[0]["by"] == "bob"
    assert [r["at"] for r in records] == sorted((r["at"] for r in records), reverse=True)

    assert quotactl(converged, "history", QUEUE) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "AT",
        "BY",
        "OPERATION",
        "SHARE",
        "SUMMARY",
        "REDUCTIONS",
    ]
    newest = out.splitlines()[1].split()
    assert newest[1:4] == ["bob", "UpdateQuotaShare", "team-b"]
    assert "CreateSchedulingPolicy" in out


# -- reconcile and approve ---------------------------------------------------------------------


def test_reconcile_prints_the_outcome(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(converged, "reconcile", QUEUE) == 0
    assert "converged" in capsys.readouterr().out

    assert quotactl(converged, "reconcile", QUEUE, "-o", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["outcome"] == "converged"
    assert data["applied"] == []


def test_reconcile_applies_what_the_table_says(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    item = items(converged)["SHARE#team-a"]
    item["state"] = "DISABLED"
    converged.put_item(item)  # the stream is not polled: only quotactl reconciles

    assert quotactl(converged, "reconcile", QUEUE) == 0

    out = capsys.readouterr().out
    assert "UpdateQuotaShare  quota share team-a" in out
    assert batch_share(converged, "team-a")["state"] == "DISABLED"


def test_reconcile_of_a_rejected_config_fails_and_alerts(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = guide_layout().queue(jobQueueName="broken").build()
    del broken["quotaShares"]
    broken["jobQueue"]["priority"] = 5000
    stack.put_item({"queue": "broken", "item": "QUEUE", **broken})

    assert quotactl(stack, "reconcile", "broken") == 1
    captured = capsys.readouterr()
    assert "rejected" in captured.out
    assert "jobQueue.priority" in captured.out
    assert "alert [warning] CONFIG_REJECTED" in captured.err  # no topic: alerts on stderr

    stack.put_item({"queue": "broken2", "item": "QUEUE", **broken})
    code = quotactl(stack, "reconcile", "broken2", "--topic-arn", stack.topic_arn)
    assert code == 1
    assert [a["kind"] for a in stack.alerts()] == ["CONFIG_REJECTED"]


def test_approve_then_reconcile_applies_a_blocked_change(
    busy: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(busy, "apply", "-f", doc_file(team_b_at(1, reductionPolicy="block"))) == 0
    busy.advance(60)
    held = busy.status(QUEUE)["heldChange"]
    assert held["decision"] == "blocked"
    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 2
    capsys.readouterr()

    assert quotactl(busy, "status", QUEUE) == 0
    out = capsys.readouterr().out
    assert f"quotactl approve {QUEUE} {held['id']}" in out
    row = next(line for line in out.splitlines() if line.startswith("share team-b"))
    # Applied False and Blocked True, with the reason once (both conditions give it).
    assert row.split()[3:7] == ["True", "False", "True", "True"]
    assert row.count(f"approve change {held['id']}") == 1, row

    # Once held, plan quotes the id the reconciler holds it under, the one approve takes.
    assert quotactl(busy, "plan", "-f", doc_file(team_b_at(1, reductionPolicy="block"))) == 0
    out = capsys.readouterr().out
    assert f"approve change {held['id']} (set approvedChange: {held['id']}" in out
    assert f"To approve change {held['id']}:" in out

    assert quotactl(busy, "approve", QUEUE, held["id"], "--by", "carol") == 0
    assert f"Approved change {held['id']}" in capsys.readouterr().out
    queue_item = items(busy)["QUEUE"]
    assert queue_item["approvedChange"] == held["id"]
    assert queue_item["updatedBy"] == "carol"

    assert quotactl(busy, "reconcile", QUEUE, "-o", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert [a["operation"] for a in data["applied"]] == ["UpdateQuotaShare"]
    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 1
    busy.advance(60)
    assert busy.status(QUEUE)["heldChange"] is None


def test_approve_refuses_a_change_id_that_is_not_held(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(converged, "approve", QUEUE, "0123456789ab") == 1

    err = capsys.readouterr().err
    assert "change 0123456789ab is not held" in err
    assert "nothing written" in err
    assert "reductionPolicy warn" in err
    assert "holds no change" in err
    assert "approvedChange" not in items(converged)["QUEUE"]


def hold_by_hand(stack: LocalStack, held: dict[str, Any]) -> None:
    """A heldChange typed into the queue's status item in the console."""
    status = raw_item(stack, "STATUS#QUEUE")
    status["heldChange"] = held
    stack.put_item(status)


def test_status_reads_a_held_change_edited_by_hand_as_far_as_it_is_well_formed(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    hold_by_hand(converged, {"id": "abc", "decision": "blocked", "jobs": 5, "atRisk": ["j-1"]})

    assert quotactl(converged, "status", QUEUE) == 0

    out = capsys.readouterr().out
    assert "Held change abc (blocked):" in out
    assert f"approve it: quotactl approve {QUEUE} abc" in out
    assert "jobs at risk" not in out  # not a list of job ids: read as missing
    assert "j-1" not in out  # not a job record: dropped


def test_status_shows_no_held_change_for_one_that_holds_nothing_it_can_name(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    hold_by_hand(converged, {"extra": "only", "id": 42})

    assert quotactl(converged, "status", QUEUE) == 0

    out = capsys.readouterr().out
    assert "Held change" not in out
    assert "None" not in out


def test_approve_of_a_held_change_edited_by_hand_writes_and_says_so(
    converged: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    hold_by_hand(converged, {"id": "0123456789ab", "jobs": [1, 2], "changes": ["lower x", 3]})

    assert quotactl(converged, "approve", QUEUE, "0123456789ab") == 0

    out = capsys.readouterr().out
    assert "Approved change 0123456789ab" in out
    assert "  - lower x" in out
    assert "jobs at risk" not in out
    assert items(converged)["QUEUE"]["approvedChange"] == "0123456789ab"


def test_approve_refuses_a_malformed_change_id_and_an_unknown_queue(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        quotactl(stack, "approve", QUEUE, "not-an-id")
    assert exit_info.value.code == 2
    assert "12 lowercase hex digits" in capsys.readouterr().err

    assert quotactl(stack, "approve", "nope", "0123456789ab") == 1
    assert "has no QUEUE item" in capsys.readouterr().err
    assert items(stack, "nope") == {}


# -- where to talk to --------------------------------------------------------------------------


def test_a_missing_table_is_one_clear_line(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", QUEUE, "--table", "no-such-table"]) == 1

    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no-such-table" in err
    assert "ResourceNotFoundException" in err
    assert "Traceback" not in err


def test_the_region_comes_from_aws_region_as_for_the_aws_cli(
    converged: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")  # no profile Region
    monkeypatch.setenv("AWS_REGION", converged.region)
    assert main(["status", QUEUE, "--table", converged.table_name, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["configured"] is True

    monkeypatch.delenv("AWS_REGION")
    assert main(["status", QUEUE, "--table", converged.table_name]) == 2
    assert "no AWS Region" in capsys.readouterr().err


def test_no_table_at_all_is_a_usage_error(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QUOTACTL_TABLE", raising=False)

    assert main(["status", QUEUE]) == 2
    assert "no config table: pass --table NAME or --stack-name STACK" in capsys.readouterr().err


def test_the_table_comes_from_the_environment_or_the_stack_outputs(
    converged: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUOTACTL_TABLE", converged.table_name)
    assert main(["status", QUEUE, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["configured"] is True
    monkeypatch.delenv("QUOTACTL_TABLE")

    template = {
        "Resources": {"Inbox": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "ConfigTableName": {"Value": converged.table_name},
            "AlertsTopicArn": {"Value": converged.topic_arn},
        },
    }
    converged.client("cloudformation").create_stack(
        StackName="quota-controller", TemplateBody=json.dumps(template)
    )
    assert main(["status", QUEUE, "--stack-name", "quota-controller", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["configured"] is True

    assert main(["status", QUEUE, "--stack-name", "absent"]) == 1
    assert "stack absent" in capsys.readouterr().err


def test_no_credentials_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in (
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    # An endpoint nobody listens on: nothing may leave the machine.
    argv = ["--table", "t", "--region", "us-east-1", "--endpoint-url", "http://127.0.0.1:9"]

    assert main(["status", QUEUE, *argv]) == 1

    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "cannot read table t in us-east-1: no usable AWS credentials" in err


def test_an_approval_survives_an_apply_of_a_file_without_it(tmp_path: Path) -> None:
    from quota_controller.domain.config_apply import plan_config_write

    raw = guide_layout().set(reductionPolicy="block").queue(priority=20).build()
    existing = [
        {
            "queue": "ml-training",
            "item": "QUEUE",
            "jobQueue": {"jobQueueName": "ml-training"},
            "serviceEnvironment": raw["serviceEnvironment"],
            "reductionPolicy": "block",
            "approvedChange": "0123456789ab",
        }
    ]
    kept = plan_config_write(raw, existing, by="me", at="now", prune=False)
    assert kept.puts[0]["item"] == "QUEUE"
    assert kept.puts[0]["approvedChange"] == "0123456789ab"

    withdrawn = plan_config_write(
        {**raw, "approvedChange": None}, existing, by="me", at="now", prune=False
    )
    assert withdrawn.puts[0]["item"] == "QUEUE"
    assert "approvedChange" not in withdrawn.puts[0]


def test_status_row_names_each_problem_once(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # A new queue whose only item has a mistyped sort key: rejected before anything was applied,
    # so Applied and Healthy both stay Unknown (no message): said once, not once per condition.
    stack.put_item({"queue": "ml-typo", "item": "SHARE-team-a", "capacityLimits": []})
    stack.advance(2 * stack.shape.resync_seconds)

    assert quotactl(stack, "status", "ml-typo") == 0
    out = capsys.readouterr().out
    # Rejected config, not a teardown: the header says which items and why.
    assert out.splitlines()[0] == (
        "job queue ml-typo: no QUEUE item, so its config (SHARE-team-a) is rejected; "
        "nothing is applied"
    )
    row = next(line for line in out.splitlines() if line.startswith("queue"))
    message = row.split(None, 6)[6]
    assert message.startswith("ConfigInvalid: item 'SHARE-team-a'")
    parts = message.split("; ")
    assert len(parts) == len(set(parts)), message


def test_apply_drops_an_approval_that_is_not_a_change_id(
    converged: LocalStack, doc_file: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`approvedChange: ABC` typed in the console would reject the queue's whole config; a
    valid apply must leave a valid config, so it drops the attribute and says so."""
    queue_item = items(converged)["QUEUE"]
    converged.put_item({**queue_item, "approvedChange": "ABC"})
    converged.advance(60)
    assert conditions(converged.status(QUEUE))["Valid"] == "False"
    capsys.readouterr()

    assert quotactl(converged, "apply", "-f", doc_file(team_b_at(2))) == 0

    out = capsys.readouterr().out
    assert "note: approvedChange 'ABC' on item QUEUE is not a change id" in out
    assert "approvedChange" not in items(converged)["QUEUE"]
    converged.advance(120)
    assert conditions(converged.status(QUEUE))["Valid"] == "True"
