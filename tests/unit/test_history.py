"""The job history's merge: replayed and out-of-order events converge on one record."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from alert_builders import RECLAIM, SHARE_LIMIT, attempt_arn, queue_blocked, sqs, state_change
from history_builders import at, lifecycle, ms

from quota_controller.domain.alerts.events import BatchEvent
from quota_controller.domain.history import (
    HistoryDetail,
    JobRecord,
    backfill_observation,
    enrich,
    from_item,
    last_known_ms,
    merge,
    to_item,
)
from quota_controller.services.history_events import handle_history_batch, observation


def _observations(events: list[dict]) -> list[JobRecord]:
    out = [observation(BatchEvent.model_validate(e)) for e in events]
    assert all(o is not None for o in out)
    return [o for o in out if o is not None]


def _fold(observations: list[JobRecord]) -> JobRecord:
    result: JobRecord | None = None
    for o in observations:
        result = merge(result, o)
    assert result is not None
    return result


def test_a_lifecycle_in_order_gives_the_whole_job() -> None:
    job = _fold(_observations(lifecycle("job-a")))
    assert job.status == "SUCCEEDED"
    assert (job.share, job.instanceType, job.count) == ("team-a", "ml.g5.xlarge", 1)
    assert job.submittedAt == ms(at(0))
    assert job.firstRunnableAt == ms(at(0))
    assert job.firstScheduledAt == ms(at(60))
    assert job.preemptedAttempts == 1
    first, second = job.ordered_attempts()
    assert (first.startedAt, first.stoppedAt, first.preempted) == (ms(at(120)), ms(at(600)), True)
    assert first.cause == "CAPACITY_RECLAIM"
    assert (second.startedAt, second.stoppedAt, second.preempted) == (
        ms(at(700)),
        ms(at(4300)),
        False,
    )
    assert job.ended_at() == ms(at(4300))
    assert set(job.attempts) == {attempt_arn("job-a", 1), attempt_arn("job-a", 2)}


def test_any_order_and_any_replay_converge_on_one_record() -> None:
    observations = _observations(lifecycle("job-a"))
    expected = _fold(observations)
    rng = random.Random(7)
    for _ in range(200):
        shuffled = observations + rng.sample(observations, rng.randint(0, len(observations)))
        rng.shuffle(shuffled)
        assert _fold(shuffled) == expected
    # Merging in a tree (two writers, each with part of the events) gives the same.
    left, right = _fold(observations[::2]), _fold(observations[1::2])
    assert merge(left, right) == merge(right, left) == expected
    assert merge(expected, expected) == expected


def test_a_stuck_reason_is_kept_and_the_status_moves_on() -> None:
    blocked = queue_blocked("job-s", SHARE_LIMIT).at(at(30)).build()
    running = state_change("job-s").status("RUNNING").at(at(90)).build()
    for order in ([blocked, running], [running, blocked]):
        job = _fold(_observations(order))
        assert job.stuckReasons == ("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",)
        assert job.status == "RUNNING"


def test_a_requeue_in_the_same_second_as_the_run_reads_as_requeued() -> None:
    # EventBridge times are whole seconds: the preempted-attempt count orders the two.
    running = state_change("job-p").status("RUNNING").at(at(10)).build()
    requeued = state_change("job-p").status("RUNNABLE").summary(1, reason=RECLAIM).at(at(10))
    job = _fold(_observations([requeued.build(), running]))
    assert job.status == "RUNNABLE"


def _answer(event: dict, **fields: object) -> HistoryDetail:
    """A DescribeServiceJob answer: the job as the event's detail shows it (and `fields`)."""
    return HistoryDetail.model_validate({**event["detail"], **fields})


LATER = at(30 * 86400)  # a backfill's window end, long after the job


def test_a_backfilled_answer_is_dated_at_the_job_s_own_last_known_time() -> None:
    events = lifecycle("job-a")
    done = _answer(events[-1])
    assert last_known_ms(done) == ms(at(4300))
    # Batch's times are milliseconds, EventBridge's whole seconds: dated to the second.
    assert last_known_ms(_answer(events[-1], stoppedAt=ms(at(4300)) + 400)) == ms(at(4300))
    # Running: its latest attempt's start; waiting: its creation; nothing known: None.
    running = _answer(events[5], stoppedAt=None)
    assert last_known_ms(running) == ms(at(700))
    assert last_known_ms(_answer(events[0])) == ms(at(0))
    assert last_known_ms(_answer(events[0], createdAt=None)) is None

    seen = backfill_observation(done, LATER)
    assert seen is not None
    assert (seen.status, seen.statusAt, seen.lastSeenAt) == (
        "SUCCEEDED",
        ms(at(4300)),
        ms(at(4300)),
    )
    # Neither first RUNNABLE nor first seen: the answer does not say (submittedAt is createdAt).
    assert (seen.firstRunnableAt, seen.firstSeenAt, seen.submittedAt) == (None, None, ms(at(0)))
    # Its priority is dated 0, as the RecordHistory handler dates an answer's: events win, and
    # a record that has the answer's priority already is not written again for it.
    prioritized = backfill_observation(_answer(events[-1], schedulingPriority=3), LATER)
    assert prioritized is not None
    assert (prioritized.priority, prioritized.priorityAt) == (3, 0)
    unknown = backfill_observation(_answer(events[0], createdAt=None), LATER)
    assert unknown is not None
    assert unknown.statusAt == ms(LATER)


def test_a_backfill_of_a_job_the_events_recorded_changes_nothing() -> None:
    events = lifecycle("job-a")
    recorded = _fold(_observations(events))
    for answer in (_answer(events[-1]), _answer(events[-1], stoppedAt=ms(at(4300)) + 400)):
        seen = backfill_observation(answer, LATER)
        assert seen is not None
        assert merge(recorded, seen) == merge(seen, recorded) == recorded
    # A running job's answer says nothing its events up to now did not.
    running = _fold(_observations(events[:6]))
    seen = backfill_observation(_answer(events[5]), LATER)
    assert seen is not None
    assert merge(running, seen) == merge(seen, running) == running


def test_observations_of_one_time_merge_to_one_answer_in_any_order() -> None:
    # Equal in time, count and rank (SUCCEEDED and FAILED): the status itself breaks the tie.
    ok = state_change("job-t").status("SUCCEEDED").reason("done").at(at(10)).build()
    failed = state_change("job-t").status("FAILED").reason("done").at(at(10)).build()
    a, b = _observations([ok, failed])
    assert merge(a, b) == merge(b, a)


def test_a_backfill_of_a_scheduled_job_keeps_when_it_was_scheduled() -> None:
    """Batch's scheduledAt has milliseconds; the backfill's observation is dated to the second:
    the job was first SCHEDULED when the answer says, not at that rounded time (its event came
    in the next second, as EventBridge dates events to the second)."""
    events = lifecycle("job-s")[:2]
    scheduled_at = ms(at(60)) + 500
    events[-1]["detail"]["scheduledAt"] = scheduled_at
    events[-1]["time"] = state_change("job-s").at(at(61)).build()["time"]
    recorded = _fold(_observations(events))
    assert (recorded.status, recorded.firstScheduledAt) == ("SCHEDULED", scheduled_at)
    seen = backfill_observation(_answer(events[-1]), LATER)
    assert seen is not None
    assert seen.firstScheduledAt == scheduled_at
    assert merge(recorded, seen) == recorded


def test_what_a_describe_adds_does_not_decide_which_status_of_one_second_wins() -> None:
    """A requeued job's RUNNABLE and SCHEDULED events of one second, without a preemption
    summary (the guide's event shape), and the DescribeServiceJob answer counting the
    preemption: in one batch or in two, the job ends SCHEDULED."""
    runnable, scheduled = _observations(
        [
            state_change("job-p").status("RUNNABLE").at(at(100)).build(),
            state_change("job-p").status("SCHEDULED").at(at(100)).build(),
        ]
    )
    answer = _answer(
        state_change("job-p").status("SCHEDULED").at(at(100)).summary().reason(RECLAIM).build()
    )
    one_batch = enrich(merge(runnable, scheduled), answer)
    two_batches = merge(enrich(runnable, answer), scheduled)
    assert one_batch.status == two_batches.status == "SCHEDULED"
    assert one_batch == two_batches


def _random_record(rng: random.Random) -> JobRecord:
    status = rng.choice([None, "RUNNABLE", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED"])
    priority = rng.choice([None, 0, 5])
    return JobRecord(
        queue="q",
        jobId="j",
        jobName=rng.choice([None, "a", "b"]),
        share=rng.choice([None, "s1", "s2"]),
        # An observation may show a status and no priority (an event without the field), and
        # one of the same second another priority (updated while the job waited).
        priority=priority,
        priorityAt=rng.choice([0, 10, 10, 11, None]) if priority is not None else None,
        submittedAt=rng.choice([None, 1, 2]),
        status=status,
        statusAt=rng.choice([10, 10, 11]) if status else None,
        statusReason=rng.choice([None, "x", "y"]) if status else None,
        statusPreempted=rng.choice([0, 1]) if status else None,
        firstRunnableAt=rng.choice([None, 3, 4]),
        preemptedAttempts=rng.choice([0, 0, 1, 2]),
        firstSeenAt=rng.choice([None, 1, 2]),
        lastSeenAt=rng.choice([None, 8, 9]),
    )


def test_merge_is_a_join_whatever_was_merged_first() -> None:
    """Commutative, associative and idempotent: a record does not depend on how its events
    were batched, replayed or ordered, also with describe answers (no status, a higher
    preempted count) among them."""
    rng = random.Random(7)
    for _ in range(5000):
        a, b, c = _random_record(rng), _random_record(rng), _random_record(rng)
        assert merge(a, b) == merge(b, a)
        assert merge(merge(a, b), c) == merge(a, merge(b, c))
        assert merge(a, a) == a


def test_the_newest_observation_naming_a_priority_wins_in_any_order() -> None:
    """An event that shows the job's status but no priority, an older one naming priority 7
    and one of the same second naming 2 (the priority was updated while it waited): the job's
    priority is 2 whichever order they are merged in; the status is the newest event's."""
    no_priority = JobRecord(queue="q", jobId="j", status="RUNNABLE", statusAt=10)
    older = JobRecord(queue="q", jobId="j", status="RUNNABLE", statusAt=5, priority=7)
    updated = JobRecord(queue="q", jobId="j", status="RUNNABLE", statusAt=10, priority=2)
    orders = [
        merge(merge(no_priority, older), updated),
        merge(no_priority, merge(older, updated)),
        merge(merge(no_priority, updated), older),
        merge(merge(older, updated), no_priority),
    ]
    assert {r.priority for r in orders} == {2}
    assert {r.priorityAt for r in orders} == {10}
    assert all(r == orders[0] for r in orders)


def test_an_item_stored_before_priority_was_dated_reads_its_status_time() -> None:
    """A stored item without `priorityAt` dates its priority by its status observation: a
    replay of that observation changes nothing but the date, and an older answer naming
    another priority does not override it."""
    item = to_item(JobRecord(queue="q", jobId="j", status="RUNNING", statusAt=100, priority=3), 90)
    del item["priorityAt"]
    stored = from_item(item)
    assert (stored.priority, stored.priorityAt) == (3, 100)
    older = JobRecord(queue="q", jobId="j", status="RUNNABLE", statusAt=50, priority=9)
    assert merge(stored, older).priority == 3
    described = JobRecord(queue="q", jobId="j", priority=9, priorityAt=0)
    assert merge(stored, described) == stored


def test_an_item_stored_before_status_preempted_merges_one_way_in_any_order() -> None:
    """A job open when the controller was upgraded: its stored item has no statusPreempted.
    A describe answer (no status, more preempted attempts) and a RUNNABLE event of the same
    second then give the same record whichever comes first; a replay of its own event still
    writes nothing."""
    running = JobRecord(
        queue="q", jobId="j", status="RUNNING", statusAt=100, statusPreempted=1,
        preemptedAttempts=1, priority=0,
    )  # fmt: skip
    item = to_item(running, 90)
    del item["statusPreempted"]
    stored = from_item(item)
    described = JobRecord(queue="q", jobId="j", preemptedAttempts=3)
    runnable = JobRecord(
        queue="q", jobId="j", status="RUNNABLE", statusAt=100, statusPreempted=2,
        preemptedAttempts=2, priority=0,
    )  # fmt: skip
    assert merge(merge(stored, described), runnable) == merge(merge(stored, runnable), described)
    assert merge(stored, running) == stored


def test_a_record_survives_the_table_round_trip() -> None:
    job = _fold(_observations(lifecycle("job-a")))
    item = json.loads(json.dumps(to_item(job, 90)))
    assert item["endAt"] == ms(at(4300))
    assert item["expiresAt"] == ms(at(4300)) // 1000 + 90 * 86400
    assert from_item(item) == job


class _MemoryStore:
    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], JobRecord] = {}
        self.writes = 0

    def record(
        self,
        observation: JobRecord,
        complete: Callable[[JobRecord], JobRecord] | None = None,
    ) -> bool:
        key = (observation.queue, observation.jobId)
        new = merge(self.jobs.get(key), observation)
        if complete is not None:
            new = complete(new)
        if new == self.jobs.get(key):
            return False
        self.jobs[key], self.writes = new, self.writes + 1
        return True


def test_a_batch_writes_each_job_once_and_a_redelivery_writes_nothing() -> None:
    events = lifecycle("job-a") + lifecycle("job-b", share="team-b")
    store = _MemoryStore()
    response, outcome = handle_history_batch(sqs(*events), store)
    assert response == {"batchItemFailures": []}
    assert (outcome.written, store.writes) == (2, 2)
    response, outcome = handle_history_batch(sqs(*reversed(events)), store)
    assert (outcome.written, outcome.unchanged, store.writes) == (0, 2, 2)
    assert store.jobs[("ml-training", "job-b")].share == "team-b"


def test_a_malformed_record_fails_alone() -> None:
    store = _MemoryStore()
    batch = sqs(("bad", "{not json"), *lifecycle("job-a")[:1])
    response, outcome = handle_history_batch(batch, store)
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad"}]}
    assert outcome.written == 1


def _documented(events: list[dict]) -> list[dict]:
    """The events with only the fields the user guide's examples show (variant
    event_detail_fields=documented_example)."""
    from quota_local.emulator.scheduler import DOCUMENTED_EVENT_FIELDS

    return [
        dict(e, detail={k: v for k, v in e["detail"].items() if k in DOCUMENTED_EVENT_FIELDS})
        for e in events
    ]


def test_events_without_share_or_usage_are_completed_by_one_describe_per_job() -> None:
    full = lifecycle("job-a", count=2)
    described: list[str] = []
    answer = full[-1]["detail"]  # DescribeServiceJob once the job ended: the whole job

    def describe(job_id: str) -> dict:
        described.append(job_id)
        return answer

    store = _MemoryStore()
    response, _ = handle_history_batch(sqs(*_documented(full)), store, describe=describe)

    assert response == {"batchItemFailures": []}
    assert described == ["job-a"]
    job = store.jobs[("ml-training", "job-a")]
    expected = _fold(_observations(full))
    assert (job.share, job.instanceType, job.count) == ("team-a", "ml.g5.xlarge", 2)
    # The preempted attempt is known from the answer's preemptionSummary.
    assert [a.cause for a in job.ordered_attempts()] == ["CAPACITY_RECLAIM", None]
    assert job.attempts == expected.attempts
    assert (job.status, job.preemptedAttempts) == (expected.status, expected.preemptedAttempts)


def test_full_events_need_no_describe_and_a_refused_one_still_records() -> None:
    def never(job_id: str) -> dict:
        raise AssertionError(f"described {job_id}")

    store = _MemoryStore()
    handle_history_batch(sqs(*lifecycle("job-a")), store, describe=never)
    assert store.jobs[("ml-training", "job-a")].share == "team-a"

    # The job is gone (Batch refuses the read): recorded with what the events say.
    _, outcome = handle_history_batch(
        sqs(*_documented(lifecycle("job-b"))), store, describe=lambda _: None
    )
    assert outcome.written == 1
    assert store.jobs[("ml-training", "job-b")].share is None


def test_a_describe_that_is_throttled_retries_the_jobs_events() -> None:
    from quota_controller.ports import RetryableError

    def throttled(job_id: str) -> dict:
        raise RetryableError("Rate exceeded")

    store = _MemoryStore()
    events = _documented(lifecycle("job-a"))
    response, outcome = handle_history_batch(sqs(*events), store, describe=throttled)
    assert outcome.failed == ["job-a"]
    assert len(response["batchItemFailures"]) == len(events)
    # What the events say is kept; the retry reads the job again and completes it.
    assert store.jobs[("ml-training", "job-a")].share is None
    full = lifecycle("job-a")[-1]["detail"]
    response, outcome = handle_history_batch(sqs(*events), store, describe=lambda _: full)
    assert response == {"batchItemFailures": []}
    assert store.jobs[("ml-training", "job-a")].share == "team-a"


def test_a_known_job_is_described_again_only_where_an_event_may_hide_a_preemption() -> None:
    described: list[str] = []
    full = lifecycle("job-a")

    def describe(job_id: str) -> dict:
        described.append(job_id)
        return full[-1]["detail"]

    store = _MemoryStore()
    events = _documented(full)
    handle_history_batch(sqs(*events[:1]), store, describe=describe)
    assert described == ["job-a"]  # its share and usage: no event carries them
    # SCHEDULED, RUNNING: the stored record knows the job, nothing can be hidden.
    handle_history_batch(sqs(*events[1:3]), store, describe=describe)
    assert described == ["job-a"]
    # Back to RUNNABLE after an attempt, without preemptionSummary: read to learn why.
    handle_history_batch(sqs(*events[3:4]), store, describe=describe)
    assert described == ["job-a", "job-a"]
    job = store.jobs[("ml-training", "job-a")]
    assert [a.cause for a in job.ordered_attempts() if a.preempted] == ["CAPACITY_RECLAIM"]
    # With the field present (a describe-like event) nothing is read, whatever the status.
    handle_history_batch(sqs(*full), store, describe=describe)
    assert described == ["job-a", "job-a"]
