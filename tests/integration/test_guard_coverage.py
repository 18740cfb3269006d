"""The guard sees every job a change can hurt (issue 14, items 1-5), through the real handlers
on the local stack: a borrower of a lender, a job a raise in the same plan would dispatch, a
queued job a time-limit rule would terminate, the jobs of a renamed environment, and an
approval that approves one hold of one change only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from builders import DocBuilder, ShareBuilder, g5

from quota_controller.domain.config.items import plain
from quota_local.stack import LocalStack

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"
QUOTA_RULE = {
    "reason": "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "state": "RUNNABLE",
    "maxTimeSeconds": 600,
    "action": "TERMINATE",
}


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


def status_of(stack: LocalStack, job: str) -> str:
    return str(stack.batch.describe_service_job(jobId=job)["status"])


def preempted(stack: LocalStack, job: str) -> int:
    found = stack.batch.describe_service_job(jobId=job)
    return int((found.get("preemptionSummary") or {}).get("preemptedAttemptCount", 0))


def share_of(stack: LocalStack, name: str) -> dict[str, Any] | None:
    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    return next((dict(s) for s in shares if s["quotaShareName"] == name), None)


def risk_alerts(stack: LocalStack) -> list[dict[str, Any]]:
    return [a for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK"]


# -- 1. lender edits -------------------------------------------------------------------------


def lender_layout(
    lender: int | None, strategy: str = "LEND", policy: str = "block"
) -> dict[str, Any]:
    doc = DocBuilder(QUEUE).env(**g5(3)).share("team-a", "LEND_AND_BORROW", 200, **g5(1))
    if lender is not None:
        doc.share("team-c", strategy, **g5(lender))
    return doc.set(reductionPolicy=policy).build()


def borrowing(stack: LocalStack) -> list[str]:
    """team-a runs 3 jobs on its own 1 and 2 lent by the idle team-c, started a second apart
    (jobs started in the same millisecond tie: each may hold the borrowed capacity)."""
    stack.apply(lender_layout(2))
    stack.advance(120)
    jobs = []
    for n in range(3):
        jobs.append(stack.submit_job(QUEUE, "team-a", G5, 1, name=f"a-{n}"))
        stack.advance(1)
    stack.advance(60)
    assert [status_of(stack, j) for j in jobs] == ["RUNNING"] * 3
    return jobs


@pytest.mark.parametrize(
    ("edit", "at_risk"),
    [
        pytest.param(lender_layout(1), 1, id="lender-lowered"),
        pytest.param(lender_layout(2, "RESERVE"), 2, id="lender-to-reserve"),
        pytest.param(None, 2, id="lender-removed"),
    ],
)
def test_a_lender_edit_under_block_holds_and_names_the_borrowers_jobs(
    stack: LocalStack, edit: dict[str, Any] | None, at_risk: int
) -> None:
    jobs = borrowing(stack)

    if edit is None:
        stack.delete_item(QUEUE, "SHARE#team-c")  # disabled, then deleted: it lends no more
    else:
        stack.apply(edit)
    stack.advance(120)

    assert [status_of(stack, j) for j in jobs] == ["RUNNING"] * 3
    assert all(preempted(stack, j) == 0 for j in jobs)
    held = stack.status(QUEUE)["heldChange"]
    assert held is not None
    assert held["decision"] == "blocked"
    assert len(held["jobs"]) == at_risk
    assert set(held["jobs"]) <= set(jobs)
    assert all("team-c" in a["why"] for a in held["atRisk"])
    alerts = risk_alerts(stack)
    assert len(alerts) == 1
    assert {j["jobId"] for j in alerts[0]["jobs"]} == set(held["jobs"])
    assert share_of(stack, "team-c") is not None


def test_a_lowered_lender_is_blamed_with_its_author_when_the_borrower_is_preempted(
    stack: LocalStack,
) -> None:
    jobs = borrowing(stack)

    stack.apply(lender_layout(1, policy="warn"), by="alice")
    stack.advance(120)

    assert sum(preempted(stack, j) for j in jobs) == 1
    risks = risk_alerts(stack)
    assert len(risks) == 1
    assert len(risks[0]["jobs"]) == 1
    alerts = [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]
    assert len(alerts) == 1
    alert = alerts[0]
    assert alert["cause"] == "QUOTA_REDUCTION"
    assert alert["change"]["by"] == "alice"
    assert "team-c" in alert["summary"]
    assert "alice" in alert["summary"]
    assert "reclaimed" not in alert["summary"]


# -- 2. within one plan ----------------------------------------------------------------------


def test_a_raise_in_the_same_plan_never_dispatches_a_job_the_reduction_then_preempts(
    stack: LocalStack,
) -> None:
    doc = DocBuilder(QUEUE).env(**g5(1)).share("team-a", "RESERVE", **g5(2))
    stack.apply(doc.set(reductionPolicy="block").build())
    stack.advance(120)
    jobs = [stack.submit_job(QUEUE, "team-a", G5, 1, name=f"a-{n}") for n in range(2)]
    stack.advance(60)
    assert [status_of(stack, j) for j in jobs] == ["RUNNING", "RUNNABLE"]

    # One edit: the environment 1 -> 2 and team-a 2 -> 1 (1 running: it fits).
    doc = DocBuilder(QUEUE).env(**g5(2)).share("team-a", "RESERVE", **g5(1))
    stack.apply(doc.set(reductionPolicy="block").build())
    stack.advance(300)

    assert all(preempted(stack, j) == 0 for j in jobs)
    assert [status_of(stack, j) for j in jobs] == ["RUNNING", "RUNNABLE"]
    env = stack.batch.describe_service_environments(serviceEnvironments=[f"{QUEUE}-env"])
    assert env["serviceEnvironments"][0]["capacityLimits"][0]["maxCapacity"] == 2
    assert share_of(stack, "team-a")["capacityLimits"][0]["maxCapacity"] == 1  # type: ignore[index]


# -- 3. queued jobs a time-limit rule terminates ----------------------------------------------


def test_a_reduction_that_leaves_a_queued_job_to_a_terminate_rule_is_held(
    stack: LocalStack,
) -> None:
    def layout(limit: int) -> dict[str, Any]:
        doc = DocBuilder(QUEUE).env(**g5(3)).queue(jobStateTimeLimitActions=[QUOTA_RULE])
        return doc.share("team-a", "RESERVE", **g5(limit)).set(reductionPolicy="block").build()

    stack.apply(layout(2))
    stack.advance(120)
    small = stack.submit_job(QUEUE, "team-a", G5, 1, name="small")
    stack.advance(30)
    big = stack.submit_job(QUEUE, "team-a", G5, 2, name="big")  # waits for small
    stack.advance(30)
    assert (status_of(stack, small), status_of(stack, big)) == ("RUNNING", "RUNNABLE")

    stack.apply(layout(1))  # small still fits; big can never run, and the rule kills it
    stack.advance(1200)

    assert status_of(stack, big) == "RUNNABLE"
    held = stack.status(QUEUE)["heldChange"]
    assert held["decision"] == "blocked"
    why = {a["jobId"]: a["why"] for a in held["atRisk"]}
    assert list(why) == [big]
    assert "jobStateTimeLimitActions" in why[big]
    assert "terminated" in why[big]
    alerts = risk_alerts(stack)
    assert [j["jobId"] for j in alerts[0]["jobs"]] == [big]


# -- 4. environment renames ------------------------------------------------------------------


def renamed(name: str, limit: int, policy: str) -> dict[str, Any]:
    doc = DocBuilder(QUEUE).env(**g5(limit)).share("team-a", "RESERVE", **g5(3))
    raw = doc.set(reductionPolicy=policy).build()
    raw["serviceEnvironment"]["serviceEnvironmentName"] = name
    return raw


def environment(stack: LocalStack, name: str) -> dict[str, Any] | None:
    found = stack.batch.describe_service_environments()["serviceEnvironments"]
    return next((dict(e) for e in found if e["serviceEnvironmentName"] == name), None)


def test_renaming_the_environment_to_a_smaller_one_under_running_jobs_is_held(
    stack: LocalStack,
) -> None:
    stack.apply(renamed("big-env", 3, "block"))
    stack.advance(120)
    jobs = [stack.submit_job(QUEUE, "team-a", G5, 1, name=f"a-{n}") for n in range(3)]
    stack.advance(60)

    stack.apply(renamed("small-env", 1, "block"))
    stack.advance(600)

    assert [status_of(stack, j) for j in jobs] == ["RUNNING"] * 3
    old = environment(stack, "big-env")
    assert old is not None
    assert (old["state"], old["status"]) == ("ENABLED", "VALID")
    queue = stack.batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]
    assert queue["serviceEnvironmentOrder"][0]["serviceEnvironment"] == old["serviceEnvironmentArn"]
    held = stack.status(QUEUE)["heldChange"]
    assert held["decision"] == "blocked"
    # Two of the three must go; they started together, so which is Batch's choice: all named.
    assert set(held["jobs"]) == set(jobs)


def test_renaming_the_environment_under_warn_names_the_jobs_first(stack: LocalStack) -> None:
    stack.apply(renamed("big-env", 3, "warn"))
    stack.advance(120)
    jobs = [stack.submit_job(QUEUE, "team-a", G5, 1, name=f"a-{n}") for n in range(3)]
    stack.advance(60)

    stack.apply(renamed("small-env", 1, "warn"))
    stack.advance(600)

    alerts = risk_alerts(stack)
    assert len(alerts) == 1
    named = {j["jobId"] for j in alerts[0]["jobs"]}
    assert named == set(jobs)  # two of three tied for the cut: Batch picks which
    assert "(in use: 3, new ceiling: 1)" in alerts[0]["detail"]
    hurt = {j for j in jobs if preempted(stack, j) or status_of(stack, j) != "RUNNING"}
    assert hurt <= named  # nothing hurt that was not named first
    queue = stack.batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]
    new = environment(stack, "small-env")
    assert new is not None
    assert queue["serviceEnvironmentOrder"][0]["serviceEnvironment"] == new["serviceEnvironmentArn"]


# -- 5. approvals once, really ---------------------------------------------------------------


def team_b(stack: LocalStack, limit: int, **queue_fields: object) -> None:
    doc = DocBuilder(QUEUE).env(**g5(3)).share("team-a", "RESERVE", **g5(1))
    doc.share("team-b", "RESERVE", **g5(limit))
    stack.apply(doc.set(reductionPolicy="block", **queue_fields).build())


def test_an_approval_of_a_change_applied_meanwhile_never_approves_it_again(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    from quotactl.main import main

    team_b(stack, 2)
    stack.advance(120)
    first = [stack.submit_job(QUEUE, "team-b", G5, 1, name=f"first-{n}") for n in range(2)]
    stack.advance(60)
    team_b(stack, 1)
    stack.advance(60)
    held = stack.status(QUEUE)["heldChange"]["id"]
    for job in first:
        stack.batch.terminate_service_job(jobId=job, reason="done")
    stack.advance(120)  # no job at risk any more: the change is applied without approval
    assert share_of(stack, "team-b")["capacityLimits"][0]["maxCapacity"] == 1  # type: ignore[index]
    capsys.readouterr()

    code = main(["approve", QUEUE, held, "--table", stack.table_name])

    err = capsys.readouterr().err
    assert code != 0
    assert held in err
    assert "not held" in err
    queue_item = plain(stack.table.get_item(Key={"queue": QUEUE, "item": "QUEUE"})["Item"])
    assert queue_item.get("approvedChange") != held

    # Even an approval written by hand never approves the same lowering made again later.
    team_b(stack, 2, approvedChange=held)
    stack.advance(120)
    second = [stack.submit_job(QUEUE, "team-b", G5, 1, name=f"second-{n}") for n in range(2)]
    stack.advance(60)
    team_b(stack, 1, approvedChange=held)
    stack.advance(60)

    assert share_of(stack, "team-b")["capacityLimits"][0]["maxCapacity"] == 2  # type: ignore[index]
    assert [status_of(stack, j) for j in second] == ["RUNNING"] * 2
    again = stack.status(QUEUE)["heldChange"]
    assert again["decision"] == "blocked"
    assert again["id"] != held


# -- in-share preemption turned on ---------------------------------------------------------------


def in_share(policy: str, enabled: bool) -> dict[str, Any]:
    team_a = ShareBuilder("team-a", g5(1)).in_share_preemption("ENABLED" if enabled else "DISABLED")
    doc = DocBuilder(QUEUE).env(**g5(2)).add(team_a).share("team-b", **g5(1))
    return doc.set(reductionPolicy=policy).build()


@pytest.mark.parametrize("policy", ["warn", "block"])
def test_turning_in_share_preemption_on_names_the_jobs_a_waiting_one_outranks(
    stack: LocalStack, policy: str
) -> None:
    """team-a's low-priority job fills its quota; a priority-5 job waits behind it. Turning
    in-share preemption on makes Batch preempt the first for the second at once: the guard
    names it first, and `block` holds the change."""
    stack.apply(in_share(policy, enabled=False))
    stack.advance(120)
    low = stack.submit_job(QUEUE, "team-a", G5, 1, priority=0, name="low")
    stack.advance(60)
    high = stack.submit_job(QUEUE, "team-a", G5, 1, priority=5, name="high")
    stack.advance(60)
    assert (status_of(stack, low), status_of(stack, high)) == ("RUNNING", "RUNNABLE")

    stack.apply(in_share(policy, enabled=True), by="alice")
    stack.advance(120)

    (risk,) = risk_alerts(stack)
    assert [j["jobId"] for j in risk["jobs"]] == [low]
    assert risk["summary"].startswith("Turning in-share preemption on for quota share team-a")
    if policy == "block":
        assert stack.status(QUEUE)["heldChange"]["jobs"] == [low]
        assert status_of(stack, low) == "RUNNING"
        return
    assert preempted(stack, low) == 1
    (alert,) = [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]
    assert alert["cause"] == "IN_SHARE_PRIORITY"
    assert [j["jobId"] for j in alert["jobs"]] == [low]
