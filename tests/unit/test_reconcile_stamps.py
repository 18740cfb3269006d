"""Two runs of one queue whose clock reads the same millisecond keep each other's change
records (they are keyed by the run's stamp): `make soak` lost a lender's deletion so, and the
preemption it caused was alerted as a reclaim."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from builders import guide_layout
from fakes import FakeBatch, FakeClock, FakeNotifier, FakeStore

from quota_controller.domain.change_record import ChangeRecord, run_time
from quota_controller.services.reconcile import Deps, reconcile

QUEUE = "ml-training"


def _converged() -> tuple[FakeStore, FakeBatch, FakeClock, Deps, dict[str, Any]]:
    """The guide layout reconciled on the port fakes until it converges."""
    store, batch, clock = FakeStore(), FakeBatch(), FakeClock()
    deps = Deps(store, batch, FakeNotifier(), clock)
    doc = guide_layout().build()
    store.put_document(doc)
    for _ in range(30):
        converged = reconcile(QUEUE, deps).outcome == "converged"
        batch.settle()
        clock.advance(30)
        if converged:
            break
    return store, batch, clock, deps, doc


def test_two_runs_in_one_millisecond_keep_both_change_records() -> None:
    store, batch, _clock, deps, doc = _converged()
    before = len(store.recent_changes(QUEUE, limit=500))

    for limit in (2, 3):  # two edits, each reconciled at the same instant
        doc["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] += limit
        store.put_document(doc)
        assert [a.operation for a in reconcile(QUEUE, deps).applied] == ["UpdateServiceEnvironment"]
        batch.settle()

    records = [ChangeRecord.from_item(i) for i in store.recent_changes(QUEUE, limit=500)]
    assert len(records) == before + 2
    newest, older = records[0], records[1]
    assert older.change_id < newest.change_id
    assert (older.operation, newest.operation) == ("UpdateServiceEnvironment",) * 2
    assert older.after != newest.after  # each run's own request, neither overwritten


def test_a_run_is_stamped_after_the_last_run_that_applied() -> None:
    now = datetime(2026, 3, 16, 19, 9, 30, tzinfo=UTC)

    assert run_time(now, None) == now
    assert run_time(now, "2026-03-16T19:09:00.000Z") == now
    assert run_time(now, "2026-03-16T19:09:30.000Z").isoformat() == (
        "2026-03-16T19:09:30.001000+00:00"
    )
    assert run_time(now, "not a time") == now


def test_a_last_applied_time_ahead_of_the_clock_moves_only_the_records_stamp() -> None:
    """A status whose lastAppliedAt reads later than the clock (another host's clock ran
    ahead, or a hand edit) stamps the run's change records after it, but the run decides at
    its own clock: a window that begins later is not applied early."""
    store, _batch, clock, deps, doc = _converged()
    now = clock.now()
    begins = now + timedelta(hours=2)
    ahead = (now + timedelta(hours=2, minutes=30)).isoformat().replace("+00:00", "Z")
    doc["windows"] = [
        {
            "name": "later",
            "from": begins.isoformat().replace("+00:00", "Z"),
            "until": (begins + timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}],
                }
            ],
        }
    ]
    doc["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] += 1
    store.put_document(doc)
    status = store.item(QUEUE, "STATUS#QUEUE")
    assert status is not None
    store.put({**status, "queue": QUEUE, "lastAppliedAt": ahead})

    result = reconcile(QUEUE, deps)

    assert [a.operation for a in result.applied] == ["UpdateServiceEnvironment"]
    assert store.status(QUEUE)["STATUS#QUEUE"].get("windowsInForce", []) == []
    [record] = [ChangeRecord.from_item(i) for i in store.recent_changes(QUEUE, limit=1)]
    assert record.change_id.startswith(run_time(now, ahead).isoformat(timespec="milliseconds")[:23])
