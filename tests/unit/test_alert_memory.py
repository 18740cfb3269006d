"""A reconcile's alerts: each problem once while it stands, again when it comes back, and an
alert SNS did not take kept for the retry."""

from __future__ import annotations

from fakes import FakeNotifier

from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.run_status import ALERT_MEMORY
from quota_controller.domain.status_records import QueueStatus
from quota_controller.services.alert_memory import AlertMemory


def _alert(key: str) -> Alert:
    return Alert(
        kind="RECONCILE_FAILED",
        severity="warning",
        jobQueue="ml-training",
        summary=f"problem {key}",
        occurredAt="2026-12-03T12:00:00.000Z",
        dedupKey=key,
    )


def test_a_problem_alerted_before_is_not_sent_again_but_still_remembered() -> None:
    notifier = FakeNotifier()
    memory = AlertMemory(notifier, QueueStatus.parse({"alerted": ["a", "gone"]}))
    assert memory.publish(_alert("a"))
    assert memory.publish(_alert("b"))
    assert memory.publish(_alert("b"))  # twice in one run: once
    assert [a.dedupKey for a in notifier.published] == ["b"]
    # Only what this run found is remembered: "gone" was fixed, and is alerted if it returns.
    assert memory.raised == ["a", "b"]
    assert [a.dedupKey for a in memory.sent] == ["b"]


def test_a_run_that_checks_nothing_else_keeps_what_stood_before() -> None:
    memory = AlertMemory(FakeNotifier(), QueueStatus.parse({"alerted": ["share-x", "held"]}))
    memory.publish(_alert("rejected"))
    memory.keep_standing()
    assert memory.raised == ["share-x", "held", "rejected"]


def test_an_alert_sns_did_not_take_is_kept_for_the_retry_and_not_remembered() -> None:
    memory = AlertMemory(FakeNotifier(failures=1), QueueStatus.parse(None))
    assert memory.publish(_alert("a")) is False
    assert memory.unsent == ["SNS Publish: InternalError"]
    assert memory.raised == []
    assert memory.sent == []
    # The next run (the retry) sends it.
    assert memory.publish(_alert("a")) is True
    assert [a.dedupKey for a in memory.sent] == ["a"]


def test_a_run_cut_short_remembers_what_it_sent_within_the_bound() -> None:
    stored = [f"old-{n}" for n in range(ALERT_MEMORY)]
    memory = AlertMemory(FakeNotifier(), QueueStatus.parse({"alerted": stored}))
    assert (
        memory.remembered_after_cut(QueueStatus.parse({"alerted": stored})) is None
    )  # nothing new
    memory.publish(_alert("new"))
    remembered = memory.remembered_after_cut(QueueStatus.parse({"alerted": stored}))
    assert remembered is not None
    assert len(remembered) == ALERT_MEMORY
    assert remembered[-1] == "new"
    assert remembered[0] == "old-1"
