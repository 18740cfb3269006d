"""The what-if simulator: workload parsing, the report's figures, comparing layouts, plots."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from builders import DocBuilder, guide_layout

from quota_controller.domain.config import QuotaDocument, validate_document
from quota_local.simulate import simulate, windowed_layout
from quota_local.simulation_plot import timeline_svg
from quota_local.workload import (
    WorkloadError,
    WorkloadJob,
    generate_workload,
    read_workload,
    write_workload,
)


def doc(builder: DocBuilder) -> QuotaDocument:
    document = validate_document(builder.build()).document
    assert document is not None
    return document


def job(t: float, share: str, count: int = 1, run: float = 3600, **kw: object) -> WorkloadJob:
    return WorkloadJob(t, share, "ml.g5.xlarge", count, run, **kw)  # type: ignore[arg-type]


def test_a_borrower_is_reclaimed_when_the_lender_submits() -> None:
    # team-a borrows team-c's idle instance; team-b uses its own; then team-c wants it back.
    workload = [job(0, "team-a", 2), job(0, "team-b", 1), job(600, "team-c", 1)]
    result = simulate(doc(guide_layout()), workload)

    a, c = result.shares["team-a"], result.shares["team-c"]
    assert a.preemptions == {"CAPACITY_RECLAIM": 1}
    assert (a.succeeded, c.succeeded) == (1, 1)
    assert a.borrowed_instance_seconds > 0
    # team-c lent its idle instance to team-a for the first ten minutes.
    assert c.lent_instance_seconds > 0
    assert max(c.waits) < 60, "the lender gets its capacity back at once"


def test_a_job_the_layout_can_never_run_is_reported_stuck() -> None:
    result = simulate(doc(guide_layout()), [job(0, "team-c", 2)])
    assert result.shares["team-c"].stuck == 1
    assert result.shares["team-c"].succeeded == 0


def test_waiting_and_utilisation_figures() -> None:
    layout = (
        DocBuilder("q").env(**{"ml.g5.xlarge": 1}).share("solo", "RESERVE", **{"ml.g5.xlarge": 1})
    )
    result = simulate(doc(layout), [job(0, "solo", run=1000), job(0, "solo", run=1000)])
    report = result.shares["solo"].as_dict()
    assert report["jobs"] == 2
    assert report["succeeded"] == 2
    assert report["wait_p95_s"] is not None
    assert report["wait_p95_s"] >= 1000, "the second job waits for the first"
    assert 0.9 <= report["utilisation"] <= 1.0


def test_in_share_priority_preemption_is_counted_by_cause() -> None:
    layout = (
        DocBuilder("q")
        .env(**{"ml.g5.xlarge": 1})
        .add(
            __import__("builders")
            .ShareBuilder("team", {"ml.g5.xlarge": 1})
            .in_share_preemption("ENABLED")
        )
    )
    result = simulate(doc(layout), [job(0, "team", priority=0), job(60, "team", priority=50)])
    assert result.shares["team"].preemptions == {"IN_SHARE_PRIORITY": 1}


def test_jobs_for_shares_not_in_the_document_are_skipped_with_a_warning() -> None:
    result = simulate(doc(guide_layout()), [job(0, "team-z")])
    assert result.warnings == ["share 'team-z' is not in the document (jobs for it are skipped)"]


def test_workload_csv_round_trip() -> None:
    jobs = generate_workload(doc(guide_layout()), 50, seed=3)
    assert read_workload(write_workload(jobs)) == jobs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("submit_time,share\n", "missing column(s) instance_type, count, run_time"),
        ("submit_time,share,instance_type,count,run_time,colour\n", "unknown column(s) 'colour'"),
        (
            "submit_time,share,instance_type,count,run_time\nsoon,a,ml.g5.xlarge,1,60\n",
            "w:2: submit_time: 'soon' is not a number",
        ),
        (
            "submit_time,share,instance_type,count,run_time\n0,a,ml.g5.xlarge,0,60\n",
            "w:2: count: must be at least 1 (got 0)",
        ),
        (
            "submit_time,share,instance_type,count,run_time\n0,,ml.g5.xlarge,1.5,60\n",
            "w:2: count: '1.5' is not a whole number",
        ),
        (
            "submit_time,share,instance_type,count,run_time,priority\n0,a,ml.g5.xlarge,1,60,10000\n",
            "w:2: priority: must be at most 9999",
        ),
        (
            "submit_time,share,instance_type,count,run_time\n0,a,ml.g5.xlarge,1,inf\n",
            "w:2: run_time: must be finite",
        ),
        (
            "submit_time,share,instance_type,count,run_time\n0,a,ml.g5.xlarge,1,1e308\n",
            "w:2: run_time: must be at most 3024000 seconds (35 days; got 1e308)",
        ),
        (
            "submit_time,share,instance_type,count,run_time\n1e12,a,ml.g5.xlarge,1,60\n",
            "w:2: submit_time: must be at most 315360000 seconds (3650 days; got 1e12)",
        ),
    ],
)
def test_workload_problems_name_line_and_column(text: str, message: str) -> None:
    with pytest.raises(WorkloadError) as err:
        read_workload(text, "w")
    assert message in str(err.value)


def test_every_problem_of_a_workload_is_reported_at_once() -> None:
    text = "submit_time,share,instance_type,count,run_time\n-1,a,ml.g5.xlarge,1,60\n0,,x,1,60\n"
    with pytest.raises(WorkloadError) as err:
        read_workload(text, "w")
    assert "w:2: submit_time" in str(err.value)
    assert "w:3: share: is required" in str(err.value)


def test_the_plot_is_an_svg_with_a_band_per_share_and_the_capacity() -> None:
    result = simulate(doc(guide_layout()), [job(0, "team-a", 2), job(600, "team-c", 1)])
    svg = timeline_svg(result, "usage <&>", capacity=3)
    assert svg.startswith("<svg")
    assert svg.count("<polygon") == 3
    assert "environment: 3" in svg
    assert "usage &lt;&amp;&gt;" in svg


# -- jobs of one instant, percentiles, refused submits -----------------------------------------


def one_instance(strategy: str = "RESERVE", in_share: str = "DISABLED") -> QuotaDocument:
    builder = DocBuilder("q").env(**{"ml.g5.xlarge": 1})
    builder.share("a", strategy, **{"ml.g5.xlarge": 1})
    raw = builder.build()
    raw["quotaShares"][0]["preemptionConfiguration"]["inSharePreemption"] = in_share
    document = validate_document(raw).document
    assert document is not None
    return document


def test_jobs_of_one_instant_go_by_priority_not_by_their_order_in_the_file() -> None:
    # Both at t=0 on one instance: the higher priority runs first (waits 0 and 1000 + 15 s of
    # the default phases), and with in-share preemption on nothing is preempted (nothing ran).
    low, high = job(0, "a", run=100, priority=0), job(0, "a", run=1000, priority=50)

    assert sorted(simulate(one_instance(), [low, high]).shares["a"].waits) == [0, 1015]
    on = simulate(one_instance(in_share="ENABLED"), [low, high])
    assert on.shares["a"].preemptions == {}


def test_an_owner_submitting_at_the_same_instant_comes_before_a_borrower() -> None:
    # team-c's own instance is not idle when team-c submits at the same instant as team-a.
    builder = DocBuilder("q").env(**{"ml.g5.xlarge": 2})
    builder.share("a", "LEND_AND_BORROW", 100, **{"ml.g5.xlarge": 1})
    builder.share("c", "LEND", **{"ml.g5.xlarge": 1})

    result = simulate(doc(builder), [job(0, "a", count=2), job(0, "c", count=1)])

    assert result.shares["a"].preemptions == {}
    assert result.shares["a"].waits == [3615]
    assert result.shares["c"].waits == [0]


def test_percentiles_are_nearest_rank() -> None:
    # 20 jobs of 100 s on one instance, no phases: waits 0, 100, ..., 1900.
    from quota_local.scheduling import Phases

    result = simulate(
        one_instance(), [job(0, "a", run=100) for _ in range(20)], phases=Phases(0, 0)
    )

    figures = result.shares["a"].as_dict()
    assert (figures["wait_p50_s"], figures["wait_p95_s"]) == (900, 1800)


def test_jobs_for_a_disabled_share_are_refused_as_batch_refuses_the_submit() -> None:
    raw = DocBuilder("q").env(**{"ml.g5.xlarge": 1}).share("a", "RESERVE", **{"ml.g5.xlarge": 1})
    built = raw.build()
    built["quotaShares"][0]["state"] = "DISABLED"
    document = validate_document(built).document
    assert document is not None

    result = simulate(document, [job(0, "a")])

    assert (result.shares["a"].jobs, result.shares["a"].stuck) == (0, 0)
    assert "share 'a' is DISABLED: it accepts no new jobs (jobs for it are skipped)" in (
        result.warnings
    )


# -- quota windows ---------------------------------------------------------------------------

WINDOW_START = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)


def windowed(builder: DocBuilder) -> dict[str, object]:
    """team-a gets a second instance from team-b between 1 h and 3 h."""
    raw = builder.build()
    raw["windows"] = [
        {
            "name": "deadline",
            "from": "2026-12-07T01:00:00Z",
            "until": "2026-12-07T03:00:00Z",
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                },
                {
                    "quotaShareName": "team-b",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
                },
            ],
        }
    ]
    return raw


G5 = "ml.g5.xlarge"
TWO_RESERVED = DocBuilder("q").env(**{G5: 3}).share("team-a", **{G5: 1}).share("team-b", **{G5: 2})


def minutes(waits: list[float]) -> list[int]:
    return sorted(round(w / 60) for w in waits)


def test_a_window_changes_the_layout_at_its_edges_as_the_reconciler_would() -> None:
    jobs = [job(0, "team-a", run=4 * 3600, name="first"), job(0, "team-a", run=4 * 3600)]
    raw = windowed(TWO_RESERVED)
    layout = windowed_layout(raw, WINDOW_START, jobs)
    assert layout is not None
    assert layout.in_force == ()
    assert [(t, names) for t, names, _ in layout.edges] == [(3600.0, ("deadline",)), (10800.0, ())]

    static = simulate(doc(TWO_RESERVED), jobs).shares["team-a"]
    scheduled_run = simulate(doc(TWO_RESERVED), jobs, windows=layout)
    scheduled = scheduled_run.shares["team-a"]
    # Static: the second job waits for the first to finish (4 h). Scheduled: it starts at the
    # window's edge (1 h), and the window's end preempts one of the two (QUOTA_REDUCTION).
    assert minutes(static.waits) == [0, 240]  # dispatch takes Batch's few seconds
    assert minutes(scheduled.waits)[:2] == [0, 60]
    assert static.preemptions == {}
    assert scheduled.preemptions == {"QUOTA_REDUCTION": 1}
    assert scheduled_run.edges == [(3600.0, ("deadline",)), (10800.0, ())]
    # Quota held: 1 instance, but 2 for the two window hours.
    horizon = scheduled_run.horizon_s
    assert scheduled.quota_instance_seconds == horizon + 2 * 3600
    assert scheduled_run.as_dict()["windowEdges"][0] == {
        "at_s": 3600.0,
        "windowsInForce": ["deadline"],
    }
    assert "windowEdges" not in simulate(doc(TWO_RESERVED), jobs).as_dict()


def test_a_document_without_windows_has_no_windowed_layout() -> None:
    assert windowed_layout(TWO_RESERVED.build(), WINDOW_START, [job(0, "team-a")]) is None


def test_edges_after_the_last_submit_still_apply_while_jobs_wait() -> None:
    # The job needs 2 instances: it can only run in the window, which opens after it is queued.
    jobs = [job(0, "team-a", count=2, run=1800)]
    run = simulate(
        doc(TWO_RESERVED), jobs, windows=windowed_layout(windowed(TWO_RESERVED), WINDOW_START, jobs)
    )
    assert run.shares["team-a"].succeeded == 1
    assert minutes(run.shares["team-a"].waits) == [60]


def test_a_run_that_ends_before_an_edge_stops_there_quota_time_included() -> None:
    jobs = [job(0, "team-a", run=1800)]
    static = simulate(doc(TWO_RESERVED), jobs)
    layout = windowed_layout(windowed(TWO_RESERVED), WINDOW_START, jobs)
    run = simulate(doc(TWO_RESERVED), jobs, windows=layout)
    assert run.edges == [], "the window opens after the last job ended"
    assert run.horizon_s == static.horizon_s
    assert (
        run.shares["team-a"].quota_instance_seconds
        == static.shares["team-a"].quota_instance_seconds
    )
