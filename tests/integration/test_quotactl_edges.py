"""Rough edges a new user hits with quotactl (issue 16), each through the real CLI entry point
against a local stack."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import guide_layout

from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """A server-mode stack recorded in the state file as `local up` records itself, so
    `--local` reaches it (this process is the live pid)."""
    monkeypatch.setenv("QUOTACTL_LOCAL_STATE", str(tmp_path / "local.json"))
    with LocalStack(server=True) as stack:
        state = {
            "endpoint": stack.endpoint_url,
            "region": stack.region,
            "table": stack.table_name,
            "alertsQueue": stack.alerts_url,
            "pid": os.getpid(),
        }
        (tmp_path / "local.json").write_text(json.dumps(state), encoding="utf-8")
        yield stack


def write_doc(tmp_path: Path, doc: dict[str, Any], name: str = "quotas.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return str(path)


def team_b_at(limit: int, **fields: Any) -> dict[str, Any]:
    doc = guide_layout().set(**fields).build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = limit
    return doc


def hinted(text: str, command: str) -> list[str]:
    """The `quotactl COMMAND ...` line printed as a next step, as argv for main()."""
    line = next(part for part in text.split("`") if part.startswith(f"quotactl {command} "))
    return shlex.split(line)[1:]


def approve_line(text: str) -> list[str]:
    start = text.index("quotactl approve ")
    return shlex.split(text[start:].splitlines()[0])[1:]


# -- 2. next-step hints run as printed ----------------------------------------------------------


def test_hints_printed_in_local_mode_run_as_printed(
    served: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["apply", "-f", write_doc(tmp_path, team_b_at(2)), "--local"]) == 0
    status = hinted(capsys.readouterr().out, "status")
    assert status == ["status", QUEUE, "--local"]
    served.advance(120)
    for n in range(2):
        job = served.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name=f"train-{n}")
        served.emulator.set_job_status(job, "RUNNING")
    lowered = write_doc(tmp_path, team_b_at(1, reductionPolicy="block"), "lowered.yaml")

    assert main(["plan", "-f", lowered, "--local"]) == 0
    # Not held yet: plan points at status for the id, in local mode too.
    assert hinted(capsys.readouterr().out, "status") == ["status", QUEUE, "--local"]
    assert main(["apply", "-f", lowered, "--local"]) == 0
    capsys.readouterr()
    served.advance(60)
    assert main(status) == 0, "the hint of apply runs as printed"
    approve = approve_line(capsys.readouterr().out)
    assert approve[-1] == "--local"
    assert main(approve) == 0, "the hint of status runs as printed"
    reconcile = hinted(capsys.readouterr().out, "reconcile")
    assert reconcile == ["reconcile", QUEUE, "--local"]
    assert main(reconcile) == 0, "the hint of approve runs as printed"
    assert "UpdateQuotaShare" in capsys.readouterr().out


# -- 10. JOB_STUCK names the instance type the environment lacks ---------------------------------


def test_a_job_for_an_instance_type_the_environment_lacks_is_alerted_naming_it() -> None:
    with LocalStack() as stack:
        stack.apply(guide_layout().build())
        stack.advance(120)
        stack.submit_job(QUEUE, "team-a", "ml.p4d.24xlarge", 1, name="typo")
        stack.advance(30)
        stuck = [a for a in stack.alerts() if a["kind"] == "JOB_STUCK"]
    assert [a["summary"] for a in stuck] == [
        "1 job(s) of team-a can never run: needs ml.p4d.24xlarge, which the service "
        "environment has no capacity limit for"
    ]
    assert "ml.g5.xlarge" in stuck[0]["nextSteps"][0]


# -- 1. a conflict: one alert with the right advice; plan shows it first; apply warns ------------


def test_a_queue_naming_another_queues_environment_is_one_conflict_said_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = (
        guide_layout()
        .queue(jobQueueName="other")
        .set(
            serviceEnvironment={
                "serviceEnvironmentName": "ml-training-env",
                "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 3}],
            }
        )
        .build()
    )
    path = write_doc(tmp_path, other, "other.yaml")
    with LocalStack() as stack:
        stack.apply(guide_layout().build())
        stack.advance(120)
        stack.alerts()
        capsys.readouterr()

        assert main(["plan", path, "--table", stack.table_name]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].endswith("1 conflict, nothing would be applied")
        assert lines[1].startswith("Conflicts")
        assert "service environment ml-training-env is managed by job queue ml-training" in lines[2]
        assert not any(line.startswith("Waiting for") for line in lines), lines

        assert main(["apply", path, "--table", stack.table_name]) == 0
        err = capsys.readouterr().err
        assert "warning: the reconciler will apply nothing to job queue other" in err
        assert "managed by job queue ml-training" in err

        stack.advance(60)
        failed = [a for a in stack.alerts() if a["kind"] == "RECONCILE_FAILED"]
    assert len(failed) == 1, [a["summary"] for a in failed]
    (alert,) = failed
    assert alert["jobQueue"] == "other"
    assert "managed by job queue ml-training" in alert["summary"]
    assert "retrying does not clear it" in alert["nextSteps"][0]
    assert not any("retries" in step for step in alert["nextSteps"])


# -- 7. local mode readability ------------------------------------------------------------------


def test_local_mode_names_people_and_prints_one_time_precision(
    served: LocalStack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("USER", "alice")
    assert main(["apply", write_doc(tmp_path, team_b_at(2)), "--local"]) == 0
    served.advance(120)
    for n in range(2):
        job = served.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name=f"train-{n}")
        served.emulator.set_job_status(job, "RUNNING")
    role = "arn:aws:sts::123456789012:assumed-role/Platform/bob"
    lowered = write_doc(tmp_path, team_b_at(1), "lowered.yaml")
    assert main(["apply", lowered, "--local", "--by", role]) == 0
    served.advance(120)
    capsys.readouterr()

    assert main(["history", QUEUE, "--local"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert {row.split()[1] for row in rows} == {"alice", "bob"}, "names, not moto's ARN"
    # Alerts of the reconciler (PREEMPTION_RISK) and of the alert function (JOB_STUCK).
    served.submit_job(QUEUE, "team-a", "ml.p4d.24xlarge", 1, name="typo")
    served.advance(30)
    assert main(["local", "alerts", "-o", "json"]) == 0
    alerts = json.loads(capsys.readouterr().out)
    assert {a["kind"] for a in alerts} >= {"PREEMPTION_RISK", "JOB_STUCK"}
    stamps = {a["occurredAt"] for a in alerts}
    assert len({len(s) for s in stamps}) == 1, stamps
    assert all(s.endswith("Z") and len(s) == len("2026-03-16T19:00:00.000Z") for s in stamps)


# -- 8. delete a stray item, a share's or a queue's config --------------------------------------


def test_a_stray_item_is_named_by_apply_and_removed_with_delete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_doc(tmp_path, guide_layout().build())
    with LocalStack() as stack:
        stack.apply(guide_layout().build())
        stack.advance(120)
        stack.put_item({"queue": QUEUE, "item": "SHARE-team-d", "capacityLimits": []})
        stack.advance(30)
        capsys.readouterr()
        table = ["--table", stack.table_name]

        assert main(["apply", path, "--prune", *table]) == 1
        err = capsys.readouterr().err
        assert "items the table keeps (SHARE-team-d)" in err
        assert "none kept" not in err
        assert f"`quotactl delete {QUEUE} SHARE-team-d --table {stack.table_name}`" in err

        # The stream does not pass a stray key on (template FilterCriteria): a resync, or this,
        # reconciles it.
        assert main(["reconcile", QUEUE, *table]) == 1
        capsys.readouterr()
        assert stack.status(QUEUE)["conditions"]["Valid"]["status"] == "False"

        assert main(["delete", QUEUE, "SHARE-team-d", "--dry-run", *table]) == 0
        assert "would delete" in capsys.readouterr().out
        assert stack.table.get_item(Key={"queue": QUEUE, "item": "SHARE-team-d"}).get("Item")
        assert main(["delete", QUEUE, "SHARE-team-d", *table]) == 0
        out = capsys.readouterr().out
        assert "SHARE-team-d  deleted" in out
        assert not stack.table.get_item(Key={"queue": QUEUE, "item": "SHARE-team-d"}).get("Item")
        assert main(["reconcile", QUEUE, *table]) == 0
        capsys.readouterr()
        assert stack.status(QUEUE)["conditions"]["Valid"]["status"] == "True"

        assert main(["delete", QUEUE, "STATUS#QUEUE", *table]) == 1
        assert "the controller's own items" in capsys.readouterr().err
        assert main(["delete", QUEUE, "SHARE#nope", *table]) == 1
        assert "has no item SHARE#nope" in capsys.readouterr().err
        assert main(["delete", QUEUE, *table]) == 2


def test_delete_refuses_to_leave_a_window_naming_the_deleted_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().build()
    doc["windows"] = [
        {
            "name": "c-nights",
            "every": {"days": ["MON", "TUE"], "start": "20:00", "end": "23:00", "timeZone": "UTC"},
            "quotaShares": [{"quotaShareName": "team-c", "state": "DISABLED"}],
        }
    ]
    with LocalStack() as stack:
        stack.apply(doc)
        stack.advance(120)
        table = ["--table", stack.table_name]
        capsys.readouterr()
        for dry in ([], ["--dry-run"]):
            assert main(["delete", QUEUE, "SHARE#team-c", *dry, *table]) == 1
            err = capsys.readouterr().err
            assert f"deleting SHARE#team-c would make job queue {QUEUE}'s config invalid" in err
            assert (
                "item QUEUE: windows[0].quotaShares[0].quotaShareName: names quota share "
                "'team-c', which the document does not have" in err
            )
            assert "(window 'c-nights')" in err
            assert "quotactl apply -f FILE --prune --table" in err
        assert stack.table.get_item(Key={"queue": QUEUE, "item": "SHARE#team-c"}).get("Item")
        assert main(["reconcile", QUEUE, *table]) == 0
        capsys.readouterr()
        assert stack.status(QUEUE)["conditions"]["Valid"]["status"] == "True"

        # What the window does not name may go.
        assert main(["delete", QUEUE, "SHARE#team-b", *table]) == 0
        assert "SHARE#team-b  deleted" in capsys.readouterr().out


def test_delete_never_removes_an_item_edited_after_it_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from quota_controller.adapters.config_store import DynamoConfigStore

    with LocalStack() as stack:
        stack.apply(guide_layout().build())
        read = DynamoConfigStore.load_partition

        def load(self: DynamoConfigStore, queue: str) -> list[dict[str, Any]]:
            items = read(self, queue)
            share = dict(stack.table.get_item(Key={"queue": QUEUE, "item": "SHARE#team-c"})["Item"])
            stack.put_item({**share, "state": "DISABLED"})  # someone, in the console, meanwhile
            return items

        monkeypatch.setattr(DynamoConfigStore, "load_partition", load)
        assert main(["delete", QUEUE, "--all", "--table", stack.table_name]) == 1
        assert "changed in the table since it was read (SHARE#team-c)" in capsys.readouterr().err
        monkeypatch.setattr(DynamoConfigStore, "load_partition", read)
        keys = {i["item"] for i in read(DynamoConfigStore(stack.table), QUEUE)}
        assert {"QUEUE", "SHARE#team-a", "SHARE#team-b", "SHARE#team-c"} <= keys

        assert main(["delete", QUEUE, "--all", "--table", stack.table_name]) == 0
        assert "tears the queue's AWS Batch resources down" in capsys.readouterr().out
        keys = {i["item"] for i in read(DynamoConfigStore(stack.table), QUEUE)}
        assert not {k for k in keys if k == "QUEUE" or k.startswith("SHARE")}
