"""`quotactl lend`, `quotactl windows` and `quotactl plan --at` through the real CLI with
`--local`, against a local stack on its virtual clock (which starts months before the wall
clock: a command that dated or validated by the wall clock would refuse these loans)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DocBuilder, g5

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.config.items import plain
from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"
G5X2 = "ml.g5.2xlarge"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quotas.yaml"


def layout() -> DocBuilder:
    """team-c has two instances to lend, team-a one."""
    return (
        DocBuilder(QUEUE)
        .env(**g5(4))
        .share("team-a", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-c", "LEND", **g5(2))
    )


def limit_of(n: int) -> dict[str, Any]:
    return {"capacityUnit": G5, "maxCapacity": n}


def z(t: datetime) -> str:
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """A served local stack running `layout()`, named in this test's state file as `quotactl
    local up` names itself, so `--local` reaches it."""
    with LocalStack(server=True) as local:
        local.apply(layout().build())
        local.advance(120)
        state = {
            "endpoint": local.endpoint_url,
            "region": local.region,
            "table": local.table_name,
            "alertsQueue": local.alerts_url,
            "pid": os.getpid(),
        }
        (tmp_path / "local.json").write_text(json.dumps(state))
        monkeypatch.setenv("QUOTACTL_LOCAL_STATE", str(tmp_path / "local.json"))
        yield local


def quotactl(*argv: str) -> int:
    return main([*argv, "--local"])


def limit(stack: LocalStack, share: str) -> int:
    with stack.emulator.true_reads():
        shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    found = next(s for s in shares if s["quotaShareName"] == share)
    return int(found["capacityLimits"][0]["maxCapacity"])


def queue_item(stack: LocalStack) -> dict[str, Any]:
    item = stack.table.get_item(Key={"queue": QUEUE, "item": "QUEUE"})["Item"]
    return dict(plain(item))


def test_a_loan_lands_now_and_gives_itself_back_at_its_edge(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    start = stack.clock.now()
    until = z(start + timedelta(hours=3))
    lend = ["lend", "--from", "team-c", "--to", "team-a", f"{G5}=1", "--until", until]
    assert quotactl(*lend, "--by", "alice") == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"Lent: 1 x {G5} from team-c to team-a in job queue {QUEUE}, from {z(start)}" in printed
    assert "team-a capacityLimits: ml.g5.xlarge=2" in printed
    assert "team-c capacityLimits: ml.g5.xlarge=1" in printed
    item = queue_item(stack)
    assert (item["updatedBy"], item["updatedAt"]) == ("alice", z(start))
    [window] = item["windows"]
    assert window["name"] == f"loan-team-c-to-team-a-{start:%Y%m%dT%H%M}Z"
    assert (window["from"], window["until"]) == (z(start), until)

    stack.advance(60)  # the QUEUE item's stream record reconciles
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (2, 1)
    assert quotactl("status", QUEUE) == 0
    assert (
        f"  quota windows in force: {window['name']}; next edge {until}"
        in capsys.readouterr().out.splitlines()
    )
    stack.postpone_resync(24 * 3600)  # the reconcile's own requeue brings it back
    stack.advance(3 * 3600 - 60 - 5)
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (2, 1)
    stack.advance(60)
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (1, 2)
    assert quotactl("status", QUEUE, "-o", "json") == 0
    view = json.loads(capsys.readouterr().out)
    assert (view["windowsInForce"], view["nextWindowEdge"]) == ([], None)


def test_a_loan_from_a_later_time_and_the_windows_command(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    start = stack.clock.now()
    begin, until = z(start + timedelta(hours=1)), z(start + timedelta(hours=2))
    assert (
        quotactl(
            "lend", QUEUE, f"{G5}=1", "--from", "team-c", "--to", "team-b",
            "--from-time", begin, "--until", until, "--name", "deadline", "-o", "json",
        )
        == 0
    )  # fmt: skip
    written = json.loads(capsys.readouterr().out)
    assert written["window"]["name"] == "deadline"
    assert written["window"]["quotaShares"] == [
        {"quotaShareName": "team-c", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}]},
        {"quotaShareName": "team-b", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}]},
    ]

    assert quotactl("windows", QUEUE, "-o", "json") == 0
    view = json.loads(capsys.readouterr().out)
    assert view["at"] == z(start)
    assert view["inForce"] == []
    assert [(e["at"], e["starts"], e["ends"]) for e in view["nextEdges"]] == [
        (begin, ["deadline"], []),
        (until, [], ["deadline"]),
    ]
    first = view["nextEdges"][0]["changes"]
    assert {"quotaShareName": "team-b", "field": "capacityLimits",
            "from": [{"capacityUnit": G5, "maxCapacity": 1}],
            "to": [{"capacityUnit": G5, "maxCapacity": 2}]} in first  # fmt: skip

    stack.advance(3600)
    assert quotactl("windows", QUEUE) == 0
    text = capsys.readouterr().out
    assert f"Job queue {QUEUE} at {begin}: 1 window of 1 in force" in text
    assert "deadline" in text
    assert "one-off" in text
    assert f"  {until}: deadline ends" in text
    assert "    share team-b capacityLimits: ml.g5.xlarge=2 -> ml.g5.xlarge=1" in text


def test_a_loan_of_a_shares_only_limit_is_refused_saying_why_and_what_instead(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.apply(EXAMPLE)  # team-c has 1 x ml.g5.xlarge, its only limit
    until = z(stack.clock.now() + timedelta(hours=1))
    before = queue_item(stack)
    lend = ["lend", "--from", "team-c", "--to", "team-a", f"{G5}=1", "--until", until]
    assert quotactl(*lend) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"quotactl lend: cannot lend 1 x {G5} from team-c to team-a"), err
    assert (
        f"--from team-c: lending 1 x {G5} would leave team-c with no capacity limit while the "
        f"loan lasts (it has {G5}=1, in force at " in err
    ), err
    assert "a quota share must have 1-5 capacity limits, each of at least 1" in err
    assert (
        "instead, raise team-c's capacity limits first (`quotactl apply`): no other share has "
        "more to lend"
    ) in err
    assert "windows[0]" not in err
    assert queue_item(stack) == before


def test_a_loan_of_all_of_a_shares_only_unit_names_what_it_can_lend(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    until = z(stack.clock.now() + timedelta(hours=1))
    before = queue_item(stack)
    lend = ["lend", "--from", "team-c", "--to", "team-b", f"{G5}=2", "--until", until]
    assert quotactl(*lend) == 1
    err = capsys.readouterr().err
    assert "would leave team-c with no capacity limit while the loan lasts" in err
    assert f"instead, lend at most 1 x {G5}; or raise team-c's capacity limits first" in err
    assert queue_item(stack) == before


def test_a_loan_of_all_of_one_unit_leaves_that_limit_out_and_says_so(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    two = {G5: 2, G5X2: 1}
    stack.apply(
        DocBuilder(QUEUE)
        .env(**{G5: 4, G5X2: 2})
        .share("team-a", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-c", "LEND", **two)
        .build()
    )
    until = z(stack.clock.now() + timedelta(hours=1))
    lend = ["lend", "--from", "team-c", "--to", "team-a", f"{G5X2}=1", "--until", until]
    assert quotactl(*lend) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"  team-c capacityLimits: {G5}=2\n" in out
    assert f"  team-a capacityLimits: {G5}=1, {G5X2}=1\n" in out
    assert (
        f"note: team-c lends all its {G5X2}: its limit for {G5X2} is left out while the loan "
        "lasts (a limit's maxCapacity is at least 1), so it has none of its own"
    ) in out
    [window] = queue_item(stack)["windows"]
    assert window["quotaShares"][0] == {
        "quotaShareName": "team-c",
        "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
    }
    stack.advance(60)  # AWS Batch takes the share with one limit
    with stack.emulator.true_reads():
        shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    found = {s["quotaShareName"]: s["capacityLimits"] for s in shares}
    assert found["team-c"] == [{"capacityUnit": G5, "maxCapacity": 2}]


def test_lend_drops_the_loans_that_ended_and_keeps_other_windows(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    start = stack.clock.now()
    doc = layout().build()
    doc["windows"] = [team_b_window("maintenance", start - timedelta(hours=1), hours=1)]
    stack.apply(doc)
    first = ["lend", "--from", "team-c", "--to", "team-a", f"{G5}=1"]
    assert quotactl(*first, "--until", z(start + timedelta(hours=1))) == 0
    capsys.readouterr()
    stack.advance(2 * 3600)  # the loan ends; the reconciler gives the unit back
    assert (limit(stack, "team-a"), limit(stack, "team-c")) == (1, 2)

    later = stack.clock.now()
    until = z(later + timedelta(hours=1))
    assert quotactl(*first, "--until", until, "--dry-run") == 0
    out = capsys.readouterr().out
    ended = f"loan-team-c-to-team-a-{start:%Y%m%dT%H%M}Z"
    assert f"Ended loans would drop from item QUEUE: {ended}" in out
    assert quotactl(*first, "--until", until) == 0
    assert f"Ended loans dropped from item QUEUE: {ended}" in capsys.readouterr().out
    names = [w["name"] for w in queue_item(stack)["windows"]]
    assert names == ["maintenance", f"loan-team-c-to-team-a-{later:%Y%m%dT%H%M}Z"]


def team_b_window(name: str, start: datetime, hours: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "from": z(start),
        "until": z(start + timedelta(hours=hours)),
        "quotaShares": [{"quotaShareName": "team-b", "state": "DISABLED"}],
    }


def test_lend_at_the_limit_of_windows_names_the_windows_to_remove(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    start = stack.clock.now()
    doc = layout().build()
    doc["windows"] = [
        team_b_window("old-1", start - timedelta(hours=4)),
        team_b_window("old-2", start - timedelta(hours=2)),
        *(team_b_window(f"w{n}", start + timedelta(hours=2 * n)) for n in range(1, 49)),
    ]
    stack.apply(doc)
    before = queue_item(stack)
    until = z(start + timedelta(hours=1))
    assert quotactl("lend", "--from", "team-c", "--to", "team-a", f"{G5}=1", "--until", until) == 1
    err = capsys.readouterr().err
    assert (
        "the queue has 50 windows, the most a document may have (50), so a loan's window does "
        "not fit: remove one from the QUEUE item (`quotactl apply` a document without it); "
        "these have ended: old-1, old-2"
    ) in err, err
    assert queue_item(stack) == before


def test_the_queue_may_stand_before_between_or_after_the_options(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    until = z(stack.clock.now() + timedelta(hours=1))
    shares, units = ["--from", "team-c", "--to", "team-a"], [f"{G5}=1", "--until", until]
    for argv in (
        [QUEUE, *shares, *units],  # before the options
        [*shares, *units, QUEUE],  # after them
        [*shares, f"{G5}=1", QUEUE, "--until", until],  # the documented place
        [*shares, QUEUE, "--until", until, f"{G5}=1"],
    ):
        assert quotactl("lend", *argv, "--dry-run", "-o", "json") == 0, argv
        data = json.loads(capsys.readouterr().out)
        assert data["jobQueue"] == QUEUE
        assert data["window"]["quotaShares"][1]["capacityLimits"] == [limit_of(2)]
    assert "windows" not in queue_item(stack)

    with pytest.raises(SystemExit) as exit_:
        quotactl("lend", QUEUE, *shares, *units, "--bogus")
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        quotactl("lend", QUEUE, *shares, "--until", until, f"{G5}=x")
    assert exit_.value.code == 2
    assert "'ml.g5.xlarge=x' is not UNIT=COUNT" in capsys.readouterr().err
    assert quotactl("lend", QUEUE, *shares, *units, "q2") == 2
    assert f"more than one job queue given ({QUEUE}, q2)" in capsys.readouterr().err


BAD_LOANS: list[tuple[str, list[str], str]] = [
        ("unknown-share", ["--from", "team-x", "--to", "team-a", f"{G5}=1"],
         "--from team-x: job queue ml-training has no quota share 'team-x' (its shares: "
         "team-a, team-b, team-c)"),
        ("lender-lacks-units", ["--from", "team-a", "--to", "team-b", f"{G5}=2"],
         "--from team-a: has 1 x ml.g5.xlarge in its capacityLimits (in force at "
         "2026-03-16T19:02Z); it cannot lend 2"),
        ("lender-lacks-the-type", ["--from", "team-a", "--to", "team-b", "ml.p4d.24xlarge=1"],
         "--from team-a: has 0 x ml.p4d.24xlarge in its capacityLimits"),
        ("unknown-type", ["--from", "team-a", "--to", "team-b", "ml.nope.xlarge=1"],
         "ml.nope.xlarge: not a SageMaker training instance type"),
        ("to-itself", ["--from", "team-a", "--to", "team-a", f"{G5}=1"],
         "--from and --to both name team-a: a share cannot lend to itself"),
        ("until-in-the-past",
         ["--from", "team-c", "--to", "team-a", f"{G5}=1", "--until", "2026-03-16T18:00Z"],
         "--until 2026-03-16T18:00Z is not after now (2026-03-16T19:02Z): a loan ends in the "
         "future"),
        ("until-before-from", ["--from", "team-c", "--to", "team-a", f"{G5}=1",
          "--from-time", "2026-03-17T12:00Z", "--until", "2026-03-17T10:00Z"],
         "--until 2026-03-17T10:00Z is not after --from-time 2026-03-17T12:00Z: the loan "
         "would end before it starts"),
]  # fmt: skip


def test_bad_loans_are_refused_and_nothing_is_written(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    before = queue_item(stack)
    for case, args, says in BAD_LOANS:
        if "--until" not in args:
            args = [*args, "--until", "2026-03-17T12:00Z"]
        assert quotactl("lend", *args) == 1, case
        err = capsys.readouterr().err
        assert err.startswith("quotactl lend: cannot lend "), err
        assert says in err, err
        assert "Traceback" not in err
        assert queue_item(stack) == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([f"{G5}=one"], "'ml.g5.xlarge=one' is not UNIT=COUNT with a whole COUNT >= 1"),
        ([f"{G5}=0"], "'ml.g5.xlarge=0' is not UNIT=COUNT"),
        ([f"{G5}=1", "--until", "2026-03-17"], "'2026-03-17' has no time zone"),
        ([f"{G5}=1", "--until", "friday"], "'friday' is not an ISO-8601 time"),
    ],
)
def test_malformed_arguments_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    if "--until" not in args:
        args = [*args, "--until", "2026-03-17T12:00Z"]
    with pytest.raises(SystemExit) as exit_:
        quotactl("lend", "--from", "team-c", "--to", "team-a", *args)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_lend_without_units_or_with_two_queues_is_a_usage_error(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    lend = ["lend", "--from", "team-c", "--to", "team-a", "--until", "2026-03-17T12:00Z"]
    assert quotactl(*lend, G5) == 2
    assert "give what to lend as UNIT=COUNT, e.g. ml.g5.xlarge=1 ('ml.g5.xlarge' was read" in (
        capsys.readouterr().err
    )
    assert quotactl(*lend, f"{G5}=1", "q1", "q2") == 2
    assert "more than one job queue given (q1, q2)" in capsys.readouterr().err


def test_a_loan_never_overwrites_an_edit_made_after_it_read_the_table(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    read = DynamoConfigStore.load_partition

    def load(self: DynamoConfigStore, queue: str) -> list[dict[str, Any]]:
        result = read(self, queue)
        monkeypatch.setattr(DynamoConfigStore, "load_partition", read)
        # Bob raises team-c's limit in the console meanwhile.
        item = dict(stack.table.get_item(Key={"queue": QUEUE, "item": "SHARE#team-c"})["Item"])
        item["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 3}]
        stack.put_item(item)
        return result

    monkeypatch.setattr(DynamoConfigStore, "load_partition", load)
    before = queue_item(stack)
    until = z(stack.clock.now() + timedelta(hours=1))
    assert quotactl("lend", "--from", "team-c", "--to", "team-a", f"{G5}=1", "--until", until) == 1
    err = capsys.readouterr().err
    assert "job queue ml-training changed in the table since it was read (SHARE#team-c)" in err
    assert queue_item(stack) == before


def test_plan_at_a_moment_previews_the_layout_in_force_then(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    start = stack.clock.now()
    doc = layout().build()
    doc["windows"] = [
        {
            "name": "deadline",
            "from": z(start + timedelta(hours=1)),
            "until": z(start + timedelta(hours=2)),
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                }
            ],
        }
    ]
    path = tmp_path / "windows.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))

    assert quotactl("plan", "-f", str(path), "--at", z(start + timedelta(minutes=30))) == 0
    before = capsys.readouterr().out
    assert "0 actions" in before
    assert "(windows: none, the base layout)" in before

    inside = z(start + timedelta(minutes=90))
    assert quotactl("plan", "-f", str(path), "--at", inside, "-o", "json") == 0
    preview = json.loads(capsys.readouterr().out)
    assert (preview["at"], preview["windowsInForce"]) == (inside, ["deadline"])
    [action] = preview["actions"]
    assert (action["operation"], action["quotaShareName"], action["decision"]) == (
        "UpdateQuotaShare",
        "team-a",
        "apply",
    )

    assert quotactl("plan", "-f", str(path), "--at", inside) == 0
    text = capsys.readouterr().out
    assert f"Layout in force at {inside} (windows: deadline), against AWS Batch as it is now." in (
        text
    )


def test_a_window_ending_beyond_a_year_is_not_said_to_have_no_edge(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    start = stack.clock.now()
    whole_days = {"days": ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"], "start": "00:00"}
    always = {
        "name": "always",
        "every": {**whole_days, "end": "24:00", "timeZone": "UTC"},
        "from": z(start - timedelta(days=1)),
        "until": z(start + timedelta(days=800)),
        "quotaShares": [{"quotaShareName": "team-b", "capacityLimits": [limit_of(2)]}],
    }
    stack.apply(layout().set(windows=[always]).build())
    stack.advance(60)
    assert quotactl("status", QUEUE) == 0
    assert "  quota windows in force: always; no edge in the next 366 days" in (
        capsys.readouterr().out.splitlines()
    )
    assert quotactl("windows", QUEUE) == 0
    assert (
        "No edge in the next 366 days: the layout in force now stays at least that long."
        in capsys.readouterr().out.splitlines()
    )
