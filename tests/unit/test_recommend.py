"""Layout recommendations: the search, its objective, --keep and the refusals."""

from __future__ import annotations

import pytest
from builders import DocBuilder

from quota_controller.domain.config import QuotaDocument, validate_document
from quota_local.recommend import recommend
from quota_local.recommend_explain import explain
from quota_local.recommend_layout import document_data, layout_of
from quota_local.recommend_score import weighted_percentile
from quota_local.recommend_space import Keep, RecommendError, parse_keep
from quota_local.workload import WorkloadJob

G5 = "ml.g5.xlarge"


def doc(builder: DocBuilder) -> QuotaDocument:
    document = validate_document(builder.build()).document
    assert document is not None
    return document


def lopsided() -> QuotaDocument:
    # team-a has most of the quota and little work; team-b has the work and one instance.
    return doc(DocBuilder().env(**{G5: 4}).share("team-a", **{G5: 3}).share("team-b", **{G5: 1}))


def busy_b(n: int = 40) -> list[WorkloadJob]:
    jobs = [WorkloadJob(600.0 * k, "team-b", G5, 1, 1800.0) for k in range(n)]
    jobs += [WorkloadJob(3600.0 * k, "team-a", G5, 1, 600.0) for k in range(n // 6)]
    return jobs


def test_quota_moves_to_the_share_whose_jobs_wait() -> None:
    current = lopsided()
    result = recommend(current, busy_b(), seed=1, budget=12)

    assert result.current.wait_p95_s
    assert result.current.wait_p95_s > 3600
    best = result.best
    assert best.score < result.current.score
    assert best.wait_p95_s is not None
    assert best.wait_p95_s < result.current.wait_p95_s
    by_name = {s.name: s for s in best.layout}
    # A layout that lets team-b run: more own quota or borrowing of team-a's idle quota.
    assert by_name["team-b"].limit(G5) > 1 or by_name["team-b"].strategy == "LEND_AND_BORROW"
    # Within the environment: the own quotas add up to at most its 4 instances.
    assert sum(s.limit(G5) for s in best.layout) <= 4
    # Every changed share says why, with its figures.
    reasons = explain(result.current, best)
    assert reasons.get("team-b")


def test_the_chosen_layout_is_a_valid_document_of_the_same_queue() -> None:
    current = lopsided()
    best = recommend(current, busy_b(), seed=1, budget=6).best
    report = validate_document(document_data(current, best.layout))
    assert report.ok
    assert report.document is not None
    assert report.document.queue_name == current.queue_name
    assert layout_of(report.document) == best.layout


def test_the_same_seed_gives_the_same_recommendation() -> None:
    current = lopsided()
    first = recommend(current, busy_b(), seed=7, budget=8)
    again = recommend(current, busy_b(), seed=7, budget=8)
    assert [e.layout for e in first.ranked] == [e.layout for e in again.ranked]
    assert [e.score for e in first.ranked] == [e.score for e in again.ranked]


def test_the_current_layout_stays_when_nothing_scores_better() -> None:
    current = lopsided()
    idle = [WorkloadJob(0.0, "team-a", G5, 1, 60.0)]
    result = recommend(current, idle, seed=0, budget=4)
    assert result.best.layout == layout_of(current)


def test_keep_pins_a_strategy_and_a_minimum_quota() -> None:
    current = lopsided()
    keeps = [parse_keep("team-b.strategy"), parse_keep(f"team-a.{G5}>=2")]
    result = recommend(current, busy_b(), keeps=keeps, seed=3, budget=10)
    for evaluation in result.ranked:
        by_name = {s.name: s for s in evaluation.layout}
        assert by_name["team-b"].strategy == "RESERVE"
        assert by_name["team-a"].limit(G5) >= 2


def test_keep_a_whole_share() -> None:
    current = lopsided()
    result = recommend(current, busy_b(), keeps=[parse_keep("team-a")], seed=3, budget=6)
    kept = next(s for s in layout_of(current) if s.name == "team-a")
    assert all(kept in e.layout for e in result.ranked)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("team-a", Keep("team-a", "share", text="team-a")),
        ("team-a.strategy", Keep("team-a", "strategy", text="team-a.strategy")),
        (
            "*.strategy=LEND",
            Keep("*", "strategy", op="=", value="LEND", text="*.strategy=LEND"),
        ),
        (
            "team-a.borrowLimit=100",
            Keep("team-a", "borrowLimit", op="=", value=100, text="team-a.borrowLimit=100"),
        ),
        (
            f"team-a.{G5}>=2",
            Keep("team-a", "limit", unit=G5, op=">=", value=2, text=f"team-a.{G5}>=2"),
        ),
    ],
)
def test_keep_expressions(text: str, expected: Keep) -> None:
    assert parse_keep(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("team a", "not a keep expression"),
        ("team-a.colour", "unknown field 'colour'"),
        ("team-a.strategy=BORROW", "unknown strategy 'BORROW'"),
        ("team-a.strategy>=LEND", "kept with '='"),
        (f"team-a.{G5}>=two", "'two' is not a whole number"),
        (f"team-a.{G5}=0", "a quota is at least 1"),
        ("team-a.borrowLimit=-2", "-1 (unlimited) or more"),
    ],
)
def test_bad_keep_expressions_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(RecommendError, match="--keep") as error:
        parse_keep(text)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        ("team-z.strategy", "share 'team-z' is not in the layout"),
        ("team-a.ml.p4d.24xlarge>=1", "has no limit for ml.p4d.24xlarge"),
        (
            f"team-a.{G5}>=3",
            f"--keep 'team-a.{G5}>=3', 'team-b.{G5}>=2' cannot all hold: with team-a at least 3 "
            f"and team-b at least 2 by the keeps, the quotas of {G5} add up to at least 5, more "
            "than the service environment's 4",
        ),
        (f"team-a.{G5}>=5", f"--keep 'team-a.{G5}>=5': share 'team-a' would need {G5} of at"),
        ("team-a.borrowLimit", "has no borrowLimit"),
    ],
)
def test_keeps_that_do_not_fit_the_layout_are_refused(keep: str, message: str) -> None:
    keeps = (
        [parse_keep(keep), parse_keep(f"team-b.{G5}>=2")]
        if "add up" in message
        else [parse_keep(keep)]
    )
    with pytest.raises(RecommendError) as error:
        recommend(lopsided(), busy_b(), keeps=keeps, budget=2)
    assert message in str(error.value)


def test_a_workload_of_shares_not_in_the_layout_is_refused_by_name() -> None:
    jobs = [*busy_b(6), WorkloadJob(0.0, "team-x", G5, 1, 60.0)]
    with pytest.raises(RecommendError) as error:
        recommend(lopsided(), jobs, budget=2)
    assert "'team-x' (1 job)" in str(error.value)
    assert "team-a, team-b" in str(error.value)


def test_an_empty_workload_and_an_unknown_objective_are_refused() -> None:
    with pytest.raises(RecommendError, match="no jobs"):
        recommend(lopsided(), [], budget=2)
    with pytest.raises(RecommendError, match="--objective 'fastest': unknown objective"):
        recommend(lopsided(), busy_b(), objective="fastest", budget=2)


def test_weighted_percentile_weighs_by_instance_time() -> None:
    # One big job waited an hour; nine small ones waited nothing.
    pairs = [(3600.0, 90.0), *[(0.0, 1.0)] * 9]
    assert weighted_percentile(pairs, 0.95) == 3600.0
    assert weighted_percentile([(0.0, 1.0)] * 9 + [(3600.0, 1.0)], 0.5) == 0.0
    assert weighted_percentile([], 0.95) is None


def test_jobs_of_a_type_the_environment_lacks_are_a_warning() -> None:
    jobs = [*busy_b(6), WorkloadJob(0.0, "team-a", "ml.p4d.24xlarge", 1, 60.0)]
    result = recommend(lopsided(), jobs, budget=2)
    assert any("'ml.p4d.24xlarge'" in w and "never run" in w for w in result.warnings)


def test_with_windows_every_candidate_is_a_schedule_and_the_static_base_is_shown() -> None:
    """Every night the windows give team-a's quota to team-b: the current base is simulated
    with them and without them (static), and the chosen base keeps the windows valid."""
    from datetime import UTC, datetime

    from quota_local.recommend_score import Schedule

    document = lopsided()
    windows = [
        {
            "name": "nights",
            "every": {
                "days": ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"],
                "start": "00:00",
                "end": "06:00",
                "timeZone": "UTC",
            },
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
                },
                {
                    "quotaShareName": "team-b",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 3}],
                },
            ],
        }
    ]
    schedule = Schedule(windows, datetime(2026, 12, 7, tzinfo=UTC))
    result = recommend(document, busy_b(), budget=12, schedule=schedule)
    assert result.static is not None
    assert result.current.wait_p95_s is not None
    assert result.static.wait_p95_s is not None
    assert result.current.wait_p95_s < result.static.wait_p95_s, "the nights help team-b"
    assert all(e.invalid is None for e in result.ranked)
    chosen = {"windows": windows, **document_data(document, result.best.layout)}
    assert validate_document(chosen, schedule.start).ok
    assert recommend(document, busy_b(), budget=12, schedule=schedule) == result, "deterministic"


def test_windows_the_current_layout_fails_are_refused_by_name() -> None:
    from datetime import UTC, datetime

    from quota_local.recommend_score import Schedule

    broken = [{"name": "x", "every": {"start": "00:00", "end": "06:00", "timeZone": "UTC"}}]
    with pytest.raises(RecommendError, match=r"windows\[0\]\.every\.days"):
        recommend(
            lopsided(), busy_b(), schedule=Schedule(broken, datetime(2026, 12, 7, tzinfo=UTC))
        )


def test_keeps_that_contradict_each_other_are_refused_naming_both() -> None:
    # A whole-share keep holds the quota as it is (3); it does not undo a bound given before.
    keeps = [parse_keep(f"team-a.{G5}<=2"), parse_keep("team-a")]
    with pytest.raises(RecommendError) as error:
        recommend(lopsided(), busy_b(), keeps=keeps, budget=2)
    assert str(error.value) == (
        f"--keep 'team-a.{G5}<=2', 'team-a': share 'team-a' would need {G5} of at least 3 and "
        "at most 2: no value fits"
    )


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        pytest.param(
            "team-a.strategy=RESERVE",
            "team-a.borrowLimit=100",
            "--keep 'team-a.strategy=RESERVE', 'team-a.borrowLimit=100' cannot all hold: they "
            "keep share 'team-a''s strategy at RESERVE and at LEND_AND_BORROW (loosen a --keep)",
            id="a strategy, then a borrow limit (which needs LEND_AND_BORROW)",
        ),
        pytest.param(
            "team-a.borrowLimit=100",
            "team-a.strategy=RESERVE",
            "--keep 'team-a.borrowLimit=100', 'team-a.strategy=RESERVE' cannot all hold: they "
            "keep share 'team-a''s strategy at LEND_AND_BORROW and at RESERVE (loosen a --keep)",
            id="the same, the other way round",
        ),
        pytest.param(
            "team-a.strategy=LEND",
            "team-a.strategy=RESERVE",
            "--keep 'team-a.strategy=LEND', 'team-a.strategy=RESERVE' cannot all hold: they "
            "keep share 'team-a''s strategy at LEND and at RESERVE (loosen a --keep)",
            id="two strategies",
        ),
        pytest.param(
            "team-a.borrowLimit=50",
            "team-a.borrowLimit=400",
            "--keep 'team-a.borrowLimit=50', 'team-a.borrowLimit=400' cannot all hold: they "
            "keep share 'team-a''s borrowLimit at 50 and at 400 (loosen a --keep)",
            id="two borrow limits",
        ),
    ],
)
def test_keeps_pinning_a_strategy_or_borrow_limit_two_ways_are_refused(
    first: str, second: str, message: str
) -> None:
    keeps = [parse_keep(first), parse_keep(second)]
    with pytest.raises(RecommendError) as error:
        recommend(lopsided(), busy_b(), keeps=keeps, budget=2)
    assert str(error.value) == message


def test_keeps_pinning_a_strategy_and_its_borrow_limit_agree() -> None:
    keeps = [parse_keep("team-a.strategy=LEND_AND_BORROW"), parse_keep("team-a.borrowLimit=50")]
    result = recommend(lopsided(), busy_b(), keeps=keeps, budget=4)
    for ranked in result.ranked:
        team_a = next(s for s in ranked.layout if s.name == "team-a")
        assert (team_a.strategy, team_a.borrow_limit) == ("LEND_AND_BORROW", 50)


@pytest.mark.parametrize("seed", range(4))
def test_no_objective_strands_jobs_the_current_layout_runs(seed: int) -> None:
    """team-a borrows all day and is preempted when team-b's 2-instance jobs take their quota
    back. Lowering team-b's quota below its jobs ends every preemption (and counts no wait for
    jobs that never run): the `preempted` objective must not buy that by stranding them."""
    current = doc(
        DocBuilder()
        .env(**{G5: 6})
        .share("team-a", "LEND_AND_BORROW", -1, **{G5: 1})
        .share("team-b", "LEND", **{G5: 2})
    )
    jobs = [WorkloadJob(1800.0 * k, "team-a", G5, 1, 3600.0) for k in range(40) for _ in "xy"]
    jobs += [WorkloadJob(14400.0 * k + 900, "team-b", G5, 2, 900.0) for k in range(8)]
    result = recommend(current, jobs, objective="preempted", seed=seed, budget=16)
    assert result.current.stuck == 0
    assert result.best.stuck == 0
    assert all(e.stuck == 0 for e in result.ranked)


def test_an_unlimited_borrow_limit_reads_the_same_in_either_keep() -> None:
    for keeps in (["-1", "50"], ["50", "-1"]):
        parsed = [parse_keep(f"team-a.borrowLimit={k}") for k in keeps]
        with pytest.raises(RecommendError) as error:
            recommend(lopsided(), busy_b(), keeps=parsed, budget=2)
        assert "unlimited" in str(error.value)
        assert "-1 and" not in str(error.value)
        assert "at -1" not in str(error.value)
