"""handle_alert_batch on in-memory fakes: one alert per job-preemption, grouped per share, and
every record either alerted, deliberately ignored, or reported back for a retry.

The managed queue is ml-training with the AWS guide's layout; each job is of team-a unless its
row says otherwise, and DescribeServiceJob shows it requeued after its preemption.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from alert_builders import (
    CAPACITY,
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
    job_arn,
    preempted_attempt,
    queue_blocked,
    snapshot,
    sqs,
    started,
    state_change,
)
from builders import DocBuilder, ShareBuilder, g5, guide_layout
from fakes import FakeAlertReader, FakeClaims, FakeNotifier, FakeStore
from moto import mock_aws

from quota_controller.adapters.idempotency_claims import IdempotencyClaims
from quota_controller.domain.alerts.model import Alert
from quota_controller.ports import RetryableError
from quota_controller.services.alert_events import (
    AlertDeps,
    AlertOutcome,
    handle_alert_batch,
)

SAMPLES = Path(__file__).resolve().parents[2] / "events" / "alert"


def jobs(*ids: str, share: str = "team-a") -> dict[str, JobBuilder | None]:
    """DescribeServiceJob of each job, requeued after its first preemption."""
    return {i: described(i).share(share).preempted() for i in ids}


def deps(
    reader_jobs: Mapping[str, JobBuilder | None],
    *,
    snapshots: Mapping[str, Any] | None = None,
    failing: Iterable[str] = (),
    notifier: FakeNotifier | None = None,
    changes: Sequence[Any] = (),
    layout: DocBuilder | None = None,
) -> AlertDeps:
    store = FakeStore()
    store.put_document((layout or guide_layout()).build())
    for record in changes:
        store.put({**record.build(), "queue": QUEUE})
    return AlertDeps(
        reader=FakeAlertReader(reader_jobs, snapshots, failing),
        store=store,
        notifier=notifier or FakeNotifier(),
        claims=FakeClaims(),
    )


def handle(*bodies: Any, using: AlertDeps) -> tuple[list[str], AlertOutcome]:
    """Run one batch; the message ids reported as failures, and the outcome."""
    response, outcome = handle_alert_batch(sqs(*bodies), using)
    assert isinstance(using.store, FakeStore)
    assert using.store.writes == [], "the alert pipeline writes no status and no change record"
    return [f["itemIdentifier"] for f in response["batchItemFailures"]], outcome


def published(d: AlertDeps) -> list[Alert]:
    assert isinstance(d.notifier, FakeNotifier)
    return d.notifier.published


def claims(d: AlertDeps) -> dict[str, str]:
    assert isinstance(d.claims, FakeClaims)
    return d.claims.state


def preemption(
    job: str, status_after: str = "RUNNABLE", share: str = "team-a", queue: str = QUEUE
) -> list[EventBuilder]:
    """Started, Completed and State Change of the first preemption of `job`."""
    return [
        started(job),
        completed(job).status(status_after),
        state_change(job).status(status_after).share(share).queue(queue).summary(),
    ]


J = "job-a"
KEY = f"{J}:{attempt_arn(J)}"
IN_SHARE = "In-share preemption triggered by a higher-priority job"


def test_one_preemption_is_one_alert() -> None:
    d = deps(jobs(J))
    failures, outcome = handle(*preemption(J), using=d)
    assert failures == []
    (alert,) = published(d)
    assert (alert.kind, alert.cause, alert.jobQueue, alert.quotaShareName, alert.severity) == (
        "PREEMPTION",
        "CAPACITY_RECLAIM",
        QUEUE,
        "team-a",
        "warning",
    )
    assert [(j.jobId, j.statusBefore, j.statusAfter, j.trainingJobArn) for j in alert.jobs] == [
        (J, "RUNNING", "RUNNABLE", attempt_arn(J))
    ]
    assert (outcome.duplicates, outcome.ignored, outcome.malformed, outcome.failed) == (
        2,
        0,
        [],
        [],
    )
    assert claims(d) == {KEY: "done"}


@pytest.mark.parametrize(
    ("batches", "expected"),
    [
        pytest.param([preemption(J)], [(1, "warning")], id="one-batch"),
        pytest.param([preemption(J)[::-1]], [(1, "warning")], id="any-order"),
        pytest.param([preemption(J), preemption(J)], [(1, "warning")], id="redelivered"),
        pytest.param(
            [preemption(J)[:1], preemption(J)[1:2], preemption(J)[2:]],
            [(1, "warning")],
            id="one-event-per-batch",
        ),
        pytest.param([preemption(J, "FAILED")], [(1, "critical")], id="failed-in-the-same-batch"),
        pytest.param(
            [preemption(J, "FAILED")[::-1], preemption(J, "FAILED")],
            [(1, "critical")],
            id="failed-redelivered",
        ),
        pytest.param(
            [preemption(J)[:1], preemption(J, "FAILED")[1:]],
            [(1, "warning"), (1, "critical")],
            id="failed-after-the-preemption-was-alerted",
        ),
        pytest.param(
            [preemption(J), preemption("job-b")],
            [(1, "warning"), (1, "warning")],
            id="jobs-in-later-batches",
        ),
        pytest.param(
            [[*preemption(J), *preemption("job-b"), *preemption("job-c")]],
            [(3, "warning")],
            id="burst-of-one-share",
        ),
        pytest.param(
            [[completed(J), completed(J).attempt(attempt_arn(J, 2)).count(2).id("again")]],
            [(2, "warning")],
            id="two-preemptions-of-one-job",
        ),
    ],
)
def test_each_job_preemption_is_alerted_once(
    batches: list[list[EventBuilder]], expected: list[tuple[int, str]]
) -> None:
    d = deps(jobs(J, "job-b", "job-c"))
    for batch in batches:
        failures, _ = handle(*batch, using=d)
        assert failures == []
    assert [(len(a.jobs), a.severity) for a in published(d)] == expected


def test_a_failed_preemption_keeps_the_victims_status_and_says_resubmit() -> None:
    d = deps(jobs(J))
    handle(*preemption(J, "FAILED"), using=d)
    (alert,) = published(d)
    assert [(j.statusBefore, j.statusAfter) for j in alert.jobs] == [("RUNNING", "FAILED")]
    assert "resubmit" in alert.nextSteps[0]
    assert claims(d) == {KEY: "done", f"{KEY}:failed": "done"}


def test_two_shares_make_two_alerts() -> None:
    d = deps({**jobs(J, "job-a2"), **jobs("job-b", share="team-b")})
    failures, _ = handle(
        *preemption(J), *preemption("job-b", share="team-b"), *preemption("job-a2"), using=d
    )
    assert failures == []
    assert sorted((a.quotaShareName, sorted(j.jobId for j in a.jobs)) for a in published(d)) == [
        ("team-a", [J, "job-a2"]),
        ("team-b", ["job-b"]),
    ]


def test_alert_names_the_reduction_that_caused_it() -> None:
    lowered = change("team-a").lowered(G5, 3, 1).by("alice").at_risk(J)
    d = deps(jobs(J), changes=[lowered])
    handle(*preemption(J), using=d)
    (alert,) = published(d)
    assert (alert.cause, alert.change and alert.change.id, alert.change and alert.change.by) == (
        "QUOTA_REDUCTION",
        lowered.change_id,
        "alice",
    )


def test_alert_names_the_reclaiming_share() -> None:
    snap = snapshot().usage("team-a", **g5(1)).front("team-c", job_arn("job-c"))
    d = deps(jobs(J), snapshots={QUEUE: snap})
    handle(started(J).reason(IN_PROGRESS + "Preempted"), using=d)
    (alert,) = published(d)
    assert alert.summary == "1 job of team-a preempted: borrowed capacity reclaimed by team-c"


# The guide's layout with team-a's in-share preemption on.
IN_SHARE_ON = (
    DocBuilder(QUEUE)
    .env(**g5(3))
    .add(ShareBuilder("team-a", g5(1)).strategy("LEND_AND_BORROW", 100).in_share_preemption())
    .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
    .share("team-c", "LEND", **g5(1))
)


def waiter() -> JobBuilder:
    """job-h of team-a, waiting with priority 5 for one ml.g5.xlarge."""
    return described("job-h").share("team-a").status("RUNNABLE").priority(5)


# team-a within its quota after the preemption, its own job-h waiting at its front.
A_WAITS = snapshot().usage("team-a", **g5(0)).front("team-a", job_arn("job-h"))


@pytest.mark.parametrize(
    ("layout", "job_h", "cause"),
    [
        pytest.param(IN_SHARE_ON, waiter(), "IN_SHARE_PRIORITY", id="in-share-on-read"),
        # A throttled read leaves job-h unknown: the rule does not fire, the record stands.
        pytest.param(IN_SHARE_ON, "throttled", "CAPACITY_RECLAIM", id="read-throttled"),
        pytest.param(IN_SHARE_ON, None, "CAPACITY_RECLAIM", id="job-h-gone"),
        # job-h could not have taken the victim's slot.
        pytest.param(
            IN_SHARE_ON,
            waiter().usage(**g5(5)).reason(SHARE_LIMIT),
            "CAPACITY_RECLAIM",
            id="job-h-stuck-bigger-than-the-environment",
        ),
        pytest.param(
            IN_SHARE_ON,
            waiter().usage(**{G5_2X: 1}),
            "CAPACITY_RECLAIM",
            id="job-h-needs-another-instance-type",
        ),
        pytest.param(guide_layout(), waiter(), "CAPACITY_RECLAIM", id="in-share-off"),
    ],
)
def test_the_job_waiting_in_front_of_an_in_share_share_is_read_for_its_priority(
    layout: DocBuilder, job_h: JobBuilder | str | None, cause: str
) -> None:
    """Batch's reclaim text for team-a's job, team-a within its quota, and its own priority-5
    job-h waiting at its front: with in-share preemption on, job-h is read, and outranking the
    victim (priority 1) for the instance type it held, its in-share rule took the job. No
    record fails for job-h."""
    throttled = job_h == "throttled"
    d = deps(
        {**jobs(J), "job-h": None if isinstance(job_h, str) else job_h},
        snapshots={QUEUE: A_WAITS},
        failing=["job-h"] if throttled else [],
        layout=layout,
    )
    failed, _ = handle(*preemption(J), using=d)
    assert (failed, [a.cause for a in published(d)]) == ([], [cause])


def test_a_throttled_waiting_job_is_read_once_and_fails_no_record() -> None:
    """30 preemptions of team-a's jobs in one batch (90 records), job-h at its front
    throttled: one read of job-h, logged once, and every preemption alerted."""
    victims = [f"job-{n}" for n in range(30)]
    d = deps(jobs(*victims), snapshots={QUEUE: A_WAITS}, failing=["job-h"], layout=IN_SHARE_ON)
    said: list[str] = []
    response, _ = handle_alert_batch(
        sqs(*(e for v in victims for e in preemption(v))),
        d,
        log=lambda message, **_: said.append(message),
    )
    assert response["batchItemFailures"] == []
    assert sorted(j.jobId for a in published(d) for j in a.jobs) == sorted(victims)
    assert {a.cause for a in published(d)} == {"CAPACITY_RECLAIM"}
    assert isinstance(d.reader, FakeAlertReader)
    assert d.reader.described["job-h"] == 1
    assert said.count("waiting job not read") == 1


@pytest.mark.parametrize(
    ("layout", "share", "reason"),
    [
        # team-d never borrows: the in-share rule for a reclaim text cannot apply.
        pytest.param(
            guide_layout().env(**g5(4)).add(ShareBuilder("team-d", g5(1)).in_share_preemption()),
            "team-d",
            RECLAIM,
            id="reserve-share",
        ),
        # Batch's in-share text decides without it.
        pytest.param(IN_SHARE_ON, "team-a", IN_SHARE, id="in-share-text"),
    ],
)
def test_the_waiting_job_is_not_read_when_the_rule_cannot_apply(
    layout: DocBuilder, share: str, reason: str
) -> None:
    """job-h waits at the front of the victim's share (in-share preemption on), but its
    details could not change the verdict: it is not read, so its throttling costs nothing."""
    snap = snapshot().usage(share, **g5(1)).front(share, job_arn("job-h"))
    d = deps(jobs(J, share=share), snapshots={QUEUE: snap}, failing=["job-h"], layout=layout)
    events = [
        started(J).reason(IN_PROGRESS + reason),
        completed(J).reason(reason),
        state_change(J).share(share).summary(reason=reason),
    ]
    failed, _ = handle(*events, using=d)
    assert failed == []
    assert len(published(d)) == 1
    assert isinstance(d.reader, FakeAlertReader)
    assert d.reader.described["job-h"] == 0


def test_stuck_job_is_alerted_once() -> None:
    d = deps({J: described(J).status("RUNNABLE").reason(SHARE_LIMIT)})
    stuck = state_change(J).reason(SHARE_LIMIT).usage(**g5(4))
    handle(stuck, using=d)
    handle(stuck, using=d)
    assert [(a.kind, a.cause, a.quotaShareName) for a in published(d)] == [
        ("JOB_STUCK", None, "team-a")
    ]


def test_malformed_records_fail_while_the_rest_alerts() -> None:
    d = deps(jobs(J, "job-x"))
    sample = json.loads((SAMPLES / "malformed-preemption-without-job.json").read_text())
    failures, outcome = handle(
        ("not-json", "{'detail-type': 'Batch"),
        ("empty", ""),
        ("null", "null"),
        ("list", "[]"),
        started("job-x").envelope(source="aws.ec2").id("foreign-source"),
        started("job-x").envelope(**{"detail-type": "Batch Job State Change"}).id("other-type"),
        started("job-x").envelope(time="yesterday").id("bad-time"),
        started("job-x").without("preemptedJobArn").id("no-job"),
        state_change("job-x").set(capacityUsage="lots").id("bad-detail"),
        completed("job-x")
        .set(preemptionSummary={"preemptedAttemptCount": "n/a"})
        .id("bad-summary"),
        sample,
        *preemption(J),
        using=d,
    )
    bad = [
        "not-json",
        "empty",
        "null",
        "list",
        "foreign-source",
        "other-type",
        "bad-time",
        "no-job",
        "bad-detail",
        "bad-summary",
        sample["id"],
    ]
    assert sorted(failures) == sorted(bad)
    assert sorted(outcome.malformed) == sorted(bad)
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]


def test_unmanaged_queue_is_ignored() -> None:
    d = deps({**jobs(J), "job-x": described("job-x").preempted().queue("someone-elses-queue")})
    sample = json.loads((SAMPLES / "state-change-foreign-queue.json").read_text())
    failures, outcome = handle(
        sample,
        *preemption("job-x", queue="someone-elses-queue"),
        state_change("job-y").queue("someone-elses-queue").reason(SHARE_LIMIT),
        completed(J),
        using=d,
    )
    assert failures == []
    assert outcome.ignored == 5
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]


def test_job_gone_alerts_from_the_state_change_itself() -> None:
    d = deps({J: None})
    failures, outcome = handle(
        started(J),  # names no queue, and Batch no longer knows the job
        state_change(J).status("FAILED").summary().retries(0).share("team-b").usage(**g5(2)),
        using=d,
    )
    assert (failures, outcome.ignored) == ([], 1)
    (alert,) = published(d)
    assert (alert.quotaShareName, alert.severity) == ("team-b", "critical")
    assert [(j.jobId, j.statusAfter, j.capacityUsage[0].quantity) for j in alert.jobs] == [
        (J, "FAILED", 2.0)
    ]


def test_publish_failure_releases_the_claims_and_fails_the_sources() -> None:
    d = deps(jobs(J), notifier=FakeNotifier(failures=1))
    events = preemption(J)
    failures, outcome = handle(*events, using=d)
    assert sorted(failures) == sorted(e.event_id for e in events)
    assert (published(d), claims(d), len(outcome.failed)) == ([], {}, 1)

    retry = [e for e in events if e.event_id in failures]
    failures, _ = handle(*retry, using=d)
    assert failures == []
    failures, _ = handle(*retry, using=d)
    assert failures == []
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]
    assert claims(d) == {KEY: "done"}


def test_publish_failure_of_one_alert_fails_only_its_records() -> None:
    d = deps(
        {**jobs(J), **jobs("job-b", share="team-b")},
        notifier=FakeNotifier(failing_shares={"team-b"}),
    )
    team_b = [completed("job-b"), state_change("job-b").share("team-b").summary()]
    failures, _ = handle(*preemption(J), *team_b, using=d)
    assert sorted(failures) == sorted(e.event_id for e in team_b)
    assert [a.quotaShareName for a in published(d)] == ["team-a"]
    assert claims(d) == {KEY: "done"}


def test_enrichment_failure_fails_only_that_record() -> None:
    d = deps(jobs(J, "job-b"), failing={"job-b"})
    team_b = [started("job-b"), completed("job-b")]
    failures, _ = handle(*preemption(J), *team_b, using=d)
    assert sorted(failures) == sorted(e.event_id for e in team_b)
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]

    assert isinstance(d.reader, FakeAlertReader)
    d.reader.failing.clear()
    failures, _ = handle(*team_b, using=d)
    assert failures == []
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J], ["job-b"]]


def test_reason_text_is_kept_when_nothing_explains_it() -> None:
    d = deps(jobs(J))
    handle(completed(J).reason("Preempted: reason 42"), using=d)
    (alert,) = published(d)
    first, not_known = alert.detail.split("\n")
    assert (alert.cause, first.endswith("Batch's reason: Preempted: reason 42")) == (
        "UNKNOWN",
        True,
    )
    # team-a may borrow, and without a snapshot it cannot be told whether it was borrowing.
    assert not_known == (
        "Not known: whether quota share team-a was borrowing: the queue snapshot could not be read."
    )


class FlakyClaims(FakeClaims):
    """The idempotency table; `confirm` fails (throttled) `confirm_failures` times, `claim`
    fails for keys in `failing_claims`."""

    def __init__(self, confirm_failures: int = 0, failing_claims: Iterable[str] = ()) -> None:
        super().__init__()
        self.confirm_failures = confirm_failures
        self.failing_claims = set(failing_claims)

    def claim(self, key: str) -> bool:
        if key in self.failing_claims:
            raise RetryableError("claim: ThrottlingException")
        return super().claim(key)

    def confirm(self, key: str) -> None:
        if self.confirm_failures > 0:
            self.confirm_failures -= 1
            raise RetryableError("confirm: ThrottlingException")
        super().confirm(key)


@pytest.mark.parametrize("confirm_failures", [1, 2], ids=["once", "twice"])
def test_a_confirm_that_fails_after_the_publish_neither_fails_the_batch_nor_alerts_twice(
    confirm_failures: int,
) -> None:
    d = deps(jobs(J))
    d.claims = FlakyClaims(confirm_failures=confirm_failures)
    events = preemption(J)
    said: list[str] = []

    response, _ = handle_alert_batch(sqs(*events), d, log=lambda msg, **_: said.append(msg))
    handle(*events, using=d)  # the same events again (EventBridge delivers at least once)

    assert response["batchItemFailures"] == []
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]
    assert ("confirm failed after the alert was published" in said) == (confirm_failures == 2)


class ConfirmThrottledOnce(IdempotencyClaims):
    """Powertools Idempotency's DynamoDB persistence; the first confirm is throttled."""

    failures = 1

    def confirm(self, key: str) -> None:
        if self.failures:
            self.failures -= 1
            raise RetryableError("confirm: ThrottlingException")
        super().confirm(key)


@mock_aws
def test_a_throttled_confirm_on_the_idempotency_table_does_not_alert_twice() -> None:
    # The real claim is in progress only as long as the invocation could still run; SQS would
    # redeliver a failed batch only after the buffer's visibility timeout, so failing the batch
    # on a throttled confirm would alert again. Confirm is retried instead, and the same events
    # delivered again later find the key done.
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
    )

    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="idempotency",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    persistence = DynamoDBPersistenceLayer(table_name="idempotency", boto3_client=ddb)
    persistence.configure(IdempotencyConfig(expires_after_seconds=6 * 3600), function_name="a")
    d = deps(jobs(J))
    d.claims = ConfirmThrottledOnce(persistence, lambda: 200)  # 200 ms of the invocation left
    events = preemption(J)

    failures, _ = handle(*events, using=d)
    time.sleep(0.4)  # past the in-progress claim's expiry
    handle(*events, using=d)

    assert failures == []
    assert len(published(d)) == 1


def test_a_claim_that_fails_midway_leaves_no_key_claimed() -> None:
    failed_key = f"{KEY}:failed"
    d = deps(jobs(J))
    d.claims = FlakyClaims(failing_claims={failed_key})
    events = preemption(J, "FAILED")
    assert isinstance(d.claims, FlakyClaims)

    with pytest.raises(RetryableError):
        handle(*events, using=d)

    assert (published(d), claims(d)) == ([], {})


def break_item(d: AlertDeps, key: str) -> None:
    """Make one config item of the queue invalid (a state Batch does not know)."""
    assert isinstance(d.store, FakeStore)
    d.store.partitions[QUEUE][key]["state"] = "PAUSED"


def test_an_invalid_share_item_does_not_blind_the_attribution_of_the_others() -> None:
    # team-b's item is broken; the reconciler keeps applying team-a and team-c, so the alert
    # still knows team-c lends and names it as the share that took its capacity back.
    snap = snapshot().usage("team-a", **g5(1)).front("team-c", job_arn("job-c"))
    d = deps(jobs(J), snapshots={QUEUE: snap})
    break_item(d, "SHARE#team-b")
    handle(started(J).reason(IN_PROGRESS + "Preempted"), using=d)
    (alert,) = published(d)
    assert alert.summary == "1 job of team-a preempted: borrowed capacity reclaimed by team-c"


def test_no_reclaimer_is_named_while_a_share_with_an_invalid_item_waits() -> None:
    # team-b's item is broken and team-b has a job waiting: it may be the lender that took the
    # capacity back, so naming team-c would be a guess.
    snap = (
        snapshot()
        .usage("team-a", **g5(1))
        .front("team-b", job_arn("job-b"))
        .front("team-c", job_arn("job-c"))
    )
    d = deps(jobs(J), snapshots={QUEUE: snap})
    break_item(d, "SHARE#team-b")
    handle(started(J).reason(IN_PROGRESS + "Preempted"), using=d)
    (alert,) = published(d)
    assert (alert.cause, alert.summary) == (
        "CAPACITY_RECLAIM",
        "1 job of team-a preempted: borrowed capacity reclaimed",
    )


def test_a_queue_rejected_as_a_whole_is_attributed_without_its_config() -> None:
    # A stray sort key: the reconciler applies nothing, so the written limits may not be what
    # Batch enforces; the borrowing that explained the preemption above is not claimed.
    snap = snapshot().usage("team-a", **g5(1)).front("team-c", job_arn("job-c"))
    d = deps(jobs(J), snapshots={QUEUE: snap})
    assert isinstance(d.store, FakeStore)
    d.store.put({"queue": QUEUE, "item": "SHARE-team-d", "state": "ENABLED"})
    handle(started(J).reason(IN_PROGRESS + "Preempted"), using=d)
    (alert,) = published(d)
    assert alert.cause == "UNKNOWN"


# -- events that must not cost the rest of the batch, or alert a preemption twice ------------


def test_an_infinite_timestamp_is_a_malformed_event_not_a_failed_batch() -> None:
    d = deps(jobs(J, "job-b"))
    bad = completed("job-b").build()
    bad["detail"]["preemptionSummary"]["recentPreemptedAttempts"][0]["stoppedAt"] = 1e400  # inf

    failures, outcome = handle(*preemption(J), ("poison", json.dumps(bad)), using=d)

    assert failures == ["poison"]
    assert outcome.malformed == ["poison"]
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]


def test_an_event_time_without_a_zone_is_a_malformed_event_not_a_failed_batch() -> None:
    d = deps(jobs(J, "job-b"))
    naive = completed("job-b").at("2026-03-16T19:57:47").build()

    failures, _ = handle(*preemption(J), ("naive", json.dumps(naive)), using=d)

    assert failures == ["naive"]
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]


def test_a_record_that_breaks_the_pipeline_fails_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import quota_controller.services.alert_events as alert_events

    real = alert_events.observe

    def breaks_on_job_b(event: Any, described: Any) -> Any:
        if event.job_id() == "job-b":
            raise KeyError("a bug")
        return real(event, described)

    monkeypatch.setattr(alert_events, "observe", breaks_on_job_b)
    d = deps(jobs(J, "job-b"))
    failures, _ = handle(*preemption(J), ("b", json.dumps(completed("job-b").build())), using=d)

    assert failures == ["b"]
    assert [[j.jobId for j in a.jobs] for a in published(d)] == [[J]]


def test_a_late_started_event_keys_its_own_preemption_not_the_next_one() -> None:
    # Preemption 1 (in-share, attempt 1) is alerted from Completed and State Change; its
    # Started comes back late (a retried batch), after a second preemption (a reclaim of
    # attempt 2). It must not take attempt 2's key, or preemption 2 is alerted with the wrong
    # cause and its own events dropped as duplicates.
    a1, a2 = attempt_arn(J, 1), attempt_arn(J, 2)
    second = T0 + timedelta(minutes=3)
    twice = described(J).status("RUNNABLE").latest(attempt_arn(J, 3))
    twice.set(
        preemptionSummary={
            "preemptedAttemptCount": 2,
            "recentPreemptedAttempts": [
                preempted_attempt(a1, IN_SHARE, stopped=STOPPED),
                preempted_attempt(a2, RECLAIM, stopped=second + timedelta(seconds=17)),
            ],
        }
    )
    d = deps({J: twice})
    handle(
        completed(J).reason(IN_SHARE),
        state_change(J).summary(reason=IN_SHARE).latest(a1),
        using=d,
    )
    handle(started(J).reason(IN_PROGRESS + IN_SHARE), using=d)  # preemption 1's, late
    handle(
        started(J).at(second).id("started-2").reason(IN_PROGRESS + RECLAIM),
        completed(J).at(second + timedelta(seconds=20)).id("completed-2").attempt(a2).count(2),
        state_change(J).at(second + timedelta(seconds=20)).id("sc-2").summary(2, a2).latest(a2),
        using=d,
    )

    by_attempt = {j.trainingJobArn: a.cause for a in published(d) for j in a.jobs}
    assert by_attempt == {a1: "IN_SHARE_PRIORITY", a2: "CAPACITY_RECLAIM"}
    assert len(published(d)) == 2


def test_a_preemption_before_the_job_has_a_training_job_is_alerted_once() -> None:
    # A SCHEDULED job preempted before SageMaker gave it a training job: no attempt ARN, so
    # its events are keyed by the preemption count, which must be the same for all three.
    scheduled = described(J).status("SCHEDULED").latest(None)
    preempted = described(J).status("RUNNABLE").latest(None)
    summary = {"preemptedAttemptCount": 1, "recentPreemptedAttempts": [{"statusReason": RECLAIM}]}
    preempted.set(preemptionSummary=summary)
    d = deps({J: scheduled})

    handle(started(J).status("SCHEDULED"), using=d)  # described while still SCHEDULED
    assert isinstance(d.reader, FakeAlertReader)
    d.reader.jobs[J] = preempted
    done = completed(J).set(preemptionSummary=summary)
    handle(done, state_change(J).latest(None).set(preemptionSummary=summary), using=d)

    assert len(published(d)) == 1


# -- stuck jobs: one alert per job and reason, however the reason arrives ------------------------

QB_SHARE = queue_blocked(J, SHARE_LIMIT)
SC_SHARE = state_change(J).reason(SHARE_LIMIT).latest(None).id("sc-share")
QB_CAPACITY = queue_blocked(J, CAPACITY).id("qb-capacity")
SC_CAPACITY = state_change(J).reason(CAPACITY).latest(None).id("sc-capacity")
QB_SHARE_AGAIN = queue_blocked(J, SHARE_LIMIT).id("qb-share-again").at(T0 + timedelta(hours=1))
SHARE_CODE = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
CAPACITY_CODE = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"


@pytest.mark.parametrize(
    ("batches", "expected"),
    [
        pytest.param([[QB_SHARE]], [SHARE_CODE], id="queue-blocked"),
        pytest.param([[SC_SHARE]], [SHARE_CODE], id="state-change-carrying-it"),
        pytest.param([[QB_SHARE, SC_SHARE]], [SHARE_CODE], id="both-in-one-batch"),
        pytest.param([[SC_SHARE, QB_SHARE]], [SHARE_CODE], id="both-in-one-batch-reversed"),
        pytest.param([[QB_SHARE], [SC_SHARE]], [SHARE_CODE], id="both-across-batches"),
        pytest.param([[SC_SHARE], [QB_SHARE]], [SHARE_CODE], id="both-across-batches-reversed"),
        pytest.param([[QB_SHARE], [QB_SHARE]], [SHARE_CODE], id="redelivered"),
        pytest.param(
            [[QB_SHARE, QB_CAPACITY]], [SHARE_CODE, CAPACITY_CODE], id="a-to-b-in-one-batch"
        ),
        pytest.param(
            [[QB_SHARE], [SC_CAPACITY]], [SHARE_CODE, CAPACITY_CODE], id="a-to-b-across-batches"
        ),
        pytest.param(
            [[QB_SHARE], [QB_CAPACITY, SC_CAPACITY], [QB_SHARE_AGAIN]],
            [SHARE_CODE, CAPACITY_CODE],
            id="a-b-a-across-batches",
        ),
        pytest.param(
            [[QB_SHARE, QB_CAPACITY, QB_SHARE_AGAIN]],
            [SHARE_CODE, CAPACITY_CODE],
            id="a-b-a-in-one-batch",
        ),
    ],
)
def test_one_stuck_alert_per_job_and_reason(
    batches: list[list[EventBuilder]], expected: list[str]
) -> None:
    d = deps({J: described(J).status("RUNNABLE").latest(None)})
    for batch in batches:
        failures, _ = handle(*batch, using=d)
        assert failures == []
    stuck = [a for a in published(d) if a.kind == "JOB_STUCK"]
    assert [(a.jobs[0].jobId, len(a.jobs)) for a in stuck] == [(J, 1)] * len(expected)
    assert [a.cause for a in stuck] == [
        "INSUFFICIENT_CAPACITY" if code == CAPACITY_CODE else None for code in expected
    ]
    assert sorted(k for k in claims(d) if ":stuck:" in k) == sorted(
        f"{J}:stuck:{code}" for code in expected
    )


@pytest.mark.parametrize("newest_first", [False, True], ids=["oldest-first", "newest-first"])
def test_a_second_preemption_is_not_a_duplicate_of_the_first(newest_first: bool) -> None:
    d = deps({J: described(J).history(1, newest_first=newest_first).status("RUNNABLE")})
    handle(*preemption(J), using=d)
    second = [
        started(J).at(T0).id("started-2"),
        completed(J).history(2, newest_first=newest_first).id("completed-2"),
        state_change(J).history(2, newest_first=newest_first).id("state-change-2"),
    ]
    assert isinstance(d.reader, FakeAlertReader)
    d.reader.jobs[J] = described(J).history(2, newest_first=newest_first).status("RUNNABLE")
    failures, outcome = handle(*second, using=d)
    assert failures == []
    assert [[j.trainingJobArn for j in a.jobs] for a in published(d)] == [
        [attempt_arn(J, 1)],
        [attempt_arn(J, 2)],
    ]
    assert outcome.duplicates == 2, "the second preemption's three events: one alert"
    assert sorted(claims(d)) == sorted([KEY, f"{J}:{attempt_arn(J, 2)}"])
