"""quotactl report's figures and workload export on a small hand-computed history.

Guide layout (3 x ml.g5.xlarge; team-a and team-b LEND_AND_BORROW, team-c LEND, 1 each), a
10-hour window from T:
- a1 (team-a, 2 instances) runs 0-1 h: 1 own, 1 borrowed; team-b and team-c lend 0.5 each.
- b1 (team-b) waits 120 s, runs 2 h+120 s to 3 h and is preempted (reclaim), waits again,
  runs 4-5 h.
- c1 (team-c) waits 600 s, runs 3 h+600 s to 4 h. d1 (team-c) is stuck, never runs.
- old (team-a) ended before the window: not counted.
"""

from __future__ import annotations

import pytest
from alert_builders import RECLAIM
from builders import DocBuilder, g5, guide_layout
from history_builders import at, ms, record

from quota_controller.domain.config.model import QuotaDocument
from quota_controller.domain.history import AttemptRecord
from quota_local.history_report import (
    ReportError,
    build_report,
    job_waits,
    percentile,
    queue_lifetimes,
)
from quota_local.scheduling import CAPACITY_LIMIT_PREEMPTION, IN_SHARE_PREEMPTION
from quota_local.workload_export import remedies, workload

H = 3600
DOC = QuotaDocument.model_validate(guide_layout().build())
SINCE, UNTIL = ms(at(0)), ms(at(10 * H))
RECORDS = [
    record("a1").share("team-a").type("ml.g5.xlarge", 2).submitted(0, 0).ran(0, H)
    .status("SUCCEEDED", H).build(),
    record("b1").share("team-b").submitted(2 * H, 2 * H + 120)
    .ran(2 * H + 120, 3 * H, preempted=RECLAIM).ran(4 * H, 5 * H)
    .status("SUCCEEDED", 5 * H).build(),
    record("c1").share("team-c").submitted(3 * H, 3 * H + 600).ran(3 * H + 600, 4 * H)
    .status("SUCCEEDED", 4 * H).build(),
    record("d1").share("team-c").submitted(6 * H)
    .status("RUNNABLE", 6 * H, "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - x")
    .stuck("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED").build(),
    record("old").share("team-a").submitted(-3 * H, -3 * H).ran(-3 * H, -2 * H)
    .status("SUCCEEDED", -2 * H).build(),
]  # fmt: skip


def _by_share(prices: dict[str, float] | None = None) -> dict[str, dict]:
    report = build_report("ml-training", RECORDS, DOC, SINCE, UNTIL, prices)
    return {f.share: f.rounded() for f in [*report.shares, report.total]}


def test_usage_own_borrowed_lent_and_idle_per_share() -> None:
    figures = _by_share()
    got = {
        s: (f["jobs"], f["quotaHours"], f["ownHours"], f["borrowedHours"], f["lentHours"],
            f["idleHours"])
        for s, f in figures.items()
    }  # fmt: skip
    assert got == {
        "team-a": (1, 10.0, 1.0, 1.0, 0.0, 9.0),
        "team-b": (1, 10.0, 1.967, 0.0, 0.5, 7.533),
        "team-c": (2, 10.0, 0.833, 0.0, 0.5, 8.667),
        "TOTAL": (4, 30.0, 3.8, 1.0, 1.0, 25.2),
    }


def test_waits_preemptions_and_stuck_jobs() -> None:
    figures = _by_share()
    # b1 waits twice, as the simulator counts it: 120 s to its first dispatch, and 1 h from its
    # preemption at 3 h to its restart at 4 h.
    b, c, total = figures["team-b"], figures["team-c"], figures["TOTAL"]
    assert (b["waitP50Seconds"], b["waitP95Seconds"], b["waitedJobs"]) == (120, 3600, 1)
    assert (c["waitP50Seconds"], c["waitP95Seconds"]) == (600, 600)
    assert (total["waitP50Seconds"], total["waitP95Seconds"], total["waitedJobs"]) == (
        120,
        3600,
        3,
    )
    assert figures["team-b"]["preemptionsByCause"] == {"CAPACITY_RECLAIM": 1}
    assert figures["team-b"]["preemptedHours"] == 0.967
    assert figures["TOTAL"]["preemptions"] == 1
    assert figures["team-c"]["stuckJobs"] == 1
    assert figures["TOTAL"]["stuckByReason"] == {
        "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED": 1
    }


def test_a_requeued_job_waits_again_until_its_next_dispatch() -> None:
    # Scheduled at 60 s, started at 120 s: 60 s from SCHEDULED to its start. Preempted at
    # 600 s, restarted at 1000 s: dispatched again about 940 s, a wait of 340 s. The attempt
    # preempted at 2000 s before it started (no start) ends no known wait; the one after it
    # (from 2000 s to 2100 s, less 60 s) does.
    job = (
        record("r1").share("team-a").submitted(0, 60).ran(120, 600, preempted=RECLAIM)
        .ran(1000, 1500, preempted=RECLAIM).status("RUNNABLE", 2100).build()
    )  # fmt: skip
    never_started = AttemptRecord(stoppedAt=ms(at(2000)), reason=RECLAIM, preempted=True)
    last = AttemptRecord(startedAt=ms(at(2100)), stoppedAt=ms(at(3000)))
    job = job.model_copy(update={"attempts": {**job.attempts, "a3": never_started, "a4": last}})
    assert [seconds for _, seconds in job_waits(job)] == [60, 340, 40]
    report = build_report("ml-training", [job], DOC, SINCE, UNTIL)
    a = next(f for f in report.shares if f.share == "team-a")
    assert (a.waitedJobs, a.waitP50Seconds, a.waitP95Seconds) == (1, 60, 340)


@pytest.mark.parametrize(
    ("reason", "cause", "undocumented"),
    [(RECLAIM, "CAPACITY_RECLAIM", 0),
     (IN_SHARE_PREEMPTION, "IN_SHARE_PRIORITY", 1),
     (CAPACITY_LIMIT_PREEMPTION, "QUOTA_REDUCTION", 1),
     ("Preempted", "UNKNOWN", 0)],
)  # fmt: skip
def test_causes_read_from_reason_texts_aws_does_not_document_are_counted_apart(
    reason: str, cause: str, undocumented: int
) -> None:
    # The emulator's in-share and limit texts are its own: a cause read from them is counted.
    preempted = (
        record("p1").share("team-a").submitted(0, 0).ran(0, H, preempted=reason)
        .status("RUNNABLE", H).build()
    )  # fmt: skip
    report = build_report("ml-training", [preempted], DOC, SINCE, UNTIL)
    figures = {f.share: f.rounded() for f in [*report.shares, report.total]}

    assert figures["team-a"]["preemptionsByCause"] == {cause: 1}
    assert figures["team-a"]["preemptionsFromUndocumentedText"] == undocumented
    assert figures["TOTAL"]["preemptionsFromUndocumentedText"] == undocumented


def test_showback_splits_cost_into_own_and_borrowed() -> None:
    figures = _by_share({"ml.g5.xlarge": 1.5})
    assert (figures["team-a"]["costOwn"], figures["team-a"]["costBorrowed"]) == (1.5, 1.5)
    assert figures["TOTAL"]["costOwn"] == pytest.approx(5.7)


def test_a_price_missing_for_a_used_type_is_named() -> None:
    with pytest.raises(ReportError, match=r"no hourly price for ml.g5.xlarge \(used by team-a"):
        build_report("ml-training", RECORDS, DOC, SINCE, UNTIL, {"ml.p4d.24xlarge": 30.0})


# team-a also holds an ml.m5.xlarge, which no job runs.
TWO_TYPES = QuotaDocument.model_validate(
    DocBuilder("ml-training")
    .env(**{"ml.g5.xlarge": 3, "ml.m5.xlarge": 1})
    .share("team-a", "LEND_AND_BORROW", 100, **{"ml.g5.xlarge": 1, "ml.m5.xlarge": 1})
    .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
    .share("team-c", "LEND", **g5(1))
    .build()
)


def test_a_priced_type_nobody_used_costs_nothing() -> None:
    # The ml.m5.xlarge needs no price, and adds no cost.
    report = build_report("ml-training", RECORDS, TWO_TYPES, SINCE, UNTIL, {"ml.g5.xlarge": 1.5})
    a = next(f for f in report.shares if f.share == "team-a")
    assert (a.costOwn, a.costBorrowed) == (1.5, 1.5)
    assert report.total.costOwn == pytest.approx(5.7)


def test_usage_is_plotted_per_share_and_instance_type() -> None:
    report = build_report("ml-training", RECORDS, TWO_TYPES, SINCE, UNTIL)
    plots = {(p.share, p.unit): p for p in report.plots}
    assert list(plots) == [
        ("team-a", "ml.g5.xlarge"),
        ("team-a", "ml.m5.xlarge"),
        ("team-b", "ml.g5.xlarge"),
        ("team-c", "ml.g5.xlarge"),
    ]
    g5_plot, m5_plot = plots["team-a", "ml.g5.xlarge"], plots["team-a", "ml.m5.xlarge"]
    # a1's two ml.g5.xlarge for the first hour: one own, one borrowed, against a quota of 1
    # (not the 2 of both types); nothing on the ml.m5.xlarge.
    assert (g5_plot.quota, g5_plot.ownHours, g5_plot.borrowedHours) == (1.0, 1.0, 1.0)
    assert g5_plot.usage[0] == 2.0
    assert (m5_plot.quota, m5_plot.ownHours, m5_plot.borrowedHours) == (1.0, 0.0, 0.0)
    assert set(m5_plot.usage) == {0.0}
    # The plots of a share add up to its figures.
    for f in report.shares:
        mine = [p for p in report.plots if p.share == f.share]
        assert sum(p.ownHours for p in mine) == pytest.approx(f.ownHours)
        assert sum(p.borrowedHours for p in mine) == pytest.approx(f.borrowedHours)


def test_quota_counts_from_the_queue_s_creation_inside_the_window() -> None:
    c1 = RECORDS[2]  # team-c, 3 h+600 s to 4 h
    lives = queue_lifetimes([(ms(at(2 * H)), "CreateJobQueue")], SINCE, UNTIL)
    report = build_report("ml-training", [c1], DOC, SINCE, UNTIL, lifetimes=lives)
    figures = {f.share: f.rounded() for f in report.shares}
    assert (figures["team-a"]["quotaHours"], figures["team-a"]["idleHours"]) == (8.0, 8.0)
    assert (figures["team-c"]["quotaHours"], figures["team-c"]["idleHours"]) == (8.0, 7.167)
    plot = next(p for p in report.plots if p.share == "team-a")
    assert (plot.quota_series[0], plot.quota_series[-1]) == (0.0, 1.0)
    assert report.quota_note() is not None
    assert "2026-03-01T02:00:00Z" in (report.quota_note() or "")
    # A creation before the window changes nothing, and is not mentioned.
    lives = queue_lifetimes([(SINCE - 1, "CreateJobQueue")], SINCE, UNTIL)
    before = build_report("ml-training", [c1], DOC, SINCE, UNTIL, lifetimes=lives)
    assert (before.shares[0].quotaHours, before.quota_note()) == (10.0, None)


def test_a_queue_deleted_and_created_again_counts_quota_in_each_life() -> None:
    """Created before the window (its record expired), deleted at 2 h, created again at 5 h:
    a1's use in the first life is team-a's own and borrowed as in any other window, never
    counted against a quota of 0; nothing counts between the lives."""
    changes = [(ms(at(2 * H)), "DeleteJobQueue"), (ms(at(5 * H)), "CreateJobQueue")]
    lives = queue_lifetimes(changes, SINCE, UNTIL)
    assert lives == [(SINCE, ms(at(2 * H))), (ms(at(5 * H)), UNTIL)]
    report = build_report("ml-training", [RECORDS[0]], DOC, SINCE, UNTIL, lifetimes=lives)
    figures = {f.share: f.rounded() for f in [*report.shares, report.total]}
    a = figures["team-a"]
    assert (a["quotaHours"], a["ownHours"], a["borrowedHours"]) == (7.0, 1.0, 1.0)
    assert figures["TOTAL"]["borrowedHours"] == figures["TOTAL"]["lentHours"] == 1.0
    assert "until 2026-03-01T02:00:00Z, from 2026-03-01T05:00:00Z" in (report.quota_note() or "")
    # create -> delete -> create inside the window: two lives, nothing before the first.
    inside = [(ms(at(H)), "CreateJobQueue"), *changes]
    assert queue_lifetimes(inside, SINCE, UNTIL) == [
        (ms(at(H)), ms(at(2 * H))),
        (ms(at(5 * H)), UNTIL),
    ]
    assert queue_lifetimes([], SINCE, UNTIL) is None


def test_a_job_running_outside_the_recorded_lives_shows_the_queue_existed() -> None:
    """Deleted at 2 h and created again at 5 h by the records, yet b1 ran 2 h+120 s to 3 h and
    4 h to 5 h: the queue existed then (a record expired or came late), so every share's quota
    counts while it ran, in the figures and in the plots alike, and the note says so."""
    changes = [(ms(at(2 * H)), "DeleteJobQueue"), (ms(at(5 * H)), "CreateJobQueue")]
    lives = queue_lifetimes(changes, SINCE, UNTIL)
    report = build_report("ml-training", [RECORDS[1]], DOC, SINCE, UNTIL, lifetimes=lives)
    figures = {f.share: f.rounded() for f in [*report.shares, report.total]}
    ran = 1 - 120 / H + 1  # its two attempts, in hours
    for share in ("team-a", "team-b", "team-c"):
        assert figures[share]["quotaHours"] == pytest.approx(7 + ran, abs=0.001)
    assert (figures["team-b"]["ownHours"], figures["team-b"]["borrowedHours"]) == (1.967, 0.0)
    step = (UNTIL - SINCE) / len(report.plots[0].quota_series)
    during, between = int((ms(at(4.5 * H)) - SINCE) / step), int((ms(at(3.5 * H)) - SINCE) / step)
    for plot in report.plots:
        assert (plot.quota_series[during], plot.quota_series[between]) == (1.0, 0.0)
    assert "outside, only while a job of it ran" in (report.quota_note() or "")


def test_a_removed_share_s_use_is_neither_own_nor_borrowed() -> None:
    """team-e is in no layout of the window: its hour is counted apart, it borrows from no
    lender, and borrowed still equals lent."""
    e1 = record("e1").share("team-e").submitted(0, 0).ran(0, H).status("SUCCEEDED", H).build()
    report = build_report("ml-training", [RECORDS[0], e1], DOC, SINCE, UNTIL, {"ml.g5.xlarge": 2})
    figures = {f.share: f.rounded() for f in [*report.shares, report.total]}
    e = figures["team-e"]
    assert (e["ownHours"], e["borrowedHours"], e["quotaUnknownHours"]) == (0.0, 0.0, 1.0)
    assert (e["costOwn"], e["costBorrowed"], e["costQuotaUnknown"]) == (0.0, 0.0, 2.0)
    total = figures["TOTAL"]
    assert total["borrowedHours"] == total["lentHours"] == 1.0
    assert "team-e 1.000 instance-hours counted apart" in (report.unknown_quota_note() or "")


def test_percentile_is_nearest_rank() -> None:
    assert percentile([0, 120, 600], 0.5) == 120
    assert percentile([5], 0.95) == 5
    assert percentile([], 0.5) is None


def test_export_needs_the_run_time_without_preempted_attempts() -> None:
    exported = workload(RECORDS, SINCE, UNTIL)
    rows = [(j.share, j.submit_time, j.count, j.run_time) for j in exported.jobs]
    assert rows == [
        ("team-a", 0, 2, 3600),
        ("team-b", 2 * H, 1, 3600),  # the second attempt, not the preempted 3480 s
        ("team-c", 3 * H, 1, 3000),
        ("team-c", 6 * H, 1, 3000),  # d1, stuck: c1's run time stands in for its own
    ]
    assert [j.run_time_basis for j in exported.jobs] == ["", "", "", "stuck:median-same-size"]
    assert exported.skipped == {}
    assert exported.stand_ins == {"stuck:median-same-size": 1}


def test_a_stuck_jobs_stand_in_is_its_shares_median_else_a_stated_default() -> None:
    big = (
        record("d2").share("team-c").type("ml.g5.xlarge", 3).submitted(7 * H)
        .status("RUNNABLE", 7 * H).stuck("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE")
        .build()
    )  # fmt: skip
    lone = (
        record("b2").share("team-b").submitted(8 * H).status("RUNNABLE", 8 * H)
        .stuck("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED").build()
    )  # fmt: skip
    waiting = record("a2").share("team-a").submitted(9 * H).status("RUNNABLE", 9 * H).build()
    running = (
        record("a3").share("team-a").submitted(9 * H).ran(9 * H, None)
        .status("RUNNING", 9 * H).build()
    )  # fmt: skip
    records = [r for r in RECORDS if r.jobName not in ("b1", "d1")]
    exported = workload([*records, big, lone, waiting, running], SINCE, UNTIL)
    stand_ins = {j.name: (j.run_time, j.run_time_basis) for j in exported.jobs if j.run_time_basis}
    assert stand_ins == {
        "d2": (3000, "stuck:median-share"),  # c1's, though it had 1 instance
        "b2": (3600, "stuck:default"),  # team-b finished nothing in the window
    }
    assert exported.skipped == {
        "still running or starting (its run time is not known yet)": 1,
        "still waiting with no stuck reason (queued behind others, never ran)": 1,
    }
    assert exported.active == 6  # "old" ended before the window
    assert remedies(exported.skipped) == [
        "1 still running or starting (its run time is not known yet): export again once they end",
        "1 still waiting with no stuck reason (queued behind others, never ran): export again "
        "once they have run",
    ]


def test_a_job_cancelled_while_stuck_is_exported_as_stuck_and_a_cancelled_one_is_not() -> None:
    """Batch named c2 stuck, then it was ended before it ever ran: it is the demand the layout
    could not serve, exported with a stand-in as a waiting stuck job is. c3, ended in line with
    no stuck reason, is left out as never having run, not as preempted."""
    cancelled = (
        record("c2").share("team-c").type("ml.g5.xlarge", 2).submitted(6 * H)
        .stuck("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED")
        .status("FAILED", 7 * H, "Terminated by user").build()
    )  # fmt: skip
    in_line = record("c3").share("team-c").submitted(6 * H).status("FAILED", 7 * H, "x").build()
    exported = workload([RECORDS[2], cancelled, in_line], SINCE, UNTIL)
    rows = {j.name: (j.run_time, j.run_time_basis) for j in exported.jobs}
    assert rows == {"c1": (3000, ""), "c2": (3000, "stuck:median-share")}
    assert exported.skipped == {
        "ended before it ever ran, with no stuck reason (cancelled while in line)": 1
    }
    assert remedies(exported.skipped) == []


def test_the_jobs_of_a_share_not_in_the_layout_are_left_out_and_counted() -> None:
    exported = workload(RECORDS, SINCE, UNTIL, shares={"team-b", "team-c"})
    assert {j.share for j in exported.jobs} == {"team-b", "team-c"}
    assert exported.skipped == {
        "share team-a is not in the queue's current layout (removed since?), which simulate "
        "and recommend replay a workload against": 1
    }


def test_a_quota_window_counts_the_layout_in_force_at_each_moment() -> None:
    from builders import DocBuilder, g5

    # A loan for the first hour: team-a holds 2 of its own (what a1 runs on), nobody lends.
    loan = QuotaDocument.model_validate(
        DocBuilder("ml-training")
        .env(**g5(4))
        .share("team-a", "LEND_AND_BORROW", 100, **g5(2))
        .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-c", "LEND", **g5(1))
        .build()
    )
    report = build_report(
        "ml-training", RECORDS, DOC, SINCE, UNTIL, layouts=[(SINCE, loan), (ms(at(H)), DOC)]
    )
    figures = {f.share: f.rounded() for f in report.shares}
    a, b, c = figures["team-a"], figures["team-b"], figures["team-c"]
    assert (a["quotaHours"], a["ownHours"], a["borrowedHours"]) == (11.0, 2.0, 0.0)
    assert (b["lentHours"], c["lentHours"]) == (0.0, 0.0)
    assert b["idleHours"] == 8.033
    # The plot's quota line follows the layouts; the label is the quota now.
    plot = next(p for p in report.plots if p.share == "team-a")
    assert (plot.quota_series[0], plot.quota_series[-1], plot.quota) == (2.0, 1.0, 1.0)
    # Without layouts the document holds throughout (the figures above).
    plain = build_report("ml-training", RECORDS, DOC, SINCE, UNTIL).plots[0]
    assert (plain.share, plain.quota_series) == ("team-a", [1.0] * len(plot.quota_series))
