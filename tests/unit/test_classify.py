"""observe, classify and build_alert: which Batch events are alerts, why a job was evicted, and
what the alert says.

The job of a row is `job-a` of team-a on one ml.g5.xlarge unless the row says otherwise; its
preemption (attempt 1) starts at T0 and completes at DONE = T0+20s (see alert_builders). The
layout is the AWS guide's (3 x ml.g5.xlarge; team-a and team-b LEND_AND_BORROW 100%, team-c
LEND, one instance each), with in-share preemption off unless a row's document says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alert_builders import (
    CAPACITY,
    DONE,
    ENV_LIMIT,
    G5,
    G5_2X,
    IN_PROGRESS,
    QUEUE,
    RECLAIM,
    SHARE_LIMIT,
    STOPPED,
    T0,
    EventBuilder,
    JobBuilder,
    attempt_arn,
    change,
    completed,
    described,
    env_change,
    job_arn,
    preempted_attempt,
    queue_blocked,
    snapshot,
    stamp,
    started,
    state_change,
)
from builders import DocBuilder, ShareBuilder, g5, guide_layout
from pydantic import ValidationError

from quota_controller.domain.alerts.classify import Context, Verdict, classify
from quota_controller.domain.alerts.events import BatchEvent, queue_name
from quota_controller.domain.alerts.groups import build_alert, group
from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.alerts.observation import (
    Observation,
    failed_by_preemption,
    merge,
    observe,
)
from quota_controller.domain.alerts.waiting import WaitingJob
from quota_controller.domain.config import QuotaDocument, validate_document
from quota_controller.domain.epoch import epoch_ms
from quota_controller.domain.snapshot import QueueSnapshot

SAMPLES = Path(__file__).resolve().parents[2] / "events" / "alert"

J = "job-a"
A1 = attempt_arn(J, 1)
A2 = attempt_arn(J, 2)
KEY = f"{J}:{A1}"
IN_SHARE = "In-share preemption triggered by a higher-priority job"


def document(builder: DocBuilder) -> QuotaDocument:
    report = validate_document(builder.build())
    assert report.document is not None, report.errors
    return report.document


GUIDE = document(guide_layout())
# The guide's layout plus team-d, a RESERVE share that never lends.
WITH_RESERVE = document(guide_layout().env(**g5(4)).share("team-d", **g5(1)))
# team-a may also be preempted by a higher-priority job of its own.
IN_SHARE_ON = document(
    DocBuilder("ml-training")
    .env(**g5(3))
    .add(ShareBuilder("team-a", g5(1)).strategy("LEND_AND_BORROW", 100).in_share_preemption())
    .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
    .share("team-c", "LEND", **g5(1))
)

# team-d: a RESERVE share (it never borrows) whose jobs preempt each other by priority.
RESERVE_IN_SHARE_ON = document(
    guide_layout().env(**g5(4)).add(ShareBuilder("team-d", g5(1)).in_share_preemption())
)

# team-a as the document says once a held change to LEND is applied.
A_HELD_AS_LEND = document(
    DocBuilder("ml-training")
    .env(**g5(3))
    .share("team-a", "LEND", **g5(1))
    .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
    .share("team-c", "LEND", **g5(1))
)


def sample(name: str) -> BatchEvent:
    return BatchEvent.model_validate(json.loads((SAMPLES / name).read_text()))


def observed(event: EventBuilder | BatchEvent, job: JobBuilder | None) -> Observation | None:
    batch_event = event.event() if isinstance(event, EventBuilder) else event
    return observe(batch_event, job.parsed() if job else None)


# -- observe: which events are about a preemption or a stuck job -------------------------------


def test_epoch_ms_reads_milliseconds_and_seconds() -> None:
    given = [1773691064669, 1773691064, "1773691064", 1773691064.5, None, True, "soon", [1]]
    assert [epoch_ms(v) for v in given] == [
        1773691064669,
        1773691064000,
        1773691064000,
        1773691064500,
        None,
        None,
        None,
        None,
    ]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("arn:aws:batch:us-east-1:123456789012:job-queue/ml-training", "ml-training"),
        ("ml-training", "ml-training"),
        (None, None),
        ("", None),
    ],
)
def test_queue_name(given: str | None, expected: str | None) -> None:
    assert queue_name(given) == expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(started(J), J, id="started-ARN-last-segment"),
        pytest.param(completed(J), J, id="completed-ARN-last-segment"),
        pytest.param(state_change(J), J, id="state-change-jobId"),
        pytest.param(
            state_change("4c7599ae").job_id("0bb17543"), "0bb17543", id="doc-quirk-jobId-wins"
        ),
        pytest.param(state_change(J).job_id(None), J, id="no-jobId-uses-jobArn"),
        pytest.param(state_change(J).without("jobId", "jobArn"), J, id="then-resources"),
    ],
)
def test_job_id(event: EventBuilder, expected: str) -> None:
    assert event.event().job_id() == expected


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(started(J).without("preemptedJobArn"), id="preemption-without-job-ARN"),
        pytest.param(started(J).set(preemptedJobArn=job_arn("")), id="ARN-without-job-id"),
        pytest.param(state_change(J).without("jobId", "jobArn").envelope(resources=[]), id="none"),
    ],
)
def test_job_id_refuses_events_that_name_no_job(event: EventBuilder) -> None:
    with pytest.raises(ValueError):  # ValidationError is a ValueError too
        event.event().job_id()


@pytest.mark.parametrize(
    ("event", "job", "expected"),
    [
        pytest.param(
            started(J),
            described(J),
            {
                "job_id": J,
                "job_arn": job_arn(J),
                "job_name": f"train-{J}",
                "queue": QUEUE,
                "share": "team-a",
                "priority": 1,
                "usage": {G5: 1.0},
                "status_before": "RUNNING",
                "status_after": None,
                "attempt": A1,
                "preempted_count": 1,
                "reason": RECLAIM,
                "stuck": False,
                "occurred_at": T0,
            },
            id="started-before-describe-sees-the-preemption",
        ),
        pytest.param(
            started(J),
            described(J).preempted(),
            {"status_before": "RUNNING", "attempt": A1, "preempted_count": 1, "reason": RECLAIM},
            id="started-after-describe-sees-the-preemption",
        ),
        pytest.param(
            started(J),
            described(J).preempted().status("SCHEDULED").latest(A2),
            {"attempt": A1, "preempted_count": 1},
            id="started-after-the-job-was-dispatched-again",
        ),
        pytest.param(
            started(J),
            described(J).preempted(seconds=True).latest(A2),
            {"attempt": A1, "preempted_count": 1},
            id="started-describe-timestamps-in-seconds",
        ),
        pytest.param(
            started(J),
            described(J).summary(1, A1, stopped=T0 - timedelta(hours=1)).latest(A2),
            {"attempt": A2, "preempted_count": 2},
            id="started-second-preemption-of-a-requeued-job",
        ),
        pytest.param(
            started(J).status("SCHEDULED"),
            described(J).status("SCHEDULED"),
            {"status_before": "SCHEDULED", "attempt": A1},
            id="started-scheduled-victim",
        ),
        pytest.param(
            started(J).reason(IN_PROGRESS + IN_SHARE),
            described(J),
            {"reason": IN_SHARE},
            id="started-reason-without-the-in-progress-prefix",
        ),
        pytest.param(
            started(J),
            None,
            {"job_id": J, "queue": None, "share": None, "attempt": None, "usage": {}},
            id="started-job-gone",
        ),
        pytest.param(
            completed(J),
            described(J).preempted(),
            {
                "queue": QUEUE,
                "share": "team-a",
                "status_before": None,
                "status_after": "RUNNABLE",
                "attempt": A1,
                "preempted_count": 1,
                "reason": RECLAIM,
                "occurred_at": DONE,
            },
            id="completed-requeued",
        ),
        pytest.param(
            completed(J).status("FAILED"),
            described(J).preempted().status("FAILED"),
            {"status_after": "FAILED", "attempt": A1},
            id="completed-failed",
        ),
        pytest.param(
            completed(J)
            .in_seconds()
            .set(someFutureField={"x": 1})
            .envelope(someEnvelopeField="new"),
            described(J).preempted().set(someFutureField=[1, 2]),
            {"status_after": "RUNNABLE", "attempt": A1, "share": "team-a"},
            id="completed-seconds-and-unknown-fields",
        ),
        pytest.param(
            completed(J).attempt(A2).count(2),
            described(J).preempted(2),
            {"attempt": A2, "preempted_count": 2},
            id="completed-second-preemption",
        ),
        pytest.param(
            completed(J),
            None,
            {"queue": None, "attempt": A1, "status_after": "RUNNABLE"},
            id="completed-job-gone",
        ),
        pytest.param(
            state_change(J).summary().reason(RECLAIM),
            described(J).preempted(),
            {
                "queue": QUEUE,
                "share": "team-a",
                "status_before": None,
                "status_after": "RUNNABLE",
                "attempt": A1,
                "preempted_count": 1,
                "reason": RECLAIM,
            },
            id="state-change-requeued",
        ),
        pytest.param(
            state_change(J)
            .status("FAILED")
            .reason("Preempted: preemptionRetriesBeforeTermination exhausted")
            .summary()
            .retries(0),
            described(J).preempted().status("FAILED"),
            {"status_after": "FAILED", "attempt": A1, "reason": RECLAIM},
            id="state-change-failed-keeps-the-attempt-reason",
        ),
        pytest.param(
            state_change(J).summary(reason=None).reason("Preempted"),
            None,
            {"reason": "Preempted"},
            id="state-change-job-reason-when-the-attempt-has-none",
        ),
        pytest.param(
            state_change(J).summary().latest(None),
            described(J).preempted(),
            {"attempt": A1},
            id="state-change-without-latest-attempt",
        ),
        pytest.param(
            state_change(J).summary().share("team-b").usage(**g5(2)),
            None,
            {"queue": QUEUE, "share": "team-b", "usage": {G5: 2.0}, "attempt": A1},
            id="state-change-job-gone-uses-the-event",
        ),
        pytest.param(
            state_change(J).summary().without("quotaShareName", "schedulingPriority"),
            described(J).preempted().share("team-b").priority(7),
            {"share": "team-b", "priority": 7},
            id="state-change-gaps-filled-from-describe",
        ),
        pytest.param(
            state_change(J).summary().usage(**g5(2)).priority(3),
            described(J).preempted(),
            {"usage": {G5: 2.0}, "priority": 3},
            id="state-change-event-fields-win",
        ),
        pytest.param(
            state_change("4c7599ae").job_id("0bb17543").summary(),
            None,
            {
                "job_id": "0bb17543",
                "job_arn": job_arn("4c7599ae"),
                "attempt": attempt_arn("4c7599ae"),
                "dedup_key": f"0bb17543:{attempt_arn('4c7599ae')}",
            },
            id="state-change-doc-quirk-jobId-differs-from-ARN",
        ),
        pytest.param(
            state_change(J).reason(SHARE_LIMIT).usage(**g5(4)),
            described(J).status("RUNNABLE").latest(None),
            {
                "stuck": True,
                "status_after": "RUNNABLE",
                "reason": SHARE_LIMIT,
                "usage": {G5: 4.0},
                "dedup_key": f"{J}:stuck:MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
            },
            id="stuck-beyond-the-share",
        ),
        pytest.param(
            state_change(J).reason(ENV_LIMIT),
            None,
            {
                "stuck": True,
                "dedup_key": f"{J}:stuck:MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
            },
            id="stuck-beyond-the-environment",
        ),
    ],
)
def test_observe(event: EventBuilder, job: JobBuilder | None, expected: dict[str, Any]) -> None:
    obs = observed(event, job)
    assert obs is not None
    assert {k: getattr(obs, k) for k in expected} == expected


@pytest.mark.parametrize(
    ("event", "job"),
    [
        pytest.param(state_change(J), described(J).status("RUNNABLE"), id="fresh-runnable"),
        pytest.param(
            state_change(J)
            .reason("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED")
            .status("FAILED"),
            None,
            id="stuck-reason-on-a-failed-job",
        ),
        pytest.param(
            state_change(J).summary().latest(A2),
            described(J).preempted().latest(A2),
            id="retry-a-later-attempt-moved",
        ),
        pytest.param(
            state_change(J).status("FAILED").summary().latest(A2),
            None,
            id="a-later-attempt-failed-on-its-own",
        ),
        pytest.param(state_change(J).status("RUNNING").summary(), None, id="running-again"),
        pytest.param(state_change(J).status("SCHEDULED").summary(), None, id="dispatched"),
        pytest.param(
            state_change(J).status("SUCCEEDED").reason("Received status from SageMaker"),
            None,
            id="succeeded",
        ),
        pytest.param(state_change(J).status("FAILED").reason("AlgorithmError"), None, id="failed"),
        # Preempted once and requeued (the preempted attempt is still the latest), then ended by
        # something else: retries were left, so the preemption did not end it (issue 14 item 8).
        pytest.param(
            state_change(J).status("FAILED").summary().retries(3).reason("not needed any more"),
            None,
            id="cancelled-by-its-owner-with-retries-left",
        ),
        pytest.param(
            state_change(J)
            .status("FAILED")
            .summary()
            .retries(1)
            .reason(
                "Terminated by JobStateTimeLimit action due to reason: "
                "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
            ),
            None,
            id="terminated-by-a-time-limit-action",
        ),
        pytest.param(
            state_change(J).status("FAILED").summary().reason(RECLAIM),
            None,
            id="retries-unset-requeued-without-limit",
        ),
        pytest.param(
            state_change(J).status("FAILED").summary().retries(None),
            None,
            id="retries-field-unset",
        ),
        pytest.param(
            state_change(J).status("FAILED").history(2).retries(2),
            described(J).history(2).status("FAILED").retries(2),
            id="two-preemptions-of-two-allowed-then-terminated",
        ),
        pytest.param(
            state_change(J).status("FAILED").summary(),
            described(J).preempted().status("FAILED").retries(2),
            id="retries-left-as-describe-service-job-says",
        ),
    ],
)
def test_observe_ignores_state_changes_that_are_no_alert(
    event: EventBuilder, job: JobBuilder | None
) -> None:
    assert observed(event, job) is None


@pytest.mark.parametrize(
    ("count", "retries", "expected"),
    [(1, 0, True), (3, 2, True), (1, 1, False), (2, 5, False), (4, None, False)],
)
def test_a_job_fails_by_preemption_only_once_its_preemptions_outnumber_its_retries(
    count: int, retries: int | None, expected: bool
) -> None:
    job = described(J).history(count).status("FAILED").retries(retries).parsed()
    assert failed_by_preemption(job) is expected


@pytest.mark.parametrize(
    ("event", "job"),
    [
        pytest.param(started(J), described(J), id="started-describe-before"),
        pytest.param(started(J), described(J).preempted(), id="started-describe-after"),
        pytest.param(
            started(J),
            described(J).preempted().status("RUNNING").latest(A2),
            id="started-describe-after-redispatch",
        ),
        pytest.param(completed(J), described(J).preempted(), id="completed"),
        pytest.param(completed(J).in_seconds(), None, id="completed-seconds-job-gone"),
        pytest.param(
            completed(J).status("FAILED"), described(J).preempted().status("FAILED"), id="failed"
        ),
        pytest.param(state_change(J).summary(), described(J).preempted(), id="state-change"),
        pytest.param(
            state_change(J).summary().status("FAILED").retries(0), None, id="state-change-failed"
        ),
    ],
)
def test_events_of_one_preemption_share_one_dedup_key(
    event: EventBuilder, job: JobBuilder | None
) -> None:
    obs = observed(event, job)
    assert obs is not None
    assert obs.dedup_key == KEY


def test_each_preemption_of_a_job_has_its_own_dedup_key() -> None:
    first = observed(completed(J), described(J).preempted())
    second = observed(completed(J).attempt(A2).count(2), described(J).preempted(2))
    assert first is not None
    assert second is not None
    assert (first.dedup_key, second.dedup_key) == (KEY, f"{J}:{A2}")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(
            [(started(J), described(J)), (completed(J), described(J).preempted())],
            ("RUNNING", "RUNNABLE", (KEY,)),
            id="started-then-completed",
        ),
        pytest.param(
            [
                (state_change(J).summary().status("FAILED").retries(0), None),
                (completed(J).status("FAILED"), None),
                (started(J), described(J).preempted().status("FAILED")),
            ],
            ("RUNNING", "FAILED", (KEY, f"{KEY}:failed")),
            id="failed-in-any-order",
        ),
        pytest.param(
            [(completed(J), None), (state_change(J).summary().status("FAILED").retries(0), None)],
            (None, "FAILED", (KEY, f"{KEY}:failed")),
            id="failed-wins",
        ),
        pytest.param([(started(J), described(J))], ("RUNNING", None, (KEY,)), id="started-alone"),
    ],
)
def test_merge_joins_the_events_of_one_preemption(
    given: list[tuple[EventBuilder, JobBuilder | None]],
    expected: tuple[str | None, str | None, tuple[str, ...]],
) -> None:
    observations = [observed(event, job) for event, job in given]
    assert all(o is not None and o.dedup_key == KEY for o in observations)
    merged = merge([o for o in observations if o is not None])
    assert (merged.status_before, merged.status_after, merged.claim_keys) == expected
    assert (merged.occurred_at, merged.preempted_count, merged.reason) == (
        min(o.occurred_at for o in observations if o is not None),
        1,
        RECLAIM,
    )


SAMPLE_JOB = "51f245a9-2995-4a53-bced-7b3c00028f84"
SAMPLE_ATTEMPT = (
    "arn:aws:sagemaker:us-east-1:123456789012:training-job/"
    "AWSBatchqm-training-job9b2f08f911cf3dd794c1b3e72ae7ca5f"
)


def sample_job(preempted: bool) -> JobBuilder:
    """DescribeServiceJob of the documented job, before or after its preemption."""
    job = described(SAMPLE_JOB).usage(**g5(2)).latest(SAMPLE_ATTEMPT)
    if preempted:
        job.detail.update(sample("state-change-preempted-runnable.json").detail)
    return job


@pytest.mark.parametrize(
    ("name", "preempted", "expected"),
    [
        ("preemption-started.json", False, (f"{SAMPLE_JOB}:{SAMPLE_ATTEMPT}", None)),
        ("preemption-started.json", True, (f"{SAMPLE_JOB}:{SAMPLE_ATTEMPT}", None)),
        ("preemption-completed.json", True, (f"{SAMPLE_JOB}:{SAMPLE_ATTEMPT}", "RUNNABLE")),
        ("preemption-completed-failed.json", True, (f"{SAMPLE_JOB}:{SAMPLE_ATTEMPT}", "FAILED")),
        (
            "preemption-completed-seconds-unknown-fields.json",
            True,
            (f"{SAMPLE_JOB}:{SAMPLE_ATTEMPT}", "RUNNABLE"),
        ),
        (
            "state-change-preempted-runnable.json",
            True,
            (f"{SAMPLE_JOB}:{SAMPLE_ATTEMPT}", "RUNNABLE"),
        ),
        ("state-change-preempted-failed.json", True, (f"{SAMPLE_JOB}:{SAMPLE_ATTEMPT}", "FAILED")),
        ("state-change-cancelled-after-preemption.json", True, None),
        (
            "state-change-stuck.json",
            False,
            (f"{SAMPLE_JOB}:stuck:MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED", "RUNNABLE"),
        ),
        (
            "queue-blocked-stuck.json",
            False,
            (f"{SAMPLE_JOB}:stuck:MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED", "RUNNABLE"),
        ),
        ("queue-blocked-other-reason.json", False, None),
        ("state-change-runnable-not-preempted.json", False, None),
        ("state-change-succeeded.json", False, None),
    ],
)
def test_documented_samples(
    name: str, preempted: bool, expected: tuple[str, str | None] | None
) -> None:
    obs = observed(sample(name), sample_job(preempted))
    assert ((obs.dedup_key, obs.status_after) if obs else None) == expected


@pytest.mark.parametrize(
    ("built", "name"),
    [
        (started(SAMPLE_JOB), "preemption-started.json"),
        (completed(SAMPLE_JOB).attempt(SAMPLE_ATTEMPT), "preemption-completed.json"),
        (completed(SAMPLE_JOB).status("FAILED"), "preemption-completed-failed.json"),
        (state_change(SAMPLE_JOB).summary(), "state-change-preempted-runnable.json"),
    ],
)
def test_builders_follow_the_documented_shapes(built: EventBuilder, name: str) -> None:
    documented = sample(name)
    event = built.event()
    assert (event.detail_type, event.detail.keys() - {"preemptionConfiguration"}) == (
        documented.detail_type,
        documented.detail.keys(),
    )
    if name.startswith("preemption-started"):
        assert event.detail == documented.detail


def test_malformed_sample_names_no_job() -> None:
    with pytest.raises(ValidationError):
        sample("malformed-preemption-without-job.json").job_id()


# -- classify: the cause, and its precedence ---------------------------------------------------


def observation(
    job: str = J,
    *,
    share: str = "team-a",
    reason: str = RECLAIM,
    at: datetime = DONE,
    status_after: str | None = "RUNNABLE",
    stuck: bool = False,
    attempt: int = 1,
    usage: dict[str, float] | None = None,
    **times: datetime | None,
) -> Observation:
    """What observe makes of a preemption (or stuck job) of `job`: by default a Completed at
    `at` of attempt 1, which ran from T0-2min until STOPPED (what the builders' events say)."""
    facts: dict[str, datetime | None] = (
        {"created_at": T0 - timedelta(minutes=10)}
        if stuck
        else {
            "created_at": T0 - timedelta(minutes=10),
            "attempt_started_at": T0 - timedelta(minutes=2),
            "stopped_at": STOPPED,
            "ended_by": at,
        }
    )
    facts.update(times)
    return Observation(
        event_id=f"completed-{job}",
        detail_type="Batch Service Job Preemption Completed",
        occurred_at=at,
        job_id=job,
        job_arn=job_arn(job),
        job_name=f"train-{job}",
        queue=QUEUE,
        share=share,
        priority=1,
        status_before=None,
        status_after=status_after,
        usage=usage if usage is not None else {G5: 1.0},
        preempted_count=0 if stuck else 1,
        attempt=None if stuck else attempt_arn(job, attempt),
        reason=reason,
        stuck=stuck,
        **facts,  # type: ignore[arg-type]
    )


def context(
    doc: QuotaDocument | None = GUIDE,
    changes: Sequence[Any] = (),
    snap: Any = None,
    priorities: dict[str, int | None] | None = None,
    waiting: dict[str, JobBuilder | None] | None = None,
) -> Context:
    """`priorities`: the priority read of jobs at their share's front, by job ID (each needing
    one ml.g5.xlarge); `waiting`: what DescribeServiceJob said of them (None: nothing)."""
    read: dict[str, WaitingJob | None] = {
        job_arn(job): WaitingJob(p, {G5: 1.0}) for job, p in (priorities or {}).items()
    }
    for job, said in (waiting or {}).items():
        read[job_arn(job)] = WaitingJob.of(said.parsed()) if said is not None else None
    return Context(
        doc,
        [c.record() for c in changes],
        QueueSnapshot.parse(snap.build()) if snap is not None else None,
        read,
    )


CHANGED_AT = T0 - timedelta(minutes=10)  # when a change record is written, by default
LOWERED = change("team-a").lowered(G5, 3, 1).by("alice").at_risk(J)
TURNED_ON = change("team-a").in_share_on().by("alice").at_risk(J)
TURNED_ON_D = change("team-d").in_share_on().by("alice").at_risk(J)
IDLE = snapshot()
# team-a still runs another instance: with the victim's, 2 of its quota of 1 (borrowing).
A_BORROWING = snapshot().usage("team-a", **g5(1))
# the victim was team-a's only job: 1 of its quota of 1.
A_WITHIN = snapshot().usage("team-a", **g5(0))


def minutes_before(n: float) -> datetime:
    return DONE - timedelta(minutes=n)


@pytest.mark.parametrize(
    ("obs", "ctx", "expected"),
    [
        pytest.param(
            observation(reason=SHARE_LIMIT, stuck=True, status_after="RUNNABLE"),
            context(changes=[LOWERED]),
            ("JOB_STUCK", None, None),
            id="stuck-before-everything",
        ),
        pytest.param(
            observation(),
            context(changes=[LOWERED], snap=A_BORROWING),
            ("PREEMPTION", "QUOTA_REDUCTION", LOWERED.change_id),
            id="reduction-beats-reclaim-text-and-borrowing",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(changes=[LOWERED]),
            ("PREEMPTION", "QUOTA_REDUCTION", LOWERED.change_id),
            id="reduction-beats-in-share-text",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1).at_risk(J).at(minutes_before(29))]),
            ("PREEMPTION", "QUOTA_REDUCTION", f"{stamp(minutes_before(29))}-00"),
            id="change-29-minutes-before",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1).at_risk(J).at(minutes_before(30))]),
            ("PREEMPTION", "QUOTA_REDUCTION", f"{stamp(minutes_before(30))}-00"),
            id="change-30-minutes-before",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1).at_risk(J).at(minutes_before(31))]),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="change-31-minutes-before-is-too-old",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1).at_risk(J).at(DONE)]),
            ("PREEMPTION", "QUOTA_REDUCTION", f"{stamp(DONE)}-00"),
            id="change-at-the-event",
        ),
        pytest.param(
            observation(),
            context(
                changes=[
                    change("team-a")
                    .lowered(G5, 3, 1)
                    .at_risk(J)
                    .at(DONE + timedelta(milliseconds=554))
                ]
            ),
            ("PREEMPTION", "QUOTA_REDUCTION", f"{stamp(DONE + timedelta(milliseconds=554))}-00"),
            # EventBridge times are whole seconds: the change began in the event's second.
            id="change-stamped-within-the-events-second",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1).at_risk(J).at(minutes_before(-1))]),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="change-after-the-event-ignored",
        ),
        pytest.param(
            observation(),
            context(
                changes=[
                    change("team-a").lowered(G5, 3, 1).at_risk(J).at(DONE + timedelta(seconds=3))
                ]
            ),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="change-3-seconds-after-the-event-ignored",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-b").lowered(G5, 3, 1).at_risk(J)]),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="other-share-change-ignored",
        ),
        pytest.param(
            observation(),
            context(changes=[env_change().lowered(G5, 4, 3).at_risk(J).id("env-1")]),
            ("PREEMPTION", "QUOTA_REDUCTION", "env-1"),
            id="environment-change-team-a",
        ),
        pytest.param(
            observation(share="team-c", reason=""),
            context(changes=[env_change().lowered(G5, 4, 3).at_risk(J).id("env-1")]),
            ("PREEMPTION", "QUOTA_REDUCTION", "env-1"),
            id="environment-change-team-c",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").raised(G5, 1, 3).at_risk(J)]),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="change-without-reductions-ignored",
        ),
        pytest.param(
            observation(share="team-c"),
            context(changes=[change("team-c").lowered(G5, 2, 1).at_risk(J).at(minutes_before(45))]),
            ("PREEMPTION", "UNKNOWN", None),
            # team-c (LEND) never borrows: Batch's cross-share reason is a lowered limit whose
            # change is older than the window, not a reclaim of borrowed capacity.
            id="lender-cross-share-after-the-window-is-unknown",
        ),
        pytest.param(
            observation(),
            context(
                changes=[
                    change("team-a").lowered(G5, 3, 2).at_risk(J).id("newer"),
                    change("team-a")
                    .lowered(G5, 2, 1)
                    .at_risk(J)
                    .id("older")
                    .at(minutes_before(20)),
                ]
            ),
            ("PREEMPTION", "QUOTA_REDUCTION", "newer"),
            id="newest-matching-change",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1).at_risk("job-z")], snap=A_WITHIN),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="at-risk-names-others-share-within-limit",
        ),
        pytest.param(
            observation(),
            context(
                changes=[change("team-a").lowered(G5, 3, 1).at_risk("job-z")], snap=A_BORROWING
            ),
            ("PREEMPTION", "QUOTA_REDUCTION", LOWERED.change_id),
            id="at-risk-names-others-share-over-new-limit",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1)], snap=A_BORROWING),
            ("PREEMPTION", "QUOTA_REDUCTION", LOWERED.change_id),
            id="nobody-at-risk-share-over-new-limit",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1)], snap=A_WITHIN),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="nobody-at-risk-share-within-limit",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").disabled()], snap=A_WITHIN),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="disabling-the-share-preempts-nobody",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(snap=A_BORROWING),
            ("PREEMPTION", "IN_SHARE_PRIORITY", None),
            id="in-share-text-beats-borrowing",
        ),
        pytest.param(
            observation(reason=RECLAIM, share="team-d"),
            context(doc=RESERVE_IN_SHARE_ON, changes=[TURNED_ON_D]),
            ("PREEMPTION", "IN_SHARE_PRIORITY", TURNED_ON_D.change_id),
            # Batch may give every preemption the cross-share text; a RESERVE share borrows
            # nothing: the change that turned in-share on and named the job says what took it.
            id="in-share-turned-on-and-named-the-job",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(changes=[TURNED_ON], snap=A_BORROWING),
            ("PREEMPTION", "IN_SHARE_PRIORITY", TURNED_ON.change_id),
            id="in-share-text-and-the-change-that-turned-it-on",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(
                changes=[TURNED_ON],
                snap=snapshot().usage("team-a", **g5(1)).front("team-c", job_arn("job-c")),
            ),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            # Named when in-share preemption was turned on, but its share was borrowing, Batch
            # says it reclaimed and a lender waits: the lender took its capacity back.
            id="in-share-turned-on-but-a-lender-reclaimed-a-borrowing-job",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(changes=[TURNED_ON], snap=A_BORROWING),
            ("PREEMPTION", "UNKNOWN", TURNED_ON.change_id),
            # Borrowing and the reclaim text, but no lender seen waiting: in-share preemption
            # takes a borrowing share's borrowed job first too. Both fit; neither is said.
            id="in-share-turned-on-or-a-reclaim-cannot-be-told",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(changes=[change("team-a").in_share_on().by("alice")]),
            ("PREEMPTION", "IN_SHARE_PRIORITY", None),
            id="in-share-turned-on-without-naming-the-job-is-no-quota-reduction",
        ),
        pytest.param(
            observation(reason="preempted in share for a higher priority job"),
            context(),
            ("PREEMPTION", "IN_SHARE_PRIORITY", None),
            id="in-share-text-spaced",
        ),
        pytest.param(
            observation(reason="CROSS-SHARE PREEMPTION"),
            context(),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="cross-share-text-any-case",
        ),
        pytest.param(
            observation(reason=RECLAIM, share="team-c"),
            context(snap=IDLE),
            ("PREEMPTION", "UNKNOWN", None),
            id="cross-share-text-on-a-share-that-cannot-borrow-within-its-quota",
        ),
        pytest.param(
            observation(reason=RECLAIM, share="team-c"),
            context(snap=snapshot().usage("team-c", **g5(1))),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="cross-share-text-on-a-share-that-cannot-borrow-above-its-quota",
        ),
        pytest.param(
            observation(reason=RECLAIM, share="team-c"),
            context(),
            ("PREEMPTION", "UNKNOWN", None),
            id="cross-share-text-on-a-share-that-cannot-borrow-no-snapshot",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(doc=A_HELD_AS_LEND, snap=A_BORROWING),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            # team-a's change to LEND is held (reductionPolicy block): Batch still lets it borrow.
            id="cross-share-text-while-a-strategy-change-is-held",
        ),
        pytest.param(
            observation(reason=RECLAIM, share="team-d"),
            context(doc=RESERVE_IN_SHARE_ON, snap=IDLE),
            ("PREEMPTION", "IN_SHARE_PRIORITY", None),
            id="cross-share-text-on-a-reserve-share-with-in-share-on",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(snap=A_WITHIN),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="cross-share-text-beats-a-snapshot-read-after-it",
        ),
        pytest.param(
            observation(reason="capacity reclaimed by its owner"),
            context(),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="reclaim-text",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(doc=None),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="reclaim-text-without-a-document",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(snap=A_BORROWING),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="borrowing-per-snapshot",
        ),
        pytest.param(
            observation(reason="Preempted", share="team-c"),
            context(snap=snapshot().usage("team-c", **g5(1))),
            ("PREEMPTION", "UNKNOWN", None),
            id="a-lend-share-never-borrows",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(snap=A_WITHIN),
            ("PREEMPTION", "UNKNOWN", None),
            id="within-quota-in-share-off",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(),
            ("PREEMPTION", "UNKNOWN", None),
            id="no-snapshot",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=A_WITHIN),
            ("PREEMPTION", "IN_SHARE_PRIORITY", None),
            id="within-quota-in-share-on",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=A_BORROWING),
            ("PREEMPTION", "CAPACITY_RECLAIM", None),
            id="borrowing-beats-in-share-on",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=None, snap=A_BORROWING),
            ("PREEMPTION", "UNKNOWN", None),
            id="no-document",
        ),
    ],
)
def test_classify(
    obs: Observation, ctx: Context, expected: tuple[str, str | None, str | None]
) -> None:
    verdict = classify(obs, ctx)
    assert (verdict.kind, verdict.cause, verdict.change.id if verdict.change else None) == expected


@pytest.mark.parametrize(
    ("started", "expected"),
    [
        pytest.param(CHANGED_AT - timedelta(minutes=5), "QUOTA_REDUCTION", id="admitted-before"),
        pytest.param(CHANGED_AT + timedelta(minutes=5), "CAPACITY_RECLAIM", id="admitted-after"),
    ],
)
def test_a_lender_change_is_blamed_only_for_attempts_admitted_before_it(
    started: datetime, expected: str
) -> None:
    """team-c lent less of ml.g5.xlarge; team-a, borrowing, loses an attempt. An attempt that
    started after the change was admitted under the new lending: not the change's doing."""
    lent_less = change("team-c").lowered(G5, 2, 1).by("carol").lent_less(G5)
    obs = observation(attempt_started_at=started)
    verdict = classify(obs, context(changes=[lent_less], snap=A_BORROWING))
    assert verdict.cause == expected


ENV_ARN = f"arn:aws:batch:us-east-1:123456789012:service-environment/{QUEUE}-env"
ENV_CUT = env_change().lowered(G5, 4, 3).at_risk(J).of_environment(ENV_ARN).id("env-cut")


def raise_of(builder: Any, minutes: float = 5) -> Any:
    """`builder` applied `minutes` before the preemption (after the cuts, 10 minutes before)."""
    return builder.at(minutes_before(minutes))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            [raise_of(change("team-a").raised(G5, 1, 3)), LOWERED],
            ("CAPACITY_RECLAIM", None),
            id="full-raise-ends-it",
        ),
        pytest.param(
            [raise_of(change("team-a").raised(G5, 1, 4)), LOWERED],
            ("CAPACITY_RECLAIM", None),
            id="raise-above-the-old-level-ends-it",
        ),
        pytest.param(
            [raise_of(change("team-a").raised(G5, 1, 2)), LOWERED],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            id="partial-raise-still-below-keeps-it",
        ),
        pytest.param(
            [
                raise_of(change("team-a").raised(G5, 2, 3), 3),
                raise_of(change("team-a").raised(G5, 1, 2), 6),
                LOWERED,
            ],
            ("CAPACITY_RECLAIM", None),
            id="two-partial-raises-reaching-the-old-level-end-it",
        ),
        pytest.param(
            [raise_of(change("team-b").raised(G5, 1, 3)), LOWERED],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            id="raise-of-another-share-keeps-it",
        ),
        pytest.param(
            [raise_of(change("team-a").raised(G5_2X, 1, 3)), LOWERED],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            id="raise-of-another-instance-type-keeps-it",
        ),
        pytest.param(
            [raise_of(env_change().raised(G5, 1, 3)), LOWERED],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            id="environment-raise-keeps-a-share-cut",
        ),
        pytest.param(
            [LOWERED, change("team-a").raised(G5, 1, 3).at(minutes_before(15))],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            id="raise-before-the-cut-keeps-it",
        ),
        pytest.param(
            [change("team-a").raised(G5, 1, 3).at(DONE), LOWERED],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            # After the attempt stopped (STOPPED), though in the Completed event's second.
            id="raise-after-the-attempt-stopped-keeps-it",
        ),
        pytest.param(
            [change("team-a").raised(G5, 1, 3).at(DONE + timedelta(seconds=1)), LOWERED],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            id="raise-after-the-event-keeps-it",
        ),
        pytest.param(
            [
                raise_of(change("team-a").raised(G5, 1, 3)),
                change("team-a").lowered(G5, 3, 1).at_risk(J).without_details(),
            ],
            ("QUOTA_REDUCTION", LOWERED.change_id),
            # Written before reductionDetails were kept: what it lowered is not known.
            id="cut-recorded-without-details-keeps-it",
        ),
        pytest.param(
            [
                raise_of(change("team-a").raised(G5, 1, 3)),
                change("team-a").lowered(G5, 3, 1).disabled().at_risk(J).id("cut-and-disable"),
            ],
            ("QUOTA_REDUCTION", "cut-and-disable"),
            id="cut-that-did-more-than-lower-keeps-it",
        ),
        pytest.param(
            [raise_of(env_change().raised(G5, 3, 4).of_environment(ENV_ARN)), ENV_CUT],
            ("CAPACITY_RECLAIM", None),
            id="environment-raise-ends-an-environment-cut",
        ),
        pytest.param(
            [raise_of(env_change().raised(G5, 3, 4).of_environment(f"{ENV_ARN}-2")), ENV_CUT],
            ("QUOTA_REDUCTION", "env-cut"),
            id="raise-of-another-environment-keeps-it",
        ),
        pytest.param(
            [raise_of(change("team-a").raised(G5, 1, 4)), ENV_CUT],
            ("QUOTA_REDUCTION", "env-cut"),
            id="share-raise-keeps-an-environment-cut",
        ),
    ],
)
def test_a_raise_back_to_the_old_level_ends_a_cuts_attribution(
    changes: list[Any], expected: tuple[str, str | None]
) -> None:
    """team-a's limit (or the environment's) was lowered 10 minutes before the preemption,
    naming the job; Batch's reason is the reclaim text and team-a is not seen borrowing."""
    verdict = classify(observation(), context(changes=changes))
    assert (verdict.cause, verdict.change.id if verdict.change else None) == expected


def raise_at(when: datetime) -> Any:
    """team-a's limit raised back 1 -> 3 (LOWERED's 3 -> 1 undone) at `when`."""
    return change("team-a").raised(G5, 1, 3).id("raise").at(when)


# Only a Completed and a State Change: the preemption began while the attempt ran (from
# T0-2min until STOPPED); with its Started event, at T0 (to the second).
COMPLETED_ONLY = observation()
WITH_STARTED = observation(at=T0, began_by=T0)


@pytest.mark.parametrize(
    ("obs", "raised", "expected"),
    [
        pytest.param(WITH_STARTED, T0 - timedelta(seconds=3), "CAPACITY_RECLAIM", id="3s-before"),
        pytest.param(WITH_STARTED, T0 - timedelta(seconds=1.5), "UNKNOWN", id="1.5s-before"),
        pytest.param(WITH_STARTED, T0 - timedelta(seconds=0.5), "UNKNOWN", id="0.5s-before"),
        pytest.param(WITH_STARTED, T0, "UNKNOWN", id="in-the-started-second"),
        pytest.param(WITH_STARTED, T0 + timedelta(milliseconds=300), "UNKNOWN", id="300ms-into-it"),
        pytest.param(
            WITH_STARTED, T0 + timedelta(seconds=5), "QUOTA_REDUCTION", id="5s-after-started"
        ),
        # Started came in an earlier batch (or its record failed): the stop says when it was
        # over, not when it began.
        pytest.param(
            COMPLETED_ONLY,
            T0 + timedelta(seconds=5),
            "UNKNOWN",
            id="completed-only-while-the-attempt-ran",
        ),
        pytest.param(
            COMPLETED_ONLY,
            STOPPED + timedelta(seconds=1),
            "UNKNOWN",
            id="completed-only-1s-after-the-stop",
        ),
        pytest.param(
            COMPLETED_ONLY,
            STOPPED + timedelta(seconds=3),
            "QUOTA_REDUCTION",
            id="completed-only-3s-after-the-stop",
        ),
        pytest.param(
            COMPLETED_ONLY,
            T0 - timedelta(minutes=2, seconds=3),
            "CAPACITY_RECLAIM",
            id="completed-only-before-the-attempt-started",
        ),
        pytest.param(
            observation(at=T0, began_by=T0, reason=IN_SHARE),
            T0,
            "IN_SHARE_PRIORITY",
            # Batch's in-share text says the raise's waiting job took it.
            id="in-share-text-in-the-started-second",
        ),
    ],
)
def test_a_raise_whose_order_with_the_preemption_cannot_be_told_does_not_end_the_cut(
    obs: Observation, raised: datetime, expected: str
) -> None:
    """LOWERED (team-a 3 -> 1, naming the job, 10 minutes before) is given back by a raise
    about when the preemption began. A change record is stamped when its reconcile run starts,
    before its request goes out, and the clocks may differ by EVENT_TIME_SLACK (2 s): within
    it of when the preemption may have begun, the raise may have come first or not: UNKNOWN,
    naming the lowering and, in its detail, the raise."""
    verdict = classify(obs, context(changes=[raise_at(raised), LOWERED]))
    assert verdict.cause == expected
    if expected == "UNKNOWN":
        assert verdict.change is not None
        assert verdict.change.id == LOWERED.change_id
        assert "change raise" in verdict.missing


def test_an_older_cut_still_in_force_decides_when_a_newer_one_raced_a_raise() -> None:
    """team-a 5 -> 3 (20 minutes before) and 3 -> 1 (10 minutes before) both named the job; a
    raise 1 -> 3 lands in the preemption's second. Whether the raise came first or not, the
    job's share was cut by a change that named it and is still in force (5 -> 3): a quota
    reduction, the older cut's."""
    older = change("team-a").lowered(G5, 5, 3).at_risk(J).at(minutes_before(20)).id("older")
    newer = change("team-a").lowered(G5, 3, 1).at_risk(J).at(minutes_before(10)).id("newer")
    obs = observation(at=T0, began_by=T0)

    verdict = classify(obs, context(changes=[raise_at(T0), newer, older]))

    assert verdict.cause == "QUOTA_REDUCTION"
    assert verdict.change is not None
    assert verdict.change.id == "older"


# team-a (in-share on) within its quota after the preemption, its own job-h waiting in front.
A_WAITS = snapshot().usage("team-a", **g5(0)).front("team-a", job_arn("job-h"))


def waiter() -> JobBuilder:
    """job-h as DescribeServiceJob describes it: priority 5, waiting for one ml.g5.xlarge."""
    return described("job-h").status("RUNNABLE").priority(5)


def a_waits() -> Any:
    """A_WAITS, to add to."""
    return snapshot().usage("team-a", **g5(0)).front("team-a", job_arn("job-h"))


@pytest.mark.parametrize(
    ("ctx", "expected"),
    [
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, priorities={"job-h": 5}),
            "IN_SHARE_PRIORITY",
            id="a-higher-priority-job-of-its-own-waited",
        ),
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, priorities={"job-h": 1}),
            "CAPACITY_RECLAIM",
            id="its-waiting-job-has-the-same-priority",
        ),
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, priorities={"job-h": None}),
            "CAPACITY_RECLAIM",
            id="its-waiting-jobs-priority-is-not-known",
        ),
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS),
            "CAPACITY_RECLAIM",
            id="its-waiting-job-was-not-read",
        ),
        pytest.param(
            context(
                doc=IN_SHARE_ON,
                snap=snapshot()
                .usage("team-a", **g5(0))
                .front("team-a", job_arn("job-h"), since=DONE),
                priorities={"job-h": 5},
            ),
            "CAPACITY_RECLAIM",
            id="its-job-came-to-the-front-after-the-preemption",
        ),
        pytest.param(
            context(
                doc=IN_SHARE_ON,
                snap=snapshot().usage("team-a", **g5(1)).front("team-a", job_arn("job-h")),
                priorities={"job-h": 5},
            ),
            "CAPACITY_RECLAIM",
            id="the-share-was-borrowing",
        ),
        pytest.param(
            context(
                doc=IN_SHARE_ON,
                snap=snapshot()
                .usage("team-a", **g5(0))
                .front("team-a", job_arn("job-h"))
                .front("team-c", job_arn("job-c")),
                priorities={"job-h": 5},
            ),
            "CAPACITY_RECLAIM",
            id="a-lender-waited-too",
        ),
        pytest.param(
            context(snap=A_WAITS, priorities={"job-h": 5}),
            "CAPACITY_RECLAIM",
            id="in-share-preemption-off",
        ),
        # What the waiting job needs: it must be able to take the victim's slot (team-a may
        # run 2 x ml.g5.xlarge at most: its 1 and 1 borrowed).
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, waiting={"job-h": waiter().usage(**g5(2))}),
            "IN_SHARE_PRIORITY",
            id="its-waiting-job-fits-by-borrowing",
        ),
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, waiting={"job-h": waiter().usage(**g5(5))}),
            "CAPACITY_RECLAIM",
            id="its-waiting-job-is-bigger-than-the-share-may-run",
        ),
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, waiting={"job-h": waiter().reason(SHARE_LIMIT)}),
            "CAPACITY_RECLAIM",
            id="its-waiting-job-is-stuck",
        ),
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, waiting={"job-h": waiter().usage(**{G5_2X: 1})}),
            "CAPACITY_RECLAIM",
            id="its-waiting-job-needs-another-instance-type",
        ),
        pytest.param(
            context(doc=IN_SHARE_ON, snap=A_WAITS, waiting={"job-h": None}),
            "CAPACITY_RECLAIM",
            id="its-waiting-job-could-not-be-read",
        ),
    ],
)
def test_the_reclaim_text_on_a_share_within_its_quota_outranked_by_its_own_job(
    ctx: Context, expected: str
) -> None:
    """Batch may give every preemption the cross-share text. A share that may borrow, within
    its quota, with in-share preemption on, no lender waiting, and a higher-priority job of its
    own waiting at its front when the preemption was triggered, which could take the victim's
    slot: its in-share rule took the job."""
    verdict = classify(observation(reason=RECLAIM), ctx)
    assert verdict.cause == expected


# team-d: a RESERVE share (it never borrows) with in-share preemption on.
RESERVE_IN_SHARE = document(
    guide_layout().env(**g5(4)).add(ShareBuilder("team-d", g5(1)).in_share_preemption())
)


@pytest.mark.parametrize(
    ("obs", "ctx", "wanted"),
    [
        pytest.param(
            observation(reason=RECLAIM),
            context(doc=IN_SHARE_ON, snap=A_WAITS),
            (job_arn("job-h"),),
            id="the-rule-may-apply",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(doc=IN_SHARE_ON, snap=A_WAITS, priorities={"job-h": 1}),
            (),
            id="already-read",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(doc=IN_SHARE_ON, snap=A_WAITS),
            (),
            id="in-share-text",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(doc=IN_SHARE_ON, snap=A_WAITS, changes=[LOWERED]),
            (),
            id="a-cut-named-it",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(
                doc=IN_SHARE_ON,
                snap=snapshot().usage("team-a", **g5(1)).front("team-a", job_arn("job-h")),
            ),
            (),
            id="borrowing",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(doc=IN_SHARE_ON, snap=a_waits().front("team-c", job_arn("job-c"))),
            (),
            id="a-lender-waited",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(snap=A_WAITS),
            (),
            id="in-share-off",
        ),
        pytest.param(
            observation(reason=RECLAIM, share="team-d"),
            context(
                doc=RESERVE_IN_SHARE,
                snap=snapshot().usage("team-d", **g5(1)).front("team-d", job_arn("job-h")),
            ),
            (),
            id="reserve-share",
        ),
        pytest.param(
            observation(reason=RECLAIM),
            context(
                doc=IN_SHARE_ON,
                snap=snapshot()
                .usage("team-a", **g5(0))
                .front("team-a", job_arn("job-h"), since=DONE),
            ),
            (),
            id="came-to-the-front-after",
        ),
    ],
)
def test_a_waiting_job_is_asked_for_only_when_the_in_share_rule_may_apply(
    obs: Observation, ctx: Context, wanted: tuple[str, ...]
) -> None:
    """`Verdict.unread` names the jobs at the victim's share's front whose details would
    decide, and none when the rule's other conditions do not hold: each read costs a
    DescribeServiceJob call in the alert function."""
    assert classify(obs, ctx).unread == wanted


def test_quota_reduction_carries_the_change() -> None:
    verdict = classify(observation(), context(changes=[LOWERED]))
    assert verdict.change is not None
    assert verdict.change.model_dump() == {
        "id": LOWERED.change_id,
        "at": stamp(CHANGED_AT),
        "by": "alice",
        "before": {"capacityLimits": [{"capacityUnit": G5, "maxCapacity": 3}]},
        "after": {"capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}]},
        "quotaShareName": None,  # the job's own share: set only for another share's change
        "windowsEnded": [],
    }


@pytest.mark.parametrize(
    "reason", ["Preempted for reasons unknown", "", "PREEMPTION: something new"]
)
def test_unknown_keeps_the_raw_reason(reason: str) -> None:
    verdict = classify(observation(reason=reason), context(snap=A_WITHIN))
    assert (verdict.cause, verdict.evidence) == ("UNKNOWN", reason)


@pytest.mark.parametrize(
    ("snap", "expected"),
    [
        pytest.param(snapshot().front("team-c", job_arn("job-c")), "team-c", id="idle-lender"),
        pytest.param(
            snapshot().front("team-b", job_arn("job-b")), "team-b", id="idle-lend-and-borrow"
        ),
        pytest.param(
            snapshot().usage("team-c", **g5(1)).front("team-c", job_arn("job-c")),
            None,
            id="lender-at-its-quota",
        ),
        pytest.param(
            snapshot().front("team-d", job_arn("job-d")), None, id="reserve-share-lends-nothing"
        ),
        pytest.param(snapshot().front("team-a", job_arn("job-a2")), None, id="own-share"),
        pytest.param(snapshot().front("team-x", job_arn("job-x")), None, id="unknown-share"),
        pytest.param(
            snapshot()
            .front("team-b", job_arn("job-b"), T0 - timedelta(minutes=1))
            .front("team-c", job_arn("job-c"), T0 - timedelta(minutes=5)),
            "team-c",
            id="longest-waiting-lender",
        ),
        pytest.param(snapshot().usage("team-a", **g5(1)), None, id="nobody-waiting"),
        pytest.param(None, None, id="no-snapshot"),
    ],
)
def test_reclaiming_share(snap: Any, expected: str | None) -> None:
    verdict = classify(observation(), context(doc=WITH_RESERVE, snap=snap))
    assert (verdict.cause, verdict.reclaimed_by) == ("CAPACITY_RECLAIM", expected)


def test_reclaimer_must_hold_the_victims_instance_type() -> None:
    obs = observation(usage={G5_2X: 1.0})
    verdict = classify(obs, context(snap=snapshot().front("team-c", job_arn("job-c"))))
    assert verdict.reclaimed_by is None


# -- group and build_alert ---------------------------------------------------------------------


def alerts(observations: Sequence[Observation], ctx: Context) -> list[Alert]:
    return [build_alert(g, ctx) for g in group([(o, classify(o, ctx)) for o in observations])]


RECLAIMED_BY_C = context(snap=snapshot().usage("team-a", **g5(1)).front("team-c", job_arn("c1")))


def test_many_jobs_of_one_share_make_one_alert() -> None:
    team_a = [observation(f"job-{n}") for n in range(1, 7)]
    out = alerts([*team_a, observation("job-b1", share="team-b")], RECLAIMED_BY_C)
    assert [(a.quotaShareName, a.cause, a.severity, len(a.jobs)) for a in out] == [
        ("team-a", "CAPACITY_RECLAIM", "warning", 6),
        ("team-b", "CAPACITY_RECLAIM", "warning", 1),
    ]
    assert out[0].summary == "6 jobs of team-a preempted: borrowed capacity reclaimed by team-c"
    assert "train-job-1, train-job-2, train-job-3, train-job-4, train-job-5 and 1 more" in (
        out[0].detail
    )
    assert out[1].summary == "1 job of team-b preempted: borrowed capacity reclaimed by team-c"


@pytest.mark.parametrize(
    ("observations", "ctx", "expected"),
    [
        pytest.param(
            [observation(), observation(reason=IN_SHARE)],
            context(),
            [("team-a", "CAPACITY_RECLAIM"), ("team-a", "IN_SHARE_PRIORITY")],
            id="one-share-two-causes",
        ),
        pytest.param(
            [observation(), observation("job-b", reason="Preempted")],
            context(changes=[change("team-a").lowered(G5, 3, 1).at_risk(J, "job-b")]),
            [("team-a", "QUOTA_REDUCTION")],
            id="one-reduction",
        ),
        pytest.param(
            [observation(reason=SHARE_LIMIT, stuck=True), observation("job-b")],
            context(),
            [("team-a", "JOB_STUCK"), ("team-a", "CAPACITY_RECLAIM")],
            id="stuck-apart-from-preempted",
        ),
    ],
)
def test_grouping(
    observations: list[Observation], ctx: Context, expected: list[tuple[str, str]]
) -> None:
    out = alerts(observations, ctx)
    assert [(a.quotaShareName, a.cause or a.kind) for a in out] == expected


def test_events_of_one_preemption_count_once() -> None:
    seen_started = observation(status_after=None)
    seen_completed = observation()
    out = alerts([seen_started, seen_completed], context())
    assert [len(a.jobs) for a in out] == [1]


@pytest.mark.parametrize(
    ("status_after", "expected_severity", "resubmit_first"),
    [("FAILED", "critical", True), ("RUNNABLE", "warning", False), (None, "warning", False)],
)
def test_failed_jobs_make_the_alert_critical(
    status_after: str | None, expected_severity: str, resubmit_first: bool
) -> None:
    (alert,) = alerts([observation(status_after=status_after)], context())
    assert alert.severity == expected_severity
    assert ("resubmit" in alert.nextSteps[0]) is resubmit_first


@pytest.mark.parametrize(
    ("obs", "ctx", "expected_summary", "expected_in_detail"),
    [
        pytest.param(
            observation(),
            context(changes=[LOWERED]),
            "1 job of team-a preempted: quota lowered by alice",
            [stamp(CHANGED_AT), LOWERED.change_id, "alice", "train-job-a"],
            id="quota-reduction-names-who-when-which",
        ),
        pytest.param(
            observation(),
            context(
                changes=[
                    change("team-a")
                    .lowered(G5, 3, 1)
                    .by("arn:aws:sts::123456789012:assumed-role/Platform/bob")
                    .at_risk(J)
                ]
            ),
            "1 job of team-a preempted: quota lowered by bob",
            ["by bob (change"],
            id="quota-reduction-names-the-person-not-the-arn",
        ),
        pytest.param(
            observation(),
            RECLAIMED_BY_C,
            "1 job of team-a preempted: borrowed capacity reclaimed by team-c",
            ["borrowed", "train-job-a"],
            id="reclaim",
        ),
        pytest.param(
            observation(),
            context(),
            "1 job of team-a preempted: borrowed capacity reclaimed",
            ["borrowed"],
            id="reclaim-owner-unknown",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(),
            "1 job of team-a preempted by a higher-priority job of the same share",
            ["in-share preemption on"],
            id="in-share",
        ),
        pytest.param(
            observation(reason="Preempted: reason 42"),
            context(),
            "1 job of team-a preempted (cause unknown)",
            ["Batch's reason: Preempted: reason 42"],
            id="unknown-keeps-raw-reason",
        ),
        pytest.param(
            observation(share="team-c", reason=SHARE_LIMIT, stuck=True, usage={G5: 4.0}),
            context(),
            "1 job(s) of team-c can never run: needs more than the quota share can ever get "
            "(its limit plus what it may borrow)",
            [
                "The job needs 4 x ml.g5.xlarge",
                "ml.g5.xlarge: quota 1, may borrow 0, largest job 1",
                SHARE_LIMIT,
            ],
            id="stuck-lender-explains-largest-job",
        ),
        pytest.param(
            observation(reason=SHARE_LIMIT, stuck=True, usage={G5: 3.0}),
            context(),
            "1 job(s) of team-a can never run: needs more than the quota share can ever get "
            "(its limit plus what it may borrow)",
            ["ml.g5.xlarge: quota 1, may borrow 1, largest job 2"],
            id="stuck-borrower-explains-largest-job",
        ),
        pytest.param(
            observation(reason=ENV_LIMIT, stuck=True, usage={G5: 5.0}),
            context(),
            "1 job(s) of team-a can never run: needs more instances than the service "
            "environment has: 5 x ml.g5.xlarge (the environment has 3)",
            ["The job needs 5 x ml.g5.xlarge", ENV_LIMIT],
            id="stuck-environment",
        ),
        pytest.param(
            observation(reason=ENV_LIMIT, stuck=True, usage={"ml.p4d.24xlarge": 1.0}),
            context(),
            "1 job(s) of team-a can never run: needs ml.p4d.24xlarge, which the service "
            "environment has no capacity limit for",
            ["The job needs 1 x ml.p4d.24xlarge", ENV_LIMIT],
            id="stuck-environment-lacks-the-instance-type",
        ),
    ],
)
def test_alert_text(
    obs: Observation, ctx: Context, expected_summary: str, expected_in_detail: list[str]
) -> None:
    (alert,) = alerts([obs], ctx)
    assert alert.summary == expected_summary
    assert [s for s in expected_in_detail if s not in alert.detail] == []


@pytest.mark.parametrize(
    ("obs", "ctx", "expected_step"),
    [
        pytest.param(observation(), context(changes=[LOWERED]), "quotactl history", id="reduction"),
        pytest.param(observation(), context(), "raise team-a's own quota", id="reclaim"),
        pytest.param(
            observation(reason=IN_SHARE), context(), "inSharePreemption: DISABLED", id="in-share"
        ),
        pytest.param(observation(reason="?"), context(), "quotactl history", id="unknown"),
        pytest.param(
            observation(reason=SHARE_LIMIT, stuck=True), context(), "borrowLimit", id="stuck-share"
        ),
        pytest.param(
            observation(reason=ENV_LIMIT, stuck=True),
            context(),
            "serviceEnvironment.capacityLimits",
            id="stuck-environment",
        ),
        pytest.param(
            observation(reason=ENV_LIMIT, stuck=True),
            context(),
            "jobStateTimeLimitActions",
            id="stuck-time-limit",
        ),
    ],
)
def test_next_steps(obs: Observation, ctx: Context, expected_step: str) -> None:
    (alert,) = alerts([obs], ctx)
    assert any(expected_step in step for step in alert.nextSteps), alert.nextSteps


def test_quota_reduction_alert_carries_the_change() -> None:
    (alert,) = alerts([observation()], context(changes=[LOWERED]))
    assert alert.change is not None
    assert (alert.change.id, alert.change.by, alert.change.at) == (
        LOWERED.change_id,
        "alice",
        stamp(CHANGED_AT),
    )


def test_alert_lists_each_job() -> None:
    (alert,) = alerts([observation(status_after="FAILED")], context())
    assert [j.model_dump(exclude_none=True) for j in alert.jobs] == [
        {
            "jobId": J,
            "jobName": f"train-{J}",
            "jobArn": job_arn(J),
            "statusAfter": "FAILED",
            "capacityUsage": [{"capacityUnit": G5, "quantity": 1.0}],
            "preemptedAttemptCount": 1,
            "trainingJobArn": A1,
            "schedulingPriority": 1,
        }
    ]
    assert (alert.jobQueue, alert.occurredAt) == (QUEUE, stamp(DONE))


def test_occurred_at_is_the_earliest_event() -> None:
    (alert,) = alerts([observation("job-1", at=DONE), observation("job-2", at=T0)], context())
    assert alert.occurredAt == "2026-03-16T19:57:27.000Z"  # the precision of every stamp


def dedup_key(observations: Sequence[Observation], ctx: Context | None = None) -> str:
    (alert,) = alerts(observations, ctx or context())
    return alert.dedupKey


def test_dedup_key_is_stable_and_order_independent() -> None:
    one, two = observation("job-1"), observation("job-2")
    key = dedup_key([one, two])
    assert key.startswith(f"{QUEUE}:team-a:CAPACITY_RECLAIM:")
    assert dedup_key([two, one]) == key
    assert dedup_key([observation("job-2"), observation("job-1")]) == key
    # Started (no outcome yet) and Completed of the same preemptions are the same alert.
    assert dedup_key([observation("job-1", status_after=None), two]) == key


@pytest.mark.parametrize(
    "other",
    [
        pytest.param([observation("job-1")], id="fewer-jobs"),
        pytest.param([observation("job-1"), observation("job-2"), observation("job-3")], id="more"),
        pytest.param([observation("job-1"), observation("job-2", attempt=2)], id="next-preemption"),
    ],
)
def test_dedup_key_differs_for_other_preemptions(other: list[Observation]) -> None:
    assert dedup_key(other) != dedup_key([observation("job-1"), observation("job-2")])


def test_verdict_is_data() -> None:
    verdict = classify(observation(), RECLAIMED_BY_C)
    assert verdict == Verdict(
        "PREEMPTION", "CAPACITY_RECLAIM", reclaimed_by="team-c", evidence=RECLAIM
    )


# -- preempted attempts by time, never by list position -----------------------------------------

ORDERS = [pytest.param(False, id="oldest-first"), pytest.param(True, id="newest-first")]
SECOND = T0 + timedelta(hours=1)  # Started of a second preemption, an hour after the first


@pytest.mark.parametrize("newest_first", ORDERS)
@pytest.mark.parametrize(
    ("event", "job", "expected"),
    [
        pytest.param(
            completed(J).history(2),
            described(J).history(2),
            (A2, 2),
            id="completed",
        ),
        pytest.param(
            completed(J).history(2).status("FAILED"),
            None,
            (A2, 2),
            id="completed-failed-job-gone",
        ),
        pytest.param(
            state_change(J).history(2),
            described(J).history(2),
            (A2, 2),
            id="state-change",
        ),
        pytest.param(
            state_change(J).history(2).status("FAILED").retries(1),
            None,
            (A2, 2),
            id="state-change-failed",
        ),
        pytest.param(
            started(J),
            described(J).history(2),
            (A2, 2),
            id="started-describe-after-the-second",
        ),
        pytest.param(
            started(J).at(T0 - timedelta(hours=1)),
            described(J).history(2),
            (A1, 1),
            id="late-started-of-the-first",
        ),
        pytest.param(
            started(J),
            described(J).summary(1, A1, stopped=T0 - timedelta(hours=1)).latest(A2),
            (A2, 2),
            id="started-describe-before-the-second",
        ),
    ],
)
def test_the_preempted_attempt_is_chosen_by_time(
    event: EventBuilder,
    job: JobBuilder | None,
    expected: tuple[str, int],
    newest_first: bool,
) -> None:
    for built in (event, job):
        summary = built.detail.get("preemptionSummary") if built is not None else None
        if summary and newest_first:
            summary["recentPreemptedAttempts"].reverse()
    obs = observed(event, job)
    assert obs is not None
    assert (obs.attempt, obs.preempted_count, obs.dedup_key) == (*expected, f"{J}:{expected[0]}")


def test_the_preempted_attempts_stop_time_is_observed_from_either_order() -> None:
    for newest_first in (False, True):
        obs = observed(completed(J).history(3, newest_first=newest_first), None)
        assert obs is not None
        assert (obs.attempt, obs.stopped_at) == (attempt_arn(J, 3), STOPPED)


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [
        pytest.param(
            [{"startedAt": 5, "stoppedAt": 9, "n": 1}, {"startedAt": 5, "stoppedAt": 9, "n": 2}],
            2,
            id="same-times-the-larger-arn",
        ),
        pytest.param(
            [{"startedAt": 5, "stoppedAt": 9, "n": 1}, {"startedAt": 7, "stoppedAt": 9, "n": 2}],
            2,
            id="same-stop-the-later-start",
        ),
        pytest.param(
            [
                {"startedAt": 5, "stoppedAt": 9, "n": 1},
                {"startedAt": 10, "stoppedAt": None, "n": 2},
            ],
            2,
            id="no-stop-ranks-by-its-start",
        ),
        pytest.param(
            [
                {"startedAt": None, "stoppedAt": None, "n": 2},
                {"startedAt": 5, "stoppedAt": 9, "n": 1},
            ],
            1,
            id="no-times-ranks-oldest",
        ),
    ],
)
def test_ties_and_missing_times_are_decided_the_same_in_any_order(
    attempts: list[dict[str, Any]], expected: int
) -> None:
    entries = [
        {
            "serviceResourceId": {"name": "TrainingJobArn", "value": attempt_arn(J, a["n"])},
            "startedAt": a["startedAt"] and a["startedAt"] * 1_000_000_000_000 // 10,
            "stoppedAt": a["stoppedAt"] and a["stoppedAt"] * 1_000_000_000_000 // 10,
            "statusReason": RECLAIM,
        }
        for a in attempts
    ]
    for listed in (entries, entries[::-1]):
        summary = {"preemptedAttemptCount": 2, "recentPreemptedAttempts": listed}
        obs = observed(completed(J).set(preemptionSummary=summary), None)
        assert obs is not None
        assert obs.attempt == attempt_arn(J, expected)


def test_merge_does_not_depend_on_arrival_order() -> None:
    given = [
        observed(started(J), described(J)),
        observed(completed(J).status("FAILED"), None),
        observed(state_change(J).summary().status("FAILED").reason(None), None),
    ]
    observations = [o for o in given if o is not None]
    assert merge(observations) == merge(observations[::-1])
    assert merge(observations).event_id == f"started-{J}"


# -- stuck jobs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "code"),
    [
        pytest.param(
            queue_blocked(J, CAPACITY), "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", id="qb-capacity"
        ),
        pytest.param(
            state_change(J).reason(CAPACITY),
            "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
            id="sc-capacity",
        ),
        pytest.param(
            queue_blocked(J, SHARE_LIMIT),
            "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
            id="qb-share",
        ),
        pytest.param(
            queue_blocked(J, ENV_LIMIT),
            "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
            id="qb-env",
        ),
        pytest.param(
            queue_blocked(J, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY\u2022Unable to provision"),
            "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
            id="bullet-separator",
        ),
    ],
)
def test_stuck_reasons_key_by_job_and_reason_code(event: EventBuilder, code: str) -> None:
    obs = observed(event, described(J).status("RUNNABLE").latest(None))
    assert obs is not None
    assert (obs.stuck, obs.dedup_key) == (True, f"{J}:stuck:{code}")


def test_waiting_for_capacity_is_its_own_stuck_alert() -> None:
    obs = observed(queue_blocked(J, CAPACITY).usage(**g5(2)), None)
    assert obs is not None
    verdict = classify(obs, context())
    assert (verdict.kind, verdict.cause) == ("JOB_STUCK", "INSUFFICIENT_CAPACITY")
    (alert,) = alerts([obs], context())
    assert (alert.kind, alert.cause, alert.severity) == (
        "JOB_STUCK",
        "INSUFFICIENT_CAPACITY",
        "warning",
    )
    assert alert.summary == "1 job(s) of team-a wait for SageMaker capacity (2 x ml.g5.xlarge)"
    assert "The quota layout is not the problem" in alert.detail
    # createdAt is 10 minutes before T0; the Queue Blocked event came at DONE = T0+20s.
    assert f"train-{J} has waited 10 min 20 s since it was submitted" in alert.detail
    assert alert.nextSteps[0] == (
        "To bound the wait, add a jobStateTimeLimitActions rule to the queue: state RUNNABLE, "
        "action TERMINATE, reason CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY, maxTimeSeconds 600 "
        "to 86400"
    )
    assert alert.dedupKey.startswith(f"{QUEUE}:team-a:INSUFFICIENT_CAPACITY:")


def test_a_capacity_wait_after_an_attempt_says_since_when_it_is_runnable_again() -> None:
    job = (
        described(J)
        .status("RUNNABLE")
        .set(
            attempts=[
                preempted_attempt(
                    A1, "CapacityError", started=T0 - timedelta(minutes=5), stopped=T0
                )
            ]
        )
    )
    obs = observed(queue_blocked(J, CAPACITY), job)
    assert obs is not None
    (alert,) = alerts([obs], context())
    assert (
        f"train-{J} has waited 10 min 20 s since it was submitted "
        f"({stamp(T0 - timedelta(minutes=10))}) and 20 s since its last attempt stopped "
        f"({stamp(T0)})"
    ) in alert.detail


def timed_out(reason: str, seconds: int) -> QuotaDocument:
    return document(
        guide_layout().queue(
            jobStateTimeLimitActions=[
                {
                    "reason": reason,
                    "state": "RUNNABLE",
                    "maxTimeSeconds": seconds,
                    "action": "TERMINATE",
                }
            ]
        )
    )


@pytest.mark.parametrize(
    ("reason", "rule", "expected", "never"),
    [
        pytest.param(
            CAPACITY,
            "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
            f"terminates such a job after about 1 h 00 min at the head of the queue: train-{J} at "
            f"about {stamp(DONE + timedelta(hours=1))} (sooner if its attempts already spent time "
            "in SCHEDULED, which counts too)",
            "To bound the wait",
            id="capacity",
        ),
        pytest.param(
            SHARE_LIMIT,
            "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
            f"after about 10 min 00 s at the head of the queue: train-{J} at about "
            f"{stamp(DONE + timedelta(minutes=10))}",
            "Add a jobStateTimeLimitActions",
            id="share-limit",
        ),
        pytest.param(
            ENV_LIMIT,
            "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
            f"train-{J} at about {stamp(DONE + timedelta(minutes=10))}",
            "Add a jobStateTimeLimitActions",
            id="env-limit",
        ),
    ],
)
def test_a_queue_time_limit_rule_for_the_reason_says_when_it_fires(
    reason: str, rule: str, expected: str, never: str
) -> None:
    obs = observed(queue_blocked(J, reason), None)
    assert obs is not None
    seconds = 3600 if rule.startswith("CAPACITY") else 600
    (alert,) = alerts([obs], context(doc=timed_out(rule, seconds)))
    assert any(expected in step for step in alert.nextSteps), alert.nextSteps
    assert not any(never in step for step in alert.nextSteps)
    # A rule for another reason does not count.
    other = next(
        r
        for r in (
            "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
            "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
        )
        if r != rule
    )
    (alert,) = alerts([obs], context(doc=timed_out(other, 600)))
    assert any(never in step for step in alert.nextSteps)


def test_two_stuck_reasons_of_one_job_are_two_alerts() -> None:
    share = observed(queue_blocked(J, SHARE_LIMIT), None)
    capacity = observed(queue_blocked(J, CAPACITY), None)
    env = observed(state_change(J).reason(ENV_LIMIT), None)
    assert share is not None
    assert capacity is not None
    assert env is not None
    made = alerts([share, env, capacity], context())
    assert sorted((a.cause or "", a.summary) for a in made) == [
        (
            "",
            "1 job(s) of team-a can never run: needs more instances than the service "
            "environment has",
        ),
        (
            "",
            "1 job(s) of team-a can never run: needs more than the quota share can ever get (its "
            "limit plus what it may borrow)",
        ),
        (
            "INSUFFICIENT_CAPACITY",
            "1 job(s) of team-a wait for SageMaker capacity (1 x ml.g5.xlarge)",
        ),
    ]
    assert all(len(a.jobs) == 1 for a in made)


# -- snapshot freshness: the victim counted once -------------------------------------------------

BEFORE_STOP = STOPPED - timedelta(seconds=10)  # computed while the preempted attempt still ran
AT_STOP = STOPPED + timedelta(seconds=1)  # within the slack: cannot be told
AFTER_STOP = DONE  # the builders' default: computed after the attempt stopped


def used(n: int, at: datetime | None) -> Any:
    """A snapshot computed at `at` in which team-a uses n ml.g5.xlarge (its quota is 1)."""
    return snapshot().usage("team-a", **g5(n)).computed(at)


@pytest.mark.parametrize(
    ("obs", "ctx", "expected"),
    [
        pytest.param(
            observation(reason="Preempted"),
            context(snap=used(1, AFTER_STOP)),
            ("CAPACITY_RECLAIM", ""),
            id="after-the-stop-the-victim-is-added",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=used(1, BEFORE_STOP)),
            ("IN_SHARE_PRIORITY", ""),
            id="before-the-stop-the-victim-is-in-it-already",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(snap=used(2, BEFORE_STOP)),
            ("CAPACITY_RECLAIM", ""),
            id="before-the-stop-and-borrowing",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=used(0, BEFORE_STOP)),
            ("IN_SHARE_PRIORITY", ""),
            id="before-the-stop-counts-the-victim-at-least",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=used(1, AT_STOP)),
            ("UNKNOWN", "computed at 2026-03-16T19:57:45.000Z; the preempted attempt stopped at"),
            id="at-the-stop-unknown",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(snap=used(2, AT_STOP)),
            ("CAPACITY_RECLAIM", ""),
            id="at-the-stop-borrowing-either-way",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=used(1, None)),
            ("UNKNOWN", "does not say when its usage was computed (no lastUpdatedAt)"),
            id="no-lastUpdatedAt",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=used(1, T0 - timedelta(hours=1))),
            ("UNKNOWN", "before the attempt started"),
            id="older-than-the-attempt",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON, snap=used(0, None)),
            ("IN_SHARE_PRIORITY", ""),
            id="no-lastUpdatedAt-within-quota-either-way",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=IN_SHARE_ON),
            ("UNKNOWN", "the queue snapshot could not be read"),
            id="no-snapshot-in-share-on",
        ),
        pytest.param(
            observation(reason="Preempted", usage=g5(2)),
            context(doc=IN_SHARE_ON),
            ("CAPACITY_RECLAIM", ""),
            id="the-victim-alone-is-above-the-quota",
        ),
        pytest.param(
            observation(reason="Preempted", stopped_at=None, ended_by=None, began_by=T0),
            context(snap=used(1, T0 - timedelta(seconds=5))),
            ("UNKNOWN", ""),
            id="started-only-snapshot-before-it",
        ),
        pytest.param(
            observation(reason="Preempted", stopped_at=None, ended_by=None, began_by=T0),
            context(doc=IN_SHARE_ON, snap=used(1, T0 + timedelta(seconds=10))),
            ("UNKNOWN", "the preemption began by 2026-03-16T19:57:27.000Z"),
            id="started-only-snapshot-after-it",
        ),
        pytest.param(
            observation(stopped_at=None, ended_by=DONE),
            context(changes=[change("team-a").lowered(G5, 3, 1)], snap=used(1, DONE)),
            ("UNKNOWN", "whether change"),
            id="completed-without-stop-time-reduction-undecided",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1)], snap=used(1, BEFORE_STOP)),
            ("CAPACITY_RECLAIM", ""),
            id="reduction-left-the-share-within-its-limit",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1)], snap=used(1, AFTER_STOP)),
            ("QUOTA_REDUCTION", ""),
            id="reduction-left-the-share-above-its-limit",
        ),
        pytest.param(
            observation(),
            context(changes=[change("team-a").lowered(G5, 3, 1)], snap=used(1, AT_STOP)),
            ("UNKNOWN", "whether change 2026-03-16T19:47:27.000Z-00"),
            id="reduction-undecided",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(changes=[change("team-a").lowered(G5, 3, 1)], snap=used(1, AT_STOP)),
            ("IN_SHARE_PRIORITY", ""),
            id="reduction-undecided-batch-says-in-share",
        ),
    ],
)
def test_the_snapshot_counts_the_victim_once(
    obs: Observation, ctx: Context, expected: tuple[str, str]
) -> None:
    verdict = classify(obs, ctx)
    assert verdict.cause == expected[0]
    assert expected[1] in verdict.missing
    assert bool(verdict.missing) == bool(expected[1])


def test_an_unknown_alert_says_what_was_not_known() -> None:
    ctx = context(doc=IN_SHARE_ON, snap=used(1, AT_STOP))
    (alert,) = alerts([observation(reason="Preempted")], ctx)
    assert alert.detail.split("\n")[1] == (
        "Not known: whether quota share team-a was borrowing: the queue snapshot's usage was "
        "computed at 2026-03-16T19:57:45.000Z; the preempted attempt stopped at "
        "2026-03-16T19:57:44.000Z: so it cannot be told whether the preempted job's usage is "
        "in it (slack 2 s)."
    )


@pytest.mark.parametrize(
    ("snap", "expected"),
    [
        pytest.param(
            snapshot().front("team-c", job_arn("job-c"), T0 - timedelta(minutes=1)),
            "team-c",
            id="waiting-before-the-preemption",
        ),
        pytest.param(
            snapshot().front("team-c", job_arn("job-c"), STOPPED + timedelta(seconds=2)),
            None,
            id="at-the-front-after-the-preemption",
        ),
        pytest.param(
            snapshot()
            .front("team-c", job_arn("job-c"), T0 - timedelta(minutes=1))
            .computed(T0 - timedelta(minutes=5)),
            None,
            id="usage-computed-before-it-waited",
        ),
        pytest.param(
            snapshot()
            .front("team-c", job_arn("job-c"), T0 - timedelta(minutes=1))
            .computed(None, DONE),
            None,
            id="usage-time-unknown",
        ),
    ],
)
def test_the_reclaimers_waiting_job_must_have_waited_at_the_preemption(
    snap: Any, expected: str | None
) -> None:
    obs = observation(began_by=T0)
    verdict = classify(obs, context(doc=WITH_RESERVE, snap=snap))
    assert (verdict.cause, verdict.reclaimed_by) == ("CAPACITY_RECLAIM", expected)


# -- what would have protected the jobs ----------------------------------------------------------

WINDOW_ENDED = change("team-a").lowered(G5, 3, 1).at_risk(J).window_ended("loan-to-team-a")


@pytest.mark.parametrize(
    ("obs", "ctx", "expected"),
    [
        pytest.param(
            observation(),
            RECLAIMED_BY_C,
            "Running within team-a's own quota: only borrowed capacity is reclaimed",
            id="reclaim-own-quota",
        ),
        pytest.param(
            observation(),
            context(changes=[LOWERED]),
            "reductionPolicy block or drain: a lowered limit then waits",
            id="reduction-policy",
        ),
        pytest.param(
            observation(),
            context(changes=[WINDOW_ENDED]),
            f"A checkpoint before quota window loan-to-team-a ended at {stamp(CHANGED_AT)}",
            id="window-ended",
        ),
        pytest.param(
            observation(attempt_started_at=CHANGED_AT - timedelta(minutes=5)),
            context(changes=[change("team-c").lowered(G5, 2, 1).lent_less(G5)], snap=A_BORROWING),
            "only what it borrowed from team-c was reclaimed when that share lent less",
            id="lender-lent-less",
        ),
        pytest.param(
            observation(reason=IN_SHARE),
            context(),
            "A schedulingPriority at least that of the job that took the capacity (these ran "
            "at 1), or inSharePreemption: DISABLED on team-a",
            id="in-share-priority",
        ),
        pytest.param(
            observation(reason="Preempted"),
            context(doc=None, snap=A_BORROWING),
            "Not known: Batch's reason names no documented cause",
            id="unknown",
        ),
        pytest.param(
            observation(reason=CAPACITY, stuck=True),
            context(),
            "Quota cannot help: SageMaker has no capacity of this instance type now",
            id="stuck-capacity",
        ),
        pytest.param(
            observation(reason=SHARE_LIMIT, stuck=True, usage={G5: 3.0}),
            context(),
            "A layout that can hold the job: team-a's own quota plus its borrowLimit",
            id="stuck-layout",
        ),
    ],
)
def test_every_job_alert_says_what_would_have_protected_it(
    obs: Observation, ctx: Context, expected: str
) -> None:
    (alert,) = alerts([obs], ctx)
    assert alert.protection is not None
    assert expected in alert.protection
    assert "\n" not in alert.protection, "one line"


@pytest.mark.parametrize(
    ("decision", "share", "borrowers", "expected"),
    [
        ("blocked", "team-a", (), "reductionPolicy block holds the change until someone approves"),
        ("draining", "team-a", (), "reductionPolicy drain applies the change only once they"),
        (
            "apply-with-warning",
            "team-c",
            ("team-a",),
            "Running within team-a's own quota: only what team-a borrowed from team-c",
        ),
        ("apply-with-warning", "team-a", (), "reductionPolicy block or drain holds such a change"),
    ],
)
def test_a_risk_alert_says_what_protects_the_jobs_given_the_guards_decision(
    decision: str, share: str | None, borrowers: tuple[str, ...], expected: str
) -> None:
    from quota_controller.domain.alerts.protection import protection

    line = protection("PREEMPTION_RISK", None, share, decision=decision, borrowers=borrowers)
    assert line is not None
    assert expected in line


def test_a_reclaim_text_on_a_share_that_cannot_borrow_is_not_believed() -> None:
    """AWS documents one preemption reason, the cross-share one, so it may be what every
    preemption says: on a share that cannot borrow and did not hold more than its quota it is
    no cause, and the alert says why."""
    verdict = classify(observation(reason=RECLAIM, share="team-c"), context(snap=IDLE))
    assert verdict.cause == "UNKNOWN"
    assert verdict.evidence == RECLAIM
    assert "the document gives quota share team-c strategy LEND" in verdict.missing
    assert "the queue snapshot shows it within its quota" in verdict.missing
    unread = classify(observation(reason=RECLAIM, share="team-c"), context())
    assert unread.missing.startswith("whether quota share team-c held more than its quota")
