"""Quota windows: the layout in force at any moment, edges, DST, and what bad windows get."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from builders import guide_layout

from quota_controller.domain.config.timeline import (
    edges,
    in_force,
    layout_at,
    next_edge,
    parse_windows,
)
from quota_controller.domain.config.validation import validate_document
from quota_controller.domain.config.windows import Window
from quota_controller.domain.schedule import current

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)  # a Wednesday
G5 = "ml.g5.xlarge"


def limits(n: int, unit: str = G5) -> list[dict[str, Any]]:
    return [{"capacityUnit": unit, "maxCapacity": n}]


def nights(**extra: Any) -> dict[str, Any]:
    return {
        "name": "nights",
        "every": {
            "days": ["MON", "TUE", "WED", "THU", "FRI"],
            "start": "20:00",
            "end": "08:00",
            "timeZone": "Europe/Madrid",
        },
        "quotaShares": [{"quotaShareName": "team-a", "capacityLimits": limits(1)}],
        **extra,
    }


def loan(**extra: Any) -> dict[str, Any]:
    return {
        "name": "loan",
        "from": "2026-12-03T10:00Z",
        "until": "2026-12-05T18:00Z",
        "quotaShares": [{"quotaShareName": "team-b", "capacityLimits": limits(2)}],
        **extra,
    }


def document(*windows: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(guide_layout().build())
    doc["windows"] = list(windows)
    return doc


def share_limit(doc: dict[str, Any], share: str) -> int:
    found = next(s for s in doc["quotaShares"] if s["quotaShareName"] == share)
    return int(found["capacityLimits"][0]["maxCapacity"])


def errors(doc: dict[str, Any], now: datetime = NOW) -> list[str]:
    return [str(p) for p in validate_document(doc, now).errors]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_layout_in_force_is_the_base_with_the_windows_in_force_applied() -> None:
    doc = document(nights(), loan())
    base_a, base_b = share_limit(doc, "team-a"), share_limit(doc, "team-b")

    # Wednesday 15:00 UTC = 16:00 Madrid: neither window.
    assert share_limit(layout_at(doc, NOW), "team-a") == base_a
    # Thursday 21:00 UTC = 22:00 Madrid, during the loan: both.
    both = layout_at(doc, at("2026-12-03T21:00Z"))
    assert (share_limit(both, "team-a"), share_limit(both, "team-b")) == (1, 2)
    # Saturday night: no weekday window, and the loan has given itself back.
    assert share_limit(layout_at(doc, at("2026-12-05T22:00Z")), "team-b") == base_b
    # The fields a window leaves out keep the base value; the document itself is untouched.
    share = next(s for s in both["quotaShares"] if s["quotaShareName"] == "team-a")
    base = next(s for s in doc["quotaShares"] if s["quotaShareName"] == "team-a")
    assert share["resourceSharingConfiguration"] == base["resourceSharingConfiguration"]
    assert "windows" not in both
    assert share_limit(doc, "team-a") == base_a


def test_edges_are_the_local_wall_clock_times() -> None:
    windows = parse_windows([nights(), loan()])
    found = edges(windows, NOW, at("2026-12-04T12:00Z"))
    assert found == [
        at("2026-12-02T19:00Z"),  # Wed 20:00 Madrid (UTC+1)
        at("2026-12-03T07:00Z"),  # Thu 08:00
        at("2026-12-03T10:00Z"),  # the loan starts
        at("2026-12-03T19:00Z"),
        at("2026-12-04T07:00Z"),
    ]
    assert next_edge(windows, NOW) == at("2026-12-02T19:00Z")
    # Friday night's window ends on Saturday morning.
    assert next_edge(windows, at("2026-12-05T06:00Z")) == at("2026-12-05T07:00Z")


def test_a_window_across_a_dst_change_keeps_its_wall_clock_times() -> None:
    (window,) = parse_windows([nights()])
    # Europe/Madrid leaves summer time on 2026-10-25 (Sunday) at 03:00 CEST -> 02:00 CET.
    # Friday 23 Oct: 20:00 CEST = 18:00Z; Monday 26 Oct: 20:00 CET = 19:00Z.
    span = window.occurrences(at("2026-10-23T12:00Z"), at("2026-10-27T00:00Z"))
    assert [a for a, _ in span] == [at("2026-10-23T18:00Z"), at("2026-10-26T19:00Z")]
    # The night across the spring change (Sunday 29 March 2026) is an hour shorter in UTC.
    weekly = Window.model_validate(nights(every={**nights()["every"], "days": ["SAT"]}))
    ((a, b),) = list(weekly.occurrences(at("2026-03-28T00:00Z"), at("2026-03-30T00:00Z")))
    assert (a, b) == (at("2026-03-28T19:00Z"), at("2026-03-29T06:00Z"))
    assert b - a == timedelta(hours=11)


def test_a_wall_clock_time_the_clocks_skip_is_read_with_the_offset_before_the_change() -> None:
    window = Window.model_validate(
        {
            "name": "skip",
            "every": {
                "days": ["SUN"],
                "start": "02:30",
                "end": "05:00",
                "timeZone": "Europe/Madrid",
            },
            "quotaShares": [{"quotaShareName": "team-a", "capacityLimits": limits(1)}],
        }
    )
    ((a, _),) = list(window.occurrences(at("2026-03-29T00:00Z"), at("2026-03-29T12:00Z")))
    assert a == at("2026-03-29T01:30Z")  # 02:30 CET, i.e. 03:30 CEST


def test_whole_days_touching_are_one_interval() -> None:
    window = Window.model_validate(
        nights(every={"days": ["SAT", "SUN"], "start": "00:00", "end": "24:00", "timeZone": "UTC"})
    )
    assert list(window.occurrences(at("2026-12-04T00:00Z"), at("2026-12-08T00:00Z"))) == [
        (at("2026-12-05T00:00Z"), at("2026-12-07T00:00Z"))
    ]


def test_a_one_off_window_wins_over_a_recurring_one_unless_priorities_say_otherwise() -> None:
    loan_a = loan(quotaShares=[{"quotaShareName": "team-a", "capacityLimits": limits(3)}])
    t = at("2026-12-03T21:00Z")
    assert share_limit(layout_at(document(nights(), loan_a), t), "team-a") == 3
    assert [w.name for w in in_force(parse_windows([nights(), loan_a]), t)] == ["nights", "loan"]
    ranked = nights(priority=5)
    assert share_limit(layout_at(document(ranked, loan_a), t), "team-a") == 1


def test_valid_windows_pass() -> None:
    report = validate_document(document(nights(), loan()), NOW)
    assert report.errors == []
    assert report.document is not None


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (
            loan(until="2026-12-03T09:00Z"),
            "windows[0].until: is not after from (2026-12-03T10:00Z): the window ends before it "
            "starts",
        ),
        (
            loan(until=None),
            "windows[0].until: a one-off window needs both from and until (or give every: for "
            "a recurring one)",
        ),
        (
            loan(**{"from": "2026-12-03T10:00"}),
            "windows[0].from: must be an ISO-8601 time with its zone, e.g. 2026-12-05T18:00Z or "
            "2026-12-05T19:00+01:00 (got '2026-12-03T10:00')",
        ),
        (
            nights(every={**nights()["every"], "timeZone": "Europe/Madird"}),
            "windows[0].every.timeZone: 'Europe/Madird' is not an IANA time zone (e.g. "
            "Europe/Madrid, America/New_York, UTC)",
        ),
        (
            nights(every={**nights()["every"], "end": "20:00"}),
            "windows[0].every.end: is the same time as start (20:00): the window would never be "
            "in force (for whole days use start 00:00 and end 24:00)",
        ),
        (
            nights(every={**nights()["every"], "start": "25:00"}),
            "windows[0].every.start: '25:00' is not a time of day HH:MM from 00:00 to 24:00",
        ),
        (
            nights(every={**nights()["every"], "days": ["Monday"]}),
            "windows[0].every.days[0]: must be one of MON, TUE, WED, THU, FRI, SAT or SUN "
            "(got 'Monday')",
        ),
        (
            nights(quotaShares=[{"quotaShareName": "team-z", "capacityLimits": limits(1)}]),
            "windows[0].quotaShares[0].quotaShareName: names quota share 'team-z', which the "
            "document does not have (a window changes shares, it does not add them)",
        ),
        (
            nights(quotaShares=[{"quotaShareName": "team-a"}]),
            "windows[0].quotaShares[0]: sets nothing: give capacityLimits, "
            "resourceSharingConfiguration or state",
        ),
        (
            nights(quotaShares=[]),
            "windows[0]: sets nothing: give quotaShares or serviceEnvironment",
        ),
        (
            nights(untill="2027-01-01T00:00Z"),
            "windows[0].untill: unknown field (did you mean 'until'? allowed: name, from, until, "
            "every, priority, quotaShares, serviceEnvironment, description, lentBy)",
        ),
        (
            loan(until="9999-12-31T23:59Z"),
            "windows[0].until: 9999-12-31T23:59:00+00:00 is outside the years 1970-9000 a "
            "window can name",
        ),
        (
            loan(**{"from": "0001-01-01T00:00+05:00"}),
            "windows[0].from: 0001-01-01T00:00:00+05:00 is outside the years 1970-9000 a "
            "window can name",
        ),
        (
            nights(**{"from": "9999-12-01T00:00Z"}),
            "windows[0].from: 9999-12-01T00:00:00+00:00 is outside the years 1970-9000 a "
            "window can name",
        ),
        (
            # Wednesdays only, bounded to a Monday and a Tuesday.
            nights(
                every={**nights()["every"], "days": ["WED"]},
                **{"from": "2026-12-07T00:00Z", "until": "2026-12-09T00:00Z"},
            ),
            "windows[0]: is never in force: none of its days falls between its from and until",
        ),
    ],
)
def test_a_bad_window_is_refused_naming_its_field(window: dict[str, Any], expected: str) -> None:
    assert errors(document(window)) == [expected]


def test_windows_of_equal_priority_setting_one_share_at_once_are_refused() -> None:
    weekend = nights(
        name="fridays",
        every={"days": ["FRI"], "start": "18:00", "end": "23:00", "timeZone": "Europe/Madrid"},
    )
    assert errors(document(nights(), weekend)) == [
        "windows[1]: is in force together with window 'nights' at 2026-12-04T19:00Z with the "
        "same priority (0), and both set quota share team-a: give one of them a higher priority"
    ]
    assert errors(document(nights(), dict(weekend, priority=1))) == []


def test_the_first_moment_a_combination_is_invalid_is_reported() -> None:
    # The loan alone is valid; with the nights window the environment loses the unit the
    # shares use, from the first night of the loan on.
    other = "ml.m5.xlarge"
    env_night = nights(
        quotaShares=[],
        serviceEnvironment={"capacityLimits": limits(4, other)},
    )
    found = errors(document(env_night, loan()))
    assert found
    assert found[0].startswith(
        "windows[0]: at 2026-12-02T19:00Z (windows in force: nights) the layout would be "
        "invalid: quotaShares[0].capacityLimits"
    )


def test_a_window_that_ended_is_a_warning_not_an_error() -> None:
    report = validate_document(document(loan()), at("2026-12-06T00:00Z"))
    assert report.errors == []
    assert [str(w) for w in report.warnings] == [
        "windows[0].until: ended at 2026-12-05T18:00Z; it no longer changes anything and can "
        "be removed"
    ]


def test_duplicate_window_names_are_refused() -> None:
    assert errors(
        document(loan(), loan(**{"from": "2026-12-10T00:00Z", "until": "2026-12-11T00:00Z"}))
    ) == ["windows[1].name: 'loan' is the name of an earlier window too"]


def test_the_report_is_the_layout_in_force_at_the_moment_validated() -> None:
    doc = document(nights(), loan())
    night = validate_document(doc, at("2026-12-03T21:00Z"))
    assert night.errors == []
    assert night.in_force == ("nights", "loan")
    assert night.next_edge == at("2026-12-04T07:00Z")
    by_name = {s.quotaShareName: s.capacityLimits[0].maxCapacity for s in night.shares}
    assert (by_name["team-a"], by_name["team-b"]) == (1, 2)
    day = validate_document(doc, NOW)
    assert day.in_force == ()
    assert {s.quotaShareName: s.capacityLimits[0].maxCapacity for s in day.shares} == {
        s["quotaShareName"]: s["capacityLimits"][0]["maxCapacity"] for s in doc["quotaShares"]
    }


def test_a_document_without_windows_validates_as_before() -> None:
    doc = guide_layout().build()
    report = validate_document(doc)
    assert (report.errors, report.windows, report.in_force, report.next_edge) == ([], [], (), None)


def test_a_recurring_window_past_its_until_is_a_warning_not_a_rejection() -> None:
    report = validate_document(document(nights(until="2026-11-01T00:00Z")), NOW)
    assert report.errors == []
    assert [str(w) for w in report.warnings] == [
        "windows[0].until: ended at 2026-11-01T00:00Z; it no longer changes anything and can "
        "be removed"
    ]


def test_a_window_more_than_a_year_ahead_is_checked_too() -> None:
    far = loan(
        **{"from": "2028-01-01T00:00Z", "until": "2028-01-02T00:00Z"},
        serviceEnvironment={"capacityLimits": limits(4, "ml.m5.xlarge")},
    )
    found = errors(document(far))
    assert found
    assert found[0].startswith(
        "windows[0]: at 2028-01-01T00:00Z (windows in force: loan) the layout would be invalid"
    )
    assert validate_document(document(far), NOW).warnings == []


def test_a_warning_a_windows_layout_brings_is_said_once_at_its_first_moment() -> None:
    # The guide's environment has 3 x ml.g5.xlarge: team-a at 4 on weeknights is more than it.
    report = validate_document(
        document(nights(quotaShares=[{"quotaShareName": "team-a", "capacityLimits": limits(4)}])),
        NOW,
    )
    assert report.errors == []
    said = [str(w) for w in report.warnings]
    assert said[0].startswith(
        "windows[0]: at 2026-12-02T19:00Z (windows in force: nights): "
        "quotaShares[0].capacityLimits[0].maxCapacity: 4 x ml.g5.xlarge is more than the "
        "service environment's"
    )
    assert len(said) == len(set(said)) == 2, "once each, not once per night"
    assert all(w.severity == "warning" for w in report.warnings)
    assert validate_document(document(nights()), NOW).warnings == [], "none without it"
    during = validate_document(
        document(nights(quotaShares=[{"quotaShareName": "team-a", "capacityLimits": limits(4)}])),
        at("2026-12-02T21:00Z"),
    )
    assert str(during.warnings[0]).startswith("windows[0]: now (windows in force: nights): ")


def test_a_document_with_windows_is_validated_only_at_a_moment_the_caller_gives() -> None:
    # The domain reads no clock: the reconcile, the CLI and the alert function pass theirs.
    with pytest.raises(ValueError, match="pass `now`"):
        validate_document(document(nights()))


def test_a_window_in_force_shows_its_real_ends_also_beyond_the_look_ahead() -> None:
    """`quotactl windows` says since when and until when each window in force holds: a
    recurring window in force every hour of every day has no end but its own `until` (more than
    a year away here) and no start but its `from`; without them, none; a nightly one, tonight's
    interval."""
    days = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]
    every_hour = {"days": days, "start": "00:00", "end": "24:00", "timeZone": "UTC"}
    share = [{"quotaShareName": "team-a", "capacityLimits": limits(1)}]
    always = Window.model_validate({"name": "always", "every": every_hour, "quotaShares": share})
    bounded = Window.model_validate(
        {
            "name": "bounded",
            "every": every_hour,
            "from": "2024-01-01T00:00Z",
            "until": "2028-06-01T00:00Z",
            "quotaShares": share,
        }
    )
    night = Window.model_validate(nights())
    shown = {c.window.name: (c.since, c.until) for c in current([always, bounded, night], NOW)}
    assert shown["always"] == (None, None)
    assert shown["bounded"] == (
        datetime(2024, 1, 1, tzinfo=UTC),
        datetime(2028, 6, 1, tzinfo=UTC),
    )
    late = datetime(2026, 12, 2, 21, 0, tzinfo=UTC)  # Wednesday night in Madrid (UTC+1)
    tonight = {c.window.name: (c.since, c.until) for c in current([night], late)}
    assert tonight["nights"] == (
        datetime(2026, 12, 2, 19, 0, tzinfo=UTC),
        datetime(2026, 12, 3, 7, 0, tzinfo=UTC),
    )
