"""`quotactl apply` of a team's file after a `quotactl lend`: the file knows nothing of the
loan, so the loan is kept until it ends (said, in `plan -f` too), and `--prune` ends it early
(said too); a loan that has ended is dropped, and a file that names the loan's window wins."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from test_quotactl_windows import G5, layout, limit, queue_item, quotactl, stack, z

from quota_local.stack import LocalStack

__all__ = ["stack"]  # the fixture


def lend(stack: LocalStack, hours: int = 3) -> str:
    until = z(stack.clock.now() + timedelta(hours=hours))
    argv = ["lend", "--from", "team-c", "--to", "team-a", f"{G5}=1", "--until", until]
    assert quotactl(*argv, "--by", "alice") == 0
    stack.advance(60)
    return str(queue_item(stack)["windows"][0]["name"])


def team_file(tmp_path: Path) -> str:
    path = tmp_path / "quotas.yaml"
    path.write_text(yaml.safe_dump(layout().build()))
    return str(path)


def windows(stack: LocalStack) -> list[str]:
    return [w["name"] for w in queue_item(stack).get("windows") or []]


def test_applying_a_file_without_the_loan_keeps_it_until_it_ends(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loan = lend(stack)
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (2, 1)
    capsys.readouterr()
    path = team_file(tmp_path)

    assert quotactl("plan", "-f", path) == 0
    previewed = capsys.readouterr().out
    assert "Loans in the table but not in the file (kept until they end" in previewed
    assert loan in previewed
    assert "team-a: limits" not in previewed, "the preview changes no limit"

    assert quotactl("apply", "-f", path) == 0
    said = capsys.readouterr().out
    assert f"note: 1 loan in the table but not in the file kept until it ends ({loan})" in said
    assert windows(stack) == [loan]
    stack.advance(120)
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (2, 1), "the loan still stands"

    assert quotactl("apply", "-f", path, "--prune", "-o", "json") == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["loansKept"], result["loansEnded"]) == ([], [loan])
    assert windows(stack) == []
    stack.advance(120)
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (1, 2), "--prune ended it"


def test_an_ended_loan_is_dropped_and_a_file_naming_the_window_wins(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loan = lend(stack, hours=1)
    stack.advance(3600 + 60)  # it has ended and given the units back
    capsys.readouterr()
    assert quotactl("apply", "-f", team_file(tmp_path), "-o", "json") == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["loansKept"], result["loansEnded"]) == ([], [])
    assert windows(stack) == [], f"{loan} ended: nothing to keep"

    loan = lend(stack)
    doc = layout().build()
    mine = {
        "name": loan,
        "from": z(stack.clock.now()),
        "until": z(stack.clock.now() + timedelta(hours=1)),
        "quotaShares": [
            {"quotaShareName": "team-b", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}]}
        ],
    }
    doc["windows"] = [mine]
    capsys.readouterr()
    path = tmp_path / "named.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert quotactl("apply", "-f", str(path), "-o", "json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["loansKept"] == [], "the file names the window: the file's wins"
    [window] = queue_item(stack)["windows"]
    assert window["quotaShares"][0]["quotaShareName"] == "team-b"


def test_status_says_no_edge_is_carried_out_while_the_config_is_rejected(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    loan = lend(stack)
    # A console edit that rejects the whole queue config: the loan's end cannot be carried out.
    stack.table.update_item(
        Key={"queue": "ml-training", "item": "QUEUE"},
        UpdateExpression="SET reductionPolicy = :p",
        ExpressionAttributeValues={":p": "sometimes"},
    )
    stack.advance(60)
    capsys.readouterr()
    assert quotactl("status", "ml-training") == 0
    shown = capsys.readouterr().out
    assert (
        f"  quota windows last applied: {loan}; the config is rejected, so no window's edge is "
        "carried out until it is fixed"
    ) in shown.splitlines()
    assert "quota windows in force" not in shown


def test_a_loan_ended_by_prune_is_the_pruners_change(stack: LocalStack, tmp_path: Path) -> None:
    lend(stack)
    # Someone edits team-a's item meanwhile: the prune's requests are still carol's.
    stack.table.update_item(
        Key={"queue": "ml-training", "item": "SHARE#team-a"},
        UpdateExpression="SET updatedBy = :b",
        ExpressionAttributeValues={":b": "bob"},
    )
    stack.advance(60)
    assert quotactl("apply", "-f", team_file(tmp_path), "--prune", "--by", "carol") == 0
    stack.advance(120)
    assert limit(stack, "team-a") == 1
    changes = stack.table.query(
        KeyConditionExpression="#q = :q AND begins_with(#i, :c)",
        ExpressionAttributeNames={"#q": "queue", "#i": "item"},
        ExpressionAttributeValues={":q": "ml-training", ":c": "CHANGE#"},
    )["Items"]
    lowered = [
        c
        for c in changes
        if c.get("quotaShareName") == "team-a" and c["operation"] == "UpdateQuotaShare"
    ]
    assert [c["by"] for c in lowered] == ["alice", "carol"], "lent by alice, ended by carol"


def test_a_file_whose_window_would_override_the_loan_is_refused(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loan = lend(stack)
    before = queue_item(stack)
    start = stack.clock.now()
    doc = layout().build()
    doc["windows"] = [
        {
            "name": "a-boost",
            "priority": 5,
            "from": z(start + timedelta(hours=1)),
            "until": z(start + timedelta(hours=2)),
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
                }
            ],
        }
    ]
    path = tmp_path / "boost.yaml"
    path.write_text(yaml.safe_dump(doc))
    capsys.readouterr()

    for argv in (("plan", "-f", str(path)), ("apply", "-f", str(path))):
        assert quotactl(*argv) == 1, argv
        said = capsys.readouterr().err
        assert "would break a loan job queue ml-training keeps" in said
        assert "window 'a-boost' of the file sets team-a's capacityLimits at " in said
        assert f"while loan {loan} lasts" in said
        assert "above the loan's 1: it would override the loan's limits for team-a" in said
        assert "the loan hides it" not in said
    with pytest.raises(ValueError, match="refused quota document"):
        stack.apply(doc)  # the local stack's apply, as quotactl apply
    assert queue_item(stack) == before, "nothing written"
    stack.advance(3600 + 120)
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (2, 1), "the loan still stands"
