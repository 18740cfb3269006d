"""Where documents come from (YAML/JSON text, config-table items) and what a layout means.

Covers `parse_text` (positions, duplicate keys, syntax errors), the DynamoDB item layout, the
capacity arithmetic of the AWS docs, and the generated instance-type list.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from boto3.dynamodb.types import Binary
from builders import DocBuilder, ShareBuilder, guide_layout

from quota_controller.domain.capacity import ShareCapacity, share_capacities
from quota_controller.domain.config import QuotaDocument, validate_document
from quota_controller.domain.config.items import (
    document_to_items,
    is_config_key,
    items_to_document,
    plain,
    validate_items,
)
from quota_controller.domain.config.model import TOP_LEVEL_FIELDS, QuotaShareSpec
from quota_controller.domain.config.source import DocumentSyntaxError, parse_text
from quota_controller.domain.instance_types import TRAINING_INSTANCE_TYPES
from quota_controller.domain.table_keys import BOOKKEEPING_FIELDS, CONFIG_ATTRIBUTES, config_items

# The moment every table document is validated at (validate_items reads no clock).
NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quotas.yaml"
M5 = "ml.m5.xlarge"

YAML_TEXT = """\
jobQueue:
  jobQueueName: ml-training
  priority: 10
serviceEnvironment:
  capacityLimits:
    - {capacityUnit: ml.g5.xlarge, maxCapacity: 3}
quotaShares:
  - quotaShareName: team-a
    capacityLimits:
      - capacityUnit: ml.g5.xlarge
        maxCapacity: 1
    resourceSharingConfiguration: {strategy: LEND, borrowLimit: 100}
    preemptionConfiguration: {inSharePreemption: DISABLED}
"""

JSON_TEXT = """\
{
  "jobQueue": {"jobQueueName": "ml-training",
               "priority": 10},
  "serviceEnvironment": {
    "capacityLimits": [
      {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 3}
    ]
  },
  "quotaShares": []
}
"""


def where(text: str, line: int, token: str) -> tuple[int, int]:
    """The 1-based (line, column) of `token` on 1-based `line` of `text`."""
    return line, text.splitlines()[line - 1].index(token) + 1


# -- parse_text --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "line", "token"),
    [
        pytest.param(("jobQueue",), 1, "jobQueue", id="top-level-key"),
        pytest.param(("jobQueue", "priority"), 3, "priority", id="nested-key"),
        pytest.param(
            ("serviceEnvironment", "capacityLimits", 0, "maxCapacity"),
            6,
            "maxCapacity",
            id="flow-mapping-in-list",
        ),
        pytest.param(("quotaShares", 0), 8, "quotaShareName", id="list-item"),
        pytest.param(
            ("quotaShares", 0, "capacityLimits", 0, "maxCapacity"),
            11,
            "maxCapacity",
            id="block-mapping-in-list",
        ),
        pytest.param(
            ("quotaShares", 0, "resourceSharingConfiguration", "borrowLimit"),
            12,
            "borrowLimit",
            id="flow-mapping-value",
        ),
        pytest.param(
            ("quotaShares", 0, "state"),
            8,
            "quotaShareName",
            id="missing-field-falls-back-to-parent",
        ),
    ],
)
def test_yaml_positions_point_at_the_key(path: tuple[Any, ...], line: int, token: str) -> None:
    source = parse_text(YAML_TEXT)

    assert source.position(path) == where(YAML_TEXT, line, token)


def test_yaml_data_is_the_document() -> None:
    data = parse_text(YAML_TEXT).data

    assert data["jobQueue"] == {"jobQueueName": "ml-training", "priority": 10}
    assert data["quotaShares"][0]["resourceSharingConfiguration"] == {
        "strategy": "LEND",
        "borrowLimit": 100,
    }


@pytest.mark.parametrize(
    ("path", "line", "token"),
    [
        pytest.param(("jobQueue", "priority"), 3, '"priority"', id="second-line-of-flow-mapping"),
        pytest.param(
            ("serviceEnvironment", "capacityLimits", 0, "maxCapacity"),
            6,
            '"maxCapacity"',
            id="in-list",
        ),
        pytest.param(("quotaShares",), 9, '"quotaShares"', id="empty-list"),
    ],
)
def test_json_positions(path: tuple[Any, ...], line: int, token: str) -> None:
    source = parse_text(JSON_TEXT)

    assert source.data["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] == 3
    assert source.position(path) == where(JSON_TEXT, line, token)


def test_validation_problem_is_located_in_the_text() -> None:
    source = parse_text(YAML_TEXT)

    report = validate_document(source.data)

    [problem] = report.errors
    assert problem.location == "quotaShares[0].resourceSharingConfiguration.borrowLimit"
    assert source.position(problem.path) == where(YAML_TEXT, 12, "borrowLimit")


@pytest.mark.parametrize(
    ("text", "key", "first", "second"),
    [
        pytest.param("jobQueue: {}\nquotaShares: []\njobQueue: {}\n", "jobQueue", 1, 3, id="top"),
        pytest.param(
            "jobQueue:\n  jobQueueName: a\n  priority: 1\n  jobQueueName: b\n",
            "jobQueueName",
            2,
            4,
            id="nested-block",
        ),
        pytest.param(
            "quotaShares:\n  - quotaShareName: a\n    capacityLimits:\n"
            "      - {capacityUnit: ml.g5.xlarge,\n         maxCapacity: 1, maxCapacity: 2}\n",
            "maxCapacity",
            5,
            5,
            id="flow-mapping-in-list",
        ),
        pytest.param(
            '{\n  "jobQueue": {"jobQueueName": "a"},\n  "jobQueue": {"jobQueueName": "b"}\n}\n',
            "jobQueue",
            2,
            3,
            id="json",
        ),
    ],
)
def test_duplicate_keys_are_an_error_naming_both_lines(
    text: str, key: str, first: int, second: int
) -> None:
    with pytest.raises(DocumentSyntaxError) as caught:
        parse_text(text)

    error = caught.value
    assert f"key {key!r} appears twice in one mapping (first on line {first})" in error.message
    assert error.line == second
    assert str(error).startswith(f"line {second}, column {error.column}: ")


def test_equal_keys_in_different_mappings_are_fine() -> None:
    text = "a: {x: 1}\nb: {x: 2}\n"

    assert parse_text(text).data == {"a": {"x": 1}, "b": {"x": 2}}


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        pytest.param(
            "jobQueue:\n  jobQueueName: q\n  priority: [1\nserviceEnvironment: {}\n",
            4,
            19,
            "expected ',' or ']'",
            id="unclosed-flow-list",
        ),
        pytest.param("jobQueue:\n  jobQueueName: 'q\n", 3, 1, "quoted scalar", id="open-quote"),
        pytest.param("jobQueue:\n\tjobQueueName: q\n", 2, 1, "'\\t'", id="tab-indent"),
        pytest.param("a: 1\n b: 2\n", 2, 3, "mapping values are not allowed", id="bad-indent"),
        pytest.param(
            '{"jobQueue": {"priority": 1}\n', 2, 1, "expected ',' or '}'", id="json-unclosed"
        ),
        pytest.param(
            "jobQueue: {}\n---\nquotaShares: []\n",
            2,
            1,
            "expected a single document in the stream",
            id="multi-document",
        ),
    ],
)
def test_syntax_errors_have_line_and_column(
    text: str, line: int, column: int, fragment: str
) -> None:
    with pytest.raises(DocumentSyntaxError) as caught:
        parse_text(text)

    assert (caught.value.line, caught.value.column) == (line, column)
    assert fragment in caught.value.message


@pytest.mark.parametrize("text", ["", "\n\n", "# just a comment\n", "---\n"])
def test_empty_text_is_an_empty_document(text: str) -> None:
    source = parse_text(text)

    assert source.data is None
    assert [p.message for p in validate_document(source.data).errors] == ["the document is empty"]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("? [a, b]\n: 1\n", id="list-as-block-key"),
        pytest.param("{[a]: 1}\n", id="list-as-flow-key"),
        pytest.param("? {a: 1}\n: 1\n", id="mapping-as-key"),
        pytest.param("jobQueue: \x00\n", id="nul-character"),
        pytest.param("jobQueue: \x07bell\n", id="control-character"),
    ],
)
def test_unloadable_text_is_a_syntax_error_not_a_crash(text: str) -> None:
    with pytest.raises(DocumentSyntaxError):
        parse_text(text)


def test_yaml_merge_keys_work_as_in_safe_load() -> None:
    text = (
        "x-share: &share\n"
        "  resourceSharingConfiguration: {strategy: LEND}\n"
        "  preemptionConfiguration: {inSharePreemption: DISABLED}\n"
        "team-a:\n"
        "  <<: *share\n"
        "  quotaShareName: team-a\n"
    )

    data = parse_text(text).data

    assert data["team-a"] == {
        "resourceSharingConfiguration": {"strategy": "LEND"},
        "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
        "quotaShareName": "team-a",
    }


@pytest.mark.parametrize(
    ("written", "read"),
    [
        pytest.param("3", 3, id="decimal"),
        pytest.param("-1", -1, id="negative"),
        pytest.param("+4", 4, id="plus"),
        pytest.param("0", 0, id="zero"),
        pytest.param("010", "010", id="yaml11-octal-stays-text"),
        pytest.param("0o10", "0o10", id="octal"),
        pytest.param("0x1f", "0x1f", id="hex"),
        pytest.param("1:30", "1:30", id="yaml11-base-60"),
        pytest.param("1_000", "1_000", id="underscores"),
    ],
)
def test_only_plain_decimal_integers_are_numbers(written: str, read: Any) -> None:
    # YAML 1.1 reads 010 as 8 and 1:30 as 90: a limit would silently mean another number.
    assert parse_text(f"maxCapacity: {written}\n").data == {"maxCapacity": read}


def test_a_limit_written_with_a_leading_zero_is_refused_not_read_as_octal() -> None:
    text = EXAMPLE.read_text("utf-8").replace("maxCapacity: 3}", "maxCapacity: 010}", 1)

    report = validate_document(parse_text(text).data)

    assert not report.ok
    assert any("must be a whole number (got '010')" in str(p) for p in report.errors)


def test_an_alias_of_its_own_anchor_is_a_validation_error_not_a_crash() -> None:
    text = (
        "jobQueue: &a\n  jobQueueName: q\n  tags: *a\n"
        "serviceEnvironment:\n  capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 3}]\n"
    )

    parsed = parse_text(text)
    report = validate_document(parsed.data)

    assert [(p.path, p.message) for p in report.errors] == [
        (("jobQueue", "tags", "tags"), "must be text (got a mapping)")
    ]
    assert parsed.position(("jobQueue", "tags", "tags")) == (3, 3)  # at the alias


def test_nested_aliases_are_located_without_walking_every_path() -> None:
    # 10**8 paths through the aliases ("billion laughs"): each anchor is walked once.
    lines = ["x0: &x0 [a, a, a, a, a, a, a, a, a, a]"]
    lines += [f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 10) + "]" for i in range(1, 9)]

    parsed = parse_text("\n".join(lines) + "\n")

    assert len(parsed.positions) < 200
    assert parsed.position(("x8", 9, 9, 9)) == (9, 1)


# -- config-table items ------------------------------------------------------------------------


def example_raw() -> dict[str, Any]:
    return parse_text(EXAMPLE.read_text("utf-8")).data


def as_dynamodb(value: Any) -> Any:
    """What boto3's resource API returns: every number a Decimal."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: as_dynamodb(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_dynamodb(v) for v in value]
    return value


def test_items_have_one_queue_item_and_one_item_per_share() -> None:
    items = document_to_items(example_raw())

    assert [(i["queue"], i["item"]) for i in items] == [
        ("ml-training", "QUEUE"),
        ("ml-training", "SHARE#team-a"),
        ("ml-training", "SHARE#team-b"),
        ("ml-training", "SHARE#team-c"),
    ]
    assert "quotaShares" not in items[0]
    assert items[1]["capacityLimits"] == [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1}]
    assert all(is_config_key(i["item"]) for i in items)


def test_example_document_round_trips_through_items() -> None:
    raw = example_raw()

    assembled = items_to_document("ml-training", document_to_items(raw))

    assert assembled.raw == raw
    assert assembled.problems == []
    assert assembled.share_items == ["SHARE#team-a", "SHARE#team-b", "SHARE#team-c"]


def test_decimal_numbers_from_dynamodb_become_ints() -> None:
    raw = example_raw()
    items = as_dynamodb(document_to_items(raw))
    assert isinstance(items[1]["capacityLimits"][0]["maxCapacity"], Decimal)

    assembled, report = validate_items("ml-training", items, NOW)

    assert assembled.raw == raw
    max_capacity = assembled.raw["quotaShares"][0]["capacityLimits"][0]["maxCapacity"]
    assert type(max_capacity) is int
    assert report.ok
    assert report.document is not None
    assert report.document.jobQueue.priority == 10


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("3"), 3),
        (Decimal("3.0"), 3),
        (Decimal("-1"), -1),
        (Decimal("1.5"), 1.5),
        ({"a": [Decimal("2")]}, {"a": [2]}),
        ({"b", "a"}, ["a", "b"]),
        (Binary(b"x"), b"x"),
        ({Binary(b"b"), Binary(b"a")}, [b"a", b"b"]),  # Binary has no order of its own
        (True, True),
        ("text", "text"),
    ],
)
def test_plain(value: Any, expected: Any) -> None:
    result = plain(value)

    assert result == expected
    assert type(result) is type(expected)


def test_a_binary_set_typed_in_the_console_is_an_error_of_that_share() -> None:
    items = document_to_items(guide_layout().build())
    items[1]["tags"] = {Binary(b"a"), Binary(b"b")}
    items[2]["quotaShareName"] = Binary(b"team-b")

    assembled, report = validate_items("ml-training", items, NOW)

    problems = [assembled.describe(p) for p in report.errors]
    assert "item SHARE#team-a: tags: must be a mapping of fields (got a list)" in problems
    assert "item SHARE#team-b: quotaShareName: must be text (got binary data)" in problems
    assert not report.queue_wide_errors


def test_config_attributes_name_every_field_a_config_item_holds() -> None:
    fields = {*TOP_LEVEL_FIELDS, *QuotaShareSpec.model_fields, *BOOKKEEPING_FIELDS}

    assert set(CONFIG_ATTRIBUTES) == fields


def test_fractional_decimal_stays_float_and_is_rejected() -> None:
    items = as_dynamodb(document_to_items(example_raw()))
    items[1]["capacityLimits"][0]["maxCapacity"] = Decimal("1.5")

    assembled, report = validate_items("ml-training", items, NOW)

    [problem] = report.errors
    assert problem.location == "quotaShares[0].capacityLimits[0].maxCapacity"
    assert (problem.share, problem.share_index) == ("team-a", 0)
    assert assembled.describe(problem) == (
        "item SHARE#team-a: capacityLimits[0].maxCapacity: must be a whole number (got 1.5)"
    )
    assert [s.quotaShareName for s in report.shares] == ["team-b", "team-c"]


def test_bookkeeping_attributes_are_not_config() -> None:
    stamp = {"updatedBy": "alice", "updatedAt": "2025-01-01T00:00:00Z"}
    items = document_to_items(example_raw(), bookkeeping=stamp)
    assert items[0]["updatedBy"] == "alice"

    assembled, report = validate_items("ml-training", items, NOW)

    assert report.ok, [str(p) for p in report.errors]
    assert assembled.raw == example_raw()
    assert assembled.bookkeeping["QUEUE"] == stamp
    assert assembled.bookkeeping["SHARE#team-b"] == stamp


def test_controller_items_are_ignored() -> None:
    items = [
        *document_to_items(example_raw()),
        {"queue": "ml-training", "item": "STATUS#team-a", "phase": "Converged", "x": Decimal(1)},
        {"queue": "ml-training", "item": "CHANGE#2025-01-01T00:00:00Z", "diff": ["whatever"]},
    ]

    assembled, report = validate_items("ml-training", items, NOW)

    assert report.ok, [str(p) for p in report.errors]
    assert assembled.share_items == ["SHARE#team-a", "SHARE#team-b", "SHARE#team-c"]
    assert not is_config_key("STATUS#team-a")
    assert not is_config_key("CHANGE#1")


@pytest.mark.parametrize("sort_key", ["SHAER#team-d", "SHARE#", "queue", "STATUS"])
def test_unknown_sort_key_is_a_queue_wide_error(sort_key: str) -> None:
    items = [*document_to_items(example_raw()), {"queue": "ml-training", "item": sort_key}]

    assembled, report = validate_items("ml-training", items, NOW)

    assert not report.ok
    [problem] = report.queue_wide_errors
    assert f"item {sort_key!r} of queue 'ml-training' is neither 'QUEUE' nor" in problem.message
    assert assembled.describe(problem) == problem.message
    assert report.document is None


def test_share_items_without_a_queue_item_are_a_queue_wide_error() -> None:
    items = document_to_items(example_raw())[1:]

    assembled, report = validate_items("ml-training", items, NOW)

    assert assembled.raw is None
    assert not assembled.removed
    [problem] = report.queue_wide_errors
    assert "has share items (SHARE#team-a, SHARE#team-b, SHARE#team-c) but no QUEUE item" in (
        problem.message
    )
    assert report.shares == []
    assert report.document is None


def test_no_items_means_the_queue_is_removed() -> None:
    assembled, report = validate_items("ml-training", [], NOW)

    assert assembled.removed
    assert assembled.raw is None
    assert report.errors == []


def test_only_controller_items_means_removed() -> None:
    assembled, _ = validate_items(
        "ml-training", [{"queue": "ml-training", "item": "STATUS#team-a"}], NOW
    )

    assert assembled.removed


def test_share_name_mismatch_is_an_error_on_that_share_only() -> None:
    items = document_to_items(example_raw())
    items[2]["quotaShareName"] = "team-x"

    assembled, report = validate_items("ml-training", items, NOW)

    assert report.queue_wide_errors == []
    mismatch = [p for p in report.errors if "does not match" in p.message]
    assert len(mismatch) == 1
    assert (mismatch[0].location, mismatch[0].share_index) == ("quotaShares[1].quotaShareName", 1)
    assert assembled.describe(mismatch[0]).startswith(
        "item SHARE#team-b: quotaShareName: 'team-x' does not match the item's key"
    )
    assert [s.quotaShareName for s in report.shares] == ["team-a", "team-c"]


def test_a_share_item_naming_another_share_concerns_that_item_only() -> None:
    """SHARE#team-x saying quotaShareName team-a: only team-x is wrong; team-a stays valid
    (no "used more than once" error on team-a's own item)."""
    items = document_to_items(example_raw())
    items.append({**items[2], "item": "SHARE#team-x", "quotaShareName": "team-a"})

    assembled, report = validate_items("ml-training", items, NOW)

    assert report.queue_wide_errors == []
    assert {p.share for p in report.errors} == {"team-x"}
    [problem] = report.errors
    assert assembled.describe(problem).startswith(
        "item SHARE#team-x: quotaShareName: 'team-a' does not match the item's key"
    )
    assert [s.quotaShareName for s in report.shares] == ["team-a", "team-b", "team-c"]


def test_share_name_may_be_left_out_of_the_item() -> None:
    items = document_to_items(example_raw())
    del items[1]["quotaShareName"]

    _, report = validate_items("ml-training", items, NOW)

    assert report.ok
    assert [s.quotaShareName for s in report.shares] == ["team-a", "team-b", "team-c"]


def test_job_queue_name_mismatch_is_queue_wide() -> None:
    items = document_to_items(example_raw())
    items[0]["jobQueue"] = {**items[0]["jobQueue"], "jobQueueName": "other"}

    assembled, report = validate_items("ml-training", items, NOW)

    [problem] = report.queue_wide_errors
    assert problem.location == "jobQueue.jobQueueName"
    assert assembled.describe(problem).startswith(
        "item QUEUE: jobQueue.jobQueueName: 'other' does not match the item's key "
        "queue='ml-training'"
    )
    assert report.document is None


def test_describe_queue_item_problem() -> None:
    items = document_to_items(example_raw())
    items[0]["jobQueue"] = {**items[0]["jobQueue"], "priority": 1001}

    assembled, report = validate_items("ml-training", items, NOW)

    [problem] = report.errors
    assert assembled.describe(problem) == (
        "item QUEUE: jobQueue.priority: must be at most 1000 (got 1001)"
    )
    assert len(report.shares) == 3


# -- share_capacities (the worked examples of the AWS docs) ------------------------------------


def capacities(doc: DocBuilder) -> dict[tuple[str, str], ShareCapacity]:
    report = validate_document(doc.build())
    document = report.document
    assert isinstance(document, QuotaDocument), [str(p) for p in report.errors]
    return {(c.share, c.unit): c for c in share_capacities(document)}


def test_borrow_limit_100_doubles_the_largest_job() -> None:
    # Docs: a share of 2 x ml.m5.xlarge with borrowLimit 100 runs jobs of at most 4 instances.
    doc = (
        DocBuilder()
        .env(**{M5: 20})
        .share("team-a", "LEND_AND_BORROW", 100, **{M5: 2})
        .share("team-b", "LEND", **{M5: 10})
    )

    team_a = capacities(doc)["team-a", M5]

    assert (team_a.quota, team_a.borrow_limit, team_a.max_borrow) == (2, 100, 2)
    assert team_a.largest_job == 4


def test_two_borrowers_with_borrow_limit_200_cannot_run_a_10_instance_job() -> None:
    # Docs: two LEND_AND_BORROW shares of 4 x ml.m5.xlarge, borrowLimit 200: a 10-instance job
    # in one exceeds the 8 available (own 4 + 4 borrowed from the other).
    doc = (
        DocBuilder()
        .env(**{M5: 8})
        .share("team-a", "LEND_AND_BORROW", 200, **{M5: 4})
        .share("team-b", "LEND_AND_BORROW", 200, **{M5: 4})
    )

    result = capacities(doc)

    for name in ("team-a", "team-b"):
        assert result[name, M5].max_borrow == 4
        assert result[name, M5].largest_job == 8
    assert result["team-a", M5].largest_job < 10


@pytest.mark.parametrize("strategy", ["RESERVE", "LEND"])
def test_reserve_and_lend_never_borrow(strategy: str) -> None:
    doc = (
        DocBuilder()
        .env(**{M5: 10})
        .share("team-a", strategy, **{M5: 2})
        .share("team-b", "LEND", **{M5: 8})
    )

    team_a = capacities(doc)["team-a", M5]

    assert (team_a.borrow_limit, team_a.max_borrow, team_a.largest_job) == (None, 0, 2)
    assert team_a.lends is (strategy == "LEND")


def test_unlimited_borrowing_is_bounded_by_what_others_lend() -> None:
    doc = (
        DocBuilder()
        .env(**{M5: 10})
        .share("team-a", "LEND_AND_BORROW", -1, **{M5: 2})
        .share("team-b", "LEND", **{M5: 3})
        .share("team-c", "RESERVE", **{M5: 5})
    )

    team_a = capacities(doc)["team-a", M5]

    assert team_a.borrow_limit == -1
    assert team_a.max_borrow == 3
    assert team_a.largest_job == 5


def test_unlimited_borrowing_is_bounded_by_the_environment() -> None:
    doc = (
        DocBuilder()
        .env(**{M5: 4})
        .share("team-a", "LEND_AND_BORROW", **{M5: 2})
        .share("team-b", "LEND", **{M5: 10})
    )

    team_a = capacities(doc)["team-a", M5]

    assert team_a.borrow_limit == -1  # omitted borrowLimit means unlimited
    assert team_a.largest_job == 4


def test_disabled_shares_lend_nothing() -> None:
    doc = (
        DocBuilder()
        .env(**{M5: 10})
        .share("team-a", "LEND_AND_BORROW", -1, **{M5: 2})
        .add(ShareBuilder("team-b", {M5: 3}).strategy("LEND").set(state="DISABLED"))
    )

    assert capacities(doc)["team-a", M5].largest_job == 2


def test_guide_layout_capacities() -> None:
    result = capacities(guide_layout())

    assert [(c.share, c.max_borrow, c.largest_job, c.lends) for c in result.values()] == [
        ("team-a", 1, 2, True),
        ("team-b", 1, 2, True),
        ("team-c", 0, 1, True),
    ]


# -- the generated instance-type list ----------------------------------------------------------


def test_instance_types_equal_the_installed_botocore_enum() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    enum = set(model.shape_for("TrainingInstanceType").enum)

    missing = sorted(enum - TRAINING_INSTANCE_TYPES)
    extra = sorted(TRAINING_INSTANCE_TYPES - enum)
    assert (missing, extra) == ([], []), "run `make instance-types`"
    assert "NUM_INSTANCES" not in TRAINING_INSTANCE_TYPES
    assert all(t.startswith("ml.") for t in TRAINING_INSTANCE_TYPES)


@pytest.mark.parametrize(
    ("key", "config"),
    [
        ("QUEUE", True),
        ("SHARE#team-a", True),
        # A stray key is config: the validator reports it instead of it hiding a share.
        ("SHARE-team-a", True),
        ("STATUS#QUEUE", False),
        ("STATUS#SHARE#team-a", False),
        ("CHANGE#2026-01-05T09:00:00.000Z#0001", False),
        ("LOCK#RECONCILE", False),
    ],
)
def test_every_item_the_controller_did_not_write_is_config(key: str, config: bool) -> None:
    items = [{"queue": "q", "item": key}]
    assert config_items(items) == (items if config else [])
