"""The early warning of a scheduled reduction: when it is due, how the reconcile comes back for
it, and what it says, through `reconcile(queue, deps)` on the port fakes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from builders import guide_layout
from golden.harness import Harness

from quota_controller.domain.config.timeline import parse_windows
from quota_controller.domain.impact_records import (
    ActiveJob,
    Decision,
    GuardedAction,
    JobAtRisk,
    Risk,
)
from quota_controller.domain.plan_records import Action
from quota_controller.domain.reductions import Reduction
from quota_controller.domain.scheduled_warning import (
    edges_to_warn,
    next_warning_in,
    scheduled_risk_alerts,
)

EDGE = datetime(2026, 12, 4, 18, 0, tzinfo=UTC)
G5 = "ml.g5.xlarge"


def one_off(start: datetime, until: datetime) -> list[Any]:
    return parse_windows(
        [
            {
                "name": "w",
                "from": start.isoformat(),
                "until": until.isoformat(),
                "quotaShares": [{"quotaShareName": "team-a", "state": "DISABLED"}],
            }
        ]
    )


@pytest.mark.parametrize(
    ("before_edge", "lead", "due", "wait"),
    [
        (timedelta(hours=1), 30, [], 1800),
        (timedelta(minutes=30), 30, [EDGE], 86400),  # then the end's, a day later
        (timedelta(minutes=1), 30, [EDGE], 86400 - 1800 + 60),
        (timedelta(0), 30, [], 86400 - 1800),  # the edge itself is the guard's
        (timedelta(hours=1), 0, [], None),  # lead 0: no early warning
        (timedelta(minutes=30, milliseconds=200), 30, [], 1),  # hops are at least 1 s
        (timedelta(days=8), 7 * 24 * 60, [], 86400),
    ],
)
def test_when_the_warning_is_due(
    before_edge: timedelta, lead: int, due: list[datetime], wait: int | None
) -> None:
    windows = one_off(EDGE, EDGE + timedelta(days=1))
    now = EDGE - before_edge
    assert edges_to_warn(windows, now, lead) == due
    assert next_warning_in(windows, now, lead, 7 * 86400) == wait
    assert edges_to_warn([], now, lead) == []
    assert next_warning_in([], now, lead, 7 * 86400) is None


def loan_doc(start: datetime, until: datetime, **settings: Any) -> dict[str, Any]:
    doc = guide_layout().set(**settings).build()
    doc["windows"] = [
        {
            "name": "loan-to-team-b",
            "from": start.isoformat().replace("+00:00", "Z"),
            "until": until.isoformat().replace("+00:00", "Z"),
            "quotaShares": [
                {
                    "quotaShareName": "team-b",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 3}],
                }
            ],
        }
    ]
    return doc


def lent(h: Harness, hours: float = 2, **settings: Any) -> datetime:
    """team-b holds a loan of 3 until `hours` from now, running 3 jobs (the lower the
    priority, the later started); returns the edge."""
    now = h.clock.now()
    until = now + timedelta(hours=hours)
    h.apply(loan_doc(now - timedelta(minutes=5), until, **settings))
    h.converge()
    for n in range(3):
        h.batch.add_job(
            "ml-training", "team-b", f"job-{n}", {G5: 1},
            priority=n, name=f"s-{n}", started_at=(3 - n) * 1000,
        )  # fmt: skip
    return until


def team_b_limit(h: Harness) -> int:
    share = h.batch.shares["ml-training"]["team-b"]
    return int(share["capacityLimits"][0]["maxCapacity"])


def risks(h: Harness) -> list[Any]:
    return [a for a in h.notifier.published if a.kind == "PREEMPTION_RISK"]


def test_the_reconcile_comes_back_when_the_warning_is_due_then_at_the_edge() -> None:
    h = Harness()
    edge = lent(h, reductionPolicy="warn", windowWarningMinutes=45)
    result = h.run("two hours before")
    assert result is not None
    assert result.outcome == "converged"
    assert result.requeue_after == (edge - h.clock.now()).total_seconds() - 45 * 60
    assert risks(h) == []

    h.clock.set(edge - timedelta(minutes=45))
    result = h.run("the warning's moment")
    assert result is not None
    assert result.requeue_after == 45 * 60, "then the edge itself"
    [warning] = risks(h)
    assert warning.quotaShareName == "team-b"
    assert sorted(j.jobName for j in warning.jobs) == ["s-0", "s-1"]
    assert "it is applied then (reductionPolicy warn)" in warning.detail
    assert team_b_limit(h) == 3, "the warning changes nothing"

    h.clock.advance(600)
    h.run("ten minutes later")
    assert len(risks(h)) == 1, "the same edge is not announced twice"


def test_a_blocked_reduction_is_announced_as_held_until_approved() -> None:
    h = Harness()
    edge = lent(h, reductionPolicy="block")
    h.clock.set(edge - timedelta(minutes=10))
    h.run("within the default 30 minutes")
    [warning] = risks(h)
    assert "held until approved (reductionPolicy block)" in warning.detail
    assert warning.dedupKey == f"ml-training:team-b:scheduled:{edge:%Y-%m-%dT%H:%MZ}"
    assert team_b_limit(h) == 3


def test_an_edge_that_lowers_nothing_in_use_is_not_announced() -> None:
    h = Harness()
    now = h.clock.now()
    h.apply(loan_doc(now - timedelta(minutes=5), now + timedelta(minutes=20)))
    h.converge()
    h.batch.add_job("ml-training", "team-b", "small", {G5: 1}, name="small")  # fits 1
    h.run("within the lead")
    assert risks(h) == []


def test_the_warning_names_only_what_the_edge_changes() -> None:
    """A reduction of the layout in force now (held by block) is the guard's own alert, not
    the edge's: the early warning names the window's reduction alone."""
    h = Harness()
    edge = lent(h, reductionPolicy="block")
    queue_item = h.store.item("ml-training", "QUEUE")
    assert queue_item is not None
    env = dict(queue_item["serviceEnvironment"])
    env["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 2}]
    h.edit_item("QUEUE", serviceEnvironment=env)  # lowered now, under team-b's 3 jobs
    h.clock.set(edge - timedelta(minutes=10))
    h.run("an edit within the lead time")
    scheduled = [a for a in risks(h) if ":scheduled:" in a.dedupKey]
    assert [a.quotaShareName for a in scheduled] == ["team-b"]
    held = [a for a in risks(h) if ":scheduled:" not in a.dedupKey]
    # The environment's own risk alert, to the owners of the jobs it puts at risk.
    assert [a.quotaShareName for a in held] == ["team-b"]
    assert "the service environment" in held[0].summary


def change_windows(h: Harness) -> dict[str, list[str]]:
    """Each change record's resource and the windows whose end it names, newest first."""
    return {
        str(r.get("resource")): list(r.get("windowsEnded") or [])
        for r in reversed(h.store.recent_changes("ml-training", limit=100))
    }


def test_a_held_window_end_names_its_window_when_it_applies_later() -> None:
    h = Harness()
    edge = lent(h, reductionPolicy="block")
    h.clock.set(edge + timedelta(seconds=5))
    result = h.run("the edge: held")
    assert result is not None
    assert result.outcome == "blocked"
    assert team_b_limit(h) == 3
    h.clock.advance(3600)
    h.edit_item("QUEUE", approvedChange=result.held_change)
    h.run("approved an hour later")
    assert team_b_limit(h) == 1
    records = change_windows(h)
    [team_b] = [k for k in records if "team-b" in k]
    assert records[team_b] == ["loan-to-team-b"]
    status = h.store.item("ml-training", "STATUS#QUEUE")
    assert status is not None
    assert "windowsEndedPending" not in status, "made: nothing is pending any more"


def test_only_the_requests_a_window_set_name_its_end() -> None:
    h = Harness()
    edge = lent(h, reductionPolicy="warn")
    doc = h.store.item("ml-training", "SHARE#team-a")
    assert doc is not None
    h.edit_item("SHARE#team-a", tags={"cost-center": "7"})  # an edit of another share
    h.clock.set(edge + timedelta(seconds=5))
    h.run("the edge")
    records = change_windows(h)
    assert [w for k, w in records.items() if "team-b" in k] == [["loan-to-team-b"]]
    assert [w for k, w in records.items() if "team-a" in k] == [[]]


def test_a_lowering_edge_behind_a_raising_one_gets_its_full_lead_time() -> None:
    h = Harness()
    now = h.clock.now()
    doc = loan_doc(now - timedelta(minutes=5), now + timedelta(minutes=20))
    doc["windows"].append(
        {
            "name": "team-a-sprint",
            "from": (now + timedelta(minutes=10)).isoformat(),
            "until": (now + timedelta(hours=2)).isoformat(),
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                }
            ],
        }
    )
    h.apply(doc)
    h.converge()
    for n in range(3):
        h.batch.add_job(
            "ml-training", "team-b", f"job-{n}", {G5: 1},
            priority=n, name=f"s-{n}", started_at=(3 - n) * 1000,
        )  # fmt: skip
    h.run("30 minutes ahead of both edges")
    [warning] = risks(h)
    assert warning.quotaShareName == "team-b", "the loan's end, 20 minutes ahead, not the next edge"


def test_a_window_deleted_from_the_document_did_not_end() -> None:
    """Taking a window out is an edit: the reduction it brings names no window's end."""
    h = Harness()
    lent(h, reductionPolicy="warn")
    h.edit_item("QUEUE", windows=None)  # the loan deleted, hours before its end
    h.clock.advance(60)
    h.run("the edit")
    assert team_b_limit(h) == 1
    records = change_windows(h)
    assert [w for k, w in records.items() if "team-b" in k] == [[]]


# -- whom the warning reaches, and what protects the jobs (pure) --------------------------------


def _job(job_id: str, share: str) -> ActiveJob:
    return ActiveJob(job_id, job_id, f"arn:{job_id}", "RUNNING", share, {G5: 1}, priority=1)


def _env_lowered(decision: Decision, *jobs: ActiveJob) -> GuardedAction:
    """The service environment lowered from 4 to 2 under `jobs`."""
    cut = Reduction("limit", None, G5, 4, 2)
    action = Action(
        "UpdateServiceEnvironment", {}, "service environment env", "lower", reductions=(cut,)
    )
    at_risk = [JobAtRisk(j, "may be preempted: the environment lowered") for j in jobs]
    return GuardedAction(action, decision, [Risk(cut, 4, 2, tuple(jobs))], at_risk=at_risk)


ENV_EDGE = datetime(2026, 3, 16, 21, 0, tzinfo=UTC)


def test_an_environment_edge_warns_the_owners_of_each_share_whose_jobs_it_puts_at_risk() -> None:
    guarded = _env_lowered("apply-with-warning", _job("a1", "team-a"), _job("b1", "team-b"))
    alerts = scheduled_risk_alerts(
        "q", ENV_EDGE, ["maintenance"], [guarded], ENV_EDGE - timedelta(minutes=30)
    )
    assert [(a.quotaShareName, [j.jobId for j in a.jobs]) for a in alerts] == [
        ("team-a", ["a1"]),
        ("team-b", ["b1"]),
    ]
    assert all("lower the service environment" in a.summary for a in alerts)
    # A window that begins is not escaped by one that ends later.
    assert alerts[0].protection == (
        "A checkpoint before 2026-03-16T21:00Z, or quota window maintenance moved later: from "
        "then the service environment has the layout of maintenance"
    )


def test_a_held_edge_says_nothing_is_preempted_then() -> None:
    guarded = _env_lowered("blocked", _job("a1", "team-a"))
    (alert,) = scheduled_risk_alerts(
        "q", ENV_EDGE, [], [guarded], ENV_EDGE - timedelta(minutes=30), windows_before=["night"]
    )
    assert alert.protection is not None
    assert alert.protection.startswith("They are protected for now")
    assert alert.nextSteps[0].startswith("Nothing is preempted at 2026-03-16T21:00Z")


def test_an_edge_that_lowers_two_things_names_both_in_its_protection() -> None:
    env = _env_lowered("apply-with-warning", _job("a1", "team-a"))
    cut = Reduction("limit", "team-a", G5, 4, 2)
    share = GuardedAction(
        Action("UpdateQuotaShare", {}, "quota share team-a", "lower", "team-a", (cut,)),
        "apply-with-warning",
        [Risk(cut, 4, 2, (_job("a2", "team-a"),))],
    )
    (alert,) = scheduled_risk_alerts("q", ENV_EDGE, [], [env, share], ENV_EDGE)
    assert "lower the service environment and quota share team-a" in alert.summary
    assert alert.protection is not None
    assert "from then the service environment and quota share team-a have" in alert.protection
