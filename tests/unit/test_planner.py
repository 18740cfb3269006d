"""plan(desired, observed): which Batch requests, in which order, what waits, what conflicts.

Each table row is (what Batch reports, what the document says) -> what the controller does.
The base document is the AWS guide's layout: an environment of 3 x ml.g5.xlarge and shares
team-a (LEND_AND_BORROW 100%), team-b (LEND_AND_BORROW 100%), team-c (LEND) of one each.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import DocBuilder, ShareBuilder, g5
from planner_builders import (
    QUEUE,
    ObservedBuilder,
    converged,
    desired,
    env_arn,
    observed,
    plan_for,
    policy_arn,
    queue_arn,
    share_arn,
    share_tags,
)

from quota_controller.domain.config.fields import OWNER_TAG
from quota_controller.domain.plan_records import Plan, Reduction

G5 = "ml.g5.xlarge"
G5_2X = "ml.g5.2xlarge"
OWNER = {OWNER_TAG: QUEUE}
FIFO = {"idleResourceAssignmentStrategy": "FIFO"}
POLICY = "ml-training-quota-policy"
ENV = "ml-training-env"
STUCK = {
    "reason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
    "state": "RUNNABLE",
    "maxTimeSeconds": 3600,
    "action": "TERMINATE",
}
OVER_QUOTA = {
    "reason": "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "state": "RUNNABLE",
    "maxTimeSeconds": 7200,
    "action": "TERMINATE",
}
SHARES = ("team-a", "team-b", "team-c")
SHARES_WAIT_FOR_QUEUE = [f"quota share {s} waits for job queue {QUEUE}" for s in SHARES]
QUEUE_WAITS_FOR_ENV = f"job queue {QUEUE} waits for its service environment to be VALID"


def share(
    name: str, strategy: str = "RESERVE", borrow_limit: int | None = None, **limits: int
) -> ShareBuilder:
    """A share as DocBuilder.share writes it, to change further (preemption, state, tags)."""
    return ShareBuilder(name, limits).strategy(strategy, borrow_limit)


def guide(
    *shares: ShareBuilder,
    drop: tuple[str, ...] = (),
    env_limits: dict[str, int] | None = None,
    env: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
    queue: dict[str, Any] | None = None,
) -> DocBuilder:
    """The guide's layout with shares replaced (by name), added or dropped and sections changed."""
    doc = DocBuilder(QUEUE).env(**(env_limits or g5(3)))
    base = [
        share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
        share("team-b", "LEND_AND_BORROW", 100, **g5(1)),
        share("team-c", "LEND", **g5(1)),
    ]
    replaced = {s.raw["quotaShareName"]: s for s in shares}
    for original in base:
        name = original.raw["quotaShareName"]
        if name not in drop:
            doc.add(replaced.pop(name, original))
    for extra in replaced.values():
        doc.add(extra)
    doc.raw["serviceEnvironment"].update(env or {})
    if policy:
        doc.set(schedulingPolicy=policy)
    doc.queue(**(queue or {}))
    return doc


def steps(the_plan: Plan) -> list[str]:
    """`<operation> <resource>` per request, in order."""
    return [f"{a.operation} {a.resource}" for a in the_plan.actions]


def requests(the_plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """`(operation, params)` per request, in order: exactly what is sent to Batch."""
    return [(a.operation, dict(a.params)) for a in the_plan.actions]


def only(the_plan: Plan, operation: str) -> dict[str, Any]:
    """The params of the one request of that operation."""
    found = [dict(a.params) for a in the_plan.actions if a.operation == operation]
    assert len(found) == 1, steps(the_plan)
    return found[0]


def limits(**units: int) -> list[dict[str, Any]]:
    return [{"capacityUnit": u, "maxCapacity": n} for u, n in units.items()]


# -- dependency order, from an empty account to converged ------------------------------------


@pytest.mark.parametrize(
    ("have", "expected_steps", "expected_waits"),
    [
        pytest.param(
            observed(),
            [
                f"CreateSchedulingPolicy scheduling policy {POLICY}",
                f"CreateServiceEnvironment service environment {ENV}",
            ],
            [
                f"service environment {ENV} to be created",
                QUEUE_WAITS_FOR_ENV,
                *SHARES_WAIT_FOR_QUEUE,
            ],
            id="empty-account",
        ),
        pytest.param(
            observed().policy().env(status="CREATING", **g5(3)),
            [],
            [
                f"service environment {ENV} is CREATING",
                QUEUE_WAITS_FOR_ENV,
                *SHARES_WAIT_FOR_QUEUE,
            ],
            id="environment-creating",
        ),
        pytest.param(
            observed().policy().env(**g5(3)),
            [f"CreateJobQueue job queue {QUEUE}"],
            [f"job queue {QUEUE} to be created", *SHARES_WAIT_FOR_QUEUE],
            id="environment-valid",
        ),
        pytest.param(
            observed().env(**g5(3)),
            [
                f"CreateSchedulingPolicy scheduling policy {POLICY}",
                f"CreateJobQueue job queue {QUEUE}",
            ],
            [f"job queue {QUEUE} to be created", *SHARES_WAIT_FOR_QUEUE],
            id="policy-missing-environment-valid",
        ),
        pytest.param(
            converged(guide()).drop_share().edit_queue(status="CREATING"),
            [],
            [f"job queue {QUEUE} is CREATING", *SHARES_WAIT_FOR_QUEUE],
            id="queue-creating",
        ),
        pytest.param(
            converged(guide()).drop_share(),
            [f"CreateQuotaShare quota share {s}" for s in SHARES],
            [f"quota share {s} to be created" for s in SHARES],
            id="queue-valid",
        ),
        pytest.param(
            converged(guide()).drop_share().edit_queue(status="DELETED", state="DISABLED"),
            [f"CreateJobQueue job queue {QUEUE}"],
            [f"job queue {QUEUE} to be created", *SHARES_WAIT_FOR_QUEUE],
            id="deleted-queue-is-created-again",
        ),
        pytest.param(
            converged(guide()).edit_share("team-b", status="CREATING"),
            [],
            ["quota share team-b is CREATING"],
            id="share-creating",
        ),
        pytest.param(converged(guide()), [], [], id="converged"),
    ],
)
def test_resources_are_created_in_dependency_order(
    have: ObservedBuilder, expected_steps: list[str], expected_waits: list[str]
) -> None:
    the_plan = plan_for(desired(guide()), have)

    assert steps(the_plan) == expected_steps
    assert the_plan.wait_texts == expected_waits
    assert the_plan.conflicts == []


def test_each_wait_says_why_it_waits() -> None:
    # Creation from an empty account: the environment's create made, the queue and the
    # shares waiting for what they need first.
    kinds = {(w.resource, w.kind) for w in plan_for(desired(guide()), observed()).waits}
    assert kinds == {
        (f"service environment {ENV}", "creation"),
        (f"job queue {QUEUE}", "dependency"),
        *((f"quota share {s}", "dependency") for s in SHARES),
    }
    creating = observed().policy().env(status="CREATING", **g5(3))
    assert next(w.kind for w in plan_for(desired(guide()), creating).waits) == "transition"
    updating = converged(guide()).edit_share("team-a", status="UPDATING")
    assert [(w.kind, w.share) for w in plan_for(desired(guide()), updating).waits] == [
        ("transition", "team-a")
    ]
    removed = desired(guide(drop=("team-c",)))
    assert [w.kind for w in plan_for(removed, converged(guide())).waits] == ["disable"]


@pytest.mark.parametrize(
    ("doc", "have", "operation", "expected"),
    [
        pytest.param(
            guide(),
            observed(),
            "CreateSchedulingPolicy",
            {"name": POLICY, "quotaSharePolicy": FIFO, "tags": OWNER},
            id="policy",
        ),
        pytest.param(
            guide(policy={"name": "shared-quota", "tags": {"team": "ml"}}),
            observed(),
            "CreateSchedulingPolicy",
            {"name": "shared-quota", "quotaSharePolicy": FIFO, "tags": {"team": "ml", **OWNER}},
            id="policy-named-and-tagged",
        ),
        pytest.param(
            guide(),
            observed(),
            "CreateServiceEnvironment",
            {
                "serviceEnvironmentName": ENV,
                "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                "state": "ENABLED",
                "capacityLimits": limits(**g5(3)),
                "tags": OWNER,
            },
            id="environment",
        ),
        pytest.param(
            guide(
                env_limits={G5: 3, G5_2X: 2},
                env={"serviceEnvironmentName": "gpu-pool", "state": "DISABLED", "tags": {"c": "1"}},
            ),
            observed(),
            "CreateServiceEnvironment",
            {
                "serviceEnvironmentName": "gpu-pool",
                "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                "state": "DISABLED",
                "capacityLimits": limits(**{G5: 3, G5_2X: 2}),
                "tags": {"c": "1", **OWNER},
            },
            id="environment-named-two-units-disabled",
        ),
        pytest.param(
            guide(),
            observed().policy().env(**g5(3)),
            "CreateJobQueue",
            {
                "jobQueueName": QUEUE,
                "jobQueueType": "SAGEMAKER_TRAINING",
                "state": "ENABLED",
                "priority": 1,
                "schedulingPolicyArn": policy_arn(POLICY),
                "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": env_arn(ENV)}],
                "tags": OWNER,
            },
            id="queue-without-time-limits",
        ),
        pytest.param(
            guide(
                queue={
                    "priority": 10,
                    "state": "DISABLED",
                    "jobStateTimeLimitActions": [STUCK],
                    "tags": {"team": "ml"},
                }
            ),
            observed().policy().env(**g5(3)),
            "CreateJobQueue",
            {
                "jobQueueName": QUEUE,
                "jobQueueType": "SAGEMAKER_TRAINING",
                "state": "DISABLED",
                "priority": 10,
                "schedulingPolicyArn": policy_arn(POLICY),
                "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": env_arn(ENV)}],
                "tags": {"team": "ml", **OWNER},
                "jobStateTimeLimitActions": [STUCK],
            },
            id="queue-with-priority-state-time-limits",
        ),
    ],
)
def test_creates_carry_the_documented_params(
    doc: DocBuilder, have: ObservedBuilder, operation: str, expected: dict[str, Any]
) -> None:
    assert only(plan_for(desired(doc), have), operation) == expected


def _share_params(sharing: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {
        "quotaShareName": "team-x",
        "jobQueue": queue_arn(),
        "capacityLimits": limits(**g5(2)),
        "resourceSharingConfiguration": sharing,
        "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
        "state": "ENABLED",
        "tags": OWNER,
        **overrides,
    }


@pytest.mark.parametrize(
    ("new_share", "expected"),
    [
        pytest.param(
            share("team-x", **g5(2)),
            _share_params({"strategy": "RESERVE"}),
            id="reserve-has-no-borrow-limit",
        ),
        pytest.param(
            share("team-x", "LEND", **g5(2)),
            _share_params({"strategy": "LEND"}),
            id="lend-has-no-borrow-limit",
        ),
        pytest.param(
            share("team-x", "LEND_AND_BORROW", **g5(2)),
            _share_params({"strategy": "LEND_AND_BORROW", "borrowLimit": -1}),
            id="lend-and-borrow-unlimited-when-omitted",
        ),
        pytest.param(
            share("team-x", "LEND_AND_BORROW", 50, **g5(2)),
            _share_params({"strategy": "LEND_AND_BORROW", "borrowLimit": 50}),
            id="lend-and-borrow-limited",
        ),
        pytest.param(
            share("team-x", **g5(2))
            .in_share_preemption("ENABLED")
            .set(state="DISABLED", tags={"cost": "x"}),
            _share_params(
                {"strategy": "RESERVE"},
                preemptionConfiguration={"inSharePreemption": "ENABLED"},
                state="DISABLED",
                tags={"cost": "x", **OWNER},
            ),
            id="preemption-state-tags",
        ),
    ],
)
def test_create_quota_share_params(new_share: ShareBuilder, expected: dict[str, Any]) -> None:
    doc = guide(new_share, env_limits=g5(5))
    the_plan = plan_for(desired(doc), converged(guide(env_limits=g5(5))))

    assert requests(the_plan) == [("CreateQuotaShare", expected)]
    assert the_plan.wait_texts == ["quota share team-x to be created"]
    assert [(w.resource, w.share) for w in the_plan.waits] == [("quota share team-x", "team-x")]


def test_shares_are_created_in_name_order() -> None:
    doc = DocBuilder(QUEUE).env(**g5(3))
    for name in ("zeta", "alpha", "mid"):
        doc.share(name, **g5(1))

    the_plan = plan_for(desired(doc), converged(doc).drop_share())

    assert steps(the_plan) == [
        "CreateQuotaShare quota share alpha",
        "CreateQuotaShare quota share mid",
        "CreateQuotaShare quota share zeta",
    ]


# -- converged -------------------------------------------------------------------------------


def _twenty_shares() -> DocBuilder:
    doc = DocBuilder(QUEUE).env(**{G5: 20, G5_2X: 5})
    strategies = ("RESERVE", "LEND", "LEND_AND_BORROW")
    for i in range(20):
        doc.add(
            share(f"team-{i:02d}", strategies[i % 3], **{G5: 1, G5_2X: 1})
            .in_share_preemption("ENABLED" if i % 2 else "DISABLED")
            .set(tags={"index": str(i)})
        )
    return doc


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(guide(), id="guide-layout"),
        pytest.param(_twenty_shares(), id="twenty-shares"),
        pytest.param(
            guide(
                share("team-a", "LEND_AND_BORROW", 0, **{G5: 1, G5_2X: 2})
                .in_share_preemption("ENABLED")
                .set(tags={"cost": "a"}),
                share("team-b", **g5(1)).set(state="DISABLED"),
                env_limits={G5: 3, G5_2X: 2},
                env={"serviceEnvironmentName": "gpu-pool", "tags": {"cost": "env"}},
                policy={"name": "ml-policy", "tags": {"cost": "policy"}},
                queue={
                    "priority": 7,
                    "state": "DISABLED",
                    "jobStateTimeLimitActions": [STUCK, OVER_QUOTA],
                    "tags": {"cost": "queue"},
                },
            ),
            id="every-setting",
        ),
    ],
)
def test_converged_document_plans_nothing(doc: DocBuilder) -> None:
    the_plan = plan_for(desired(doc, applied_share_tags=share_tags(doc)), converged(doc))

    assert the_plan.converged
    assert (the_plan.actions, the_plan.wait_texts, the_plan.conflicts) == ([], [], [])


# -- changes to one share --------------------------------------------------------------------

TWO_UNITS = {G5: 3, G5_2X: 2}


@pytest.mark.parametrize(
    ("before", "after", "changed", "expected_reductions"),
    [
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(2)),
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            {"capacityLimits": limits(**g5(1))},
            (Reduction("limit", "team-a", G5, 2, 1),),
            id="limit-lowered",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            share("team-a", "LEND_AND_BORROW", 100, **g5(2)),
            {"capacityLimits": limits(**g5(2))},
            (),
            id="limit-raised",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **{G5: 1, G5_2X: 1}),
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            {"capacityLimits": limits(**g5(1))},
            (Reduction("unit-removed", "team-a", G5_2X, 1, 0),),
            id="unit-removed",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            share("team-a", "LEND_AND_BORROW", 100, **{G5: 1, G5_2X: 1}),
            {"capacityLimits": limits(**{G5: 1, G5_2X: 1})},
            (),
            id="unit-added",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            share("team-a", "LEND_AND_BORROW", 50, **g5(1)),
            {"resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 50}},
            (Reduction("borrow", "team-a", None, 100, 50),),
            id="borrow-limit-lowered",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", **g5(1)),
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            {"resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 100}},
            (Reduction("borrow", "team-a", None, -1, 100),),
            id="borrow-unlimited-to-limited",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 50, **g5(1)),
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            {"resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 100}},
            (),
            id="borrow-limit-raised",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            share("team-a", "LEND_AND_BORROW", **g5(1)),
            {"resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": -1}},
            (),
            id="borrow-limited-to-unlimited",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            share("team-a", "LEND", **g5(1)),
            {"resourceSharingConfiguration": {"strategy": "LEND"}},
            (Reduction("strategy", "team-a", None, 100, None),),
            id="lend-and-borrow-to-lend",
        ),
        pytest.param(
            share("team-a", "LEND", **g5(1)),
            share("team-a", "LEND_AND_BORROW", **g5(1)),
            {"resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": -1}},
            (),
            id="lend-to-lend-and-borrow",
        ),
        pytest.param(
            share("team-a", "RESERVE", **g5(1)),
            share("team-a", "LEND", **g5(1)),
            {"resourceSharingConfiguration": {"strategy": "LEND"}},
            (),
            id="reserve-to-lend",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)).in_share_preemption("ENABLED"),
            {"preemptionConfiguration": {"inSharePreemption": "ENABLED"}},
            (Reduction("in-share", "team-a", None, None, None),),
            id="in-share-preemption-enabled",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)).set(state="DISABLED"),
            {"state": "DISABLED"},
            (Reduction("disabled", "team-a", None, None, None),),
            id="disabled",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)).set(state="DISABLED"),
            share("team-a", "LEND_AND_BORROW", 100, **g5(1)),
            {"state": "ENABLED"},
            (),
            id="enabled-again",
        ),
        pytest.param(
            share("team-a", "LEND_AND_BORROW", 100, **g5(2)),
            share("team-a", "LEND_AND_BORROW", 50, **g5(1)),
            {
                "capacityLimits": limits(**g5(1)),
                "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 50},
            },
            (
                Reduction("limit", "team-a", G5, 2, 1),
                Reduction("borrow", "team-a", None, 100, 50),
            ),
            id="limit-and-borrow-limit-lowered",
        ),
    ],
)
def test_edited_share_is_one_update_with_only_the_changed_fields(
    before: ShareBuilder,
    after: ShareBuilder,
    changed: dict[str, Any],
    expected_reductions: tuple[Reduction, ...],
) -> None:
    have = converged(guide(before, env_limits=TWO_UNITS))

    the_plan = plan_for(desired(guide(after, env_limits=TWO_UNITS)), have)

    assert requests(the_plan) == [
        ("UpdateQuotaShare", {"quotaShareArn": share_arn("team-a"), **changed})
    ]
    (action,) = the_plan.actions
    assert action.share == "team-a"
    assert action.reductions == expected_reductions
    assert the_plan.wait_texts == []


def test_transitional_share_waits_and_is_not_updated() -> None:
    have = converged(guide()).edit_share("team-a", status="UPDATING")

    the_plan = plan_for(desired(guide(share("team-a", "LEND", **g5(2)))), have)

    assert the_plan.actions == []
    assert the_plan.wait_texts == ["quota share team-a is UPDATING"]


@pytest.mark.parametrize(
    "have",
    [
        pytest.param(converged(guide()), id="as-it-was"),
        pytest.param(
            converged(guide()).edit_share("team-c", state="DISABLED", limits=g5(3)),
            id="differs-from-the-document",
        ),
    ],
)
def test_frozen_share_is_left_alone_while_others_change(have: ObservedBuilder) -> None:
    broken_team_c = share("team-c", "LEND", **g5(0))  # maxCapacity must be >= 1
    doc = guide(share("team-a", "LEND_AND_BORROW", 100, **g5(2)), broken_team_c)

    the_plan = plan_for(desired(doc), have)

    assert requests(the_plan) == [
        (
            "UpdateQuotaShare",
            {"quotaShareArn": share_arn("team-a"), "capacityLimits": limits(**g5(2))},
        )
    ]
    assert the_plan.wait_texts == []


def test_frozen_share_missing_from_batch_is_not_created() -> None:
    doc = guide(share("team-c", "LEND", **g5(0)))

    the_plan = plan_for(desired(doc), converged(guide()).drop_share("team-c"))

    assert the_plan.converged


# -- removing a share ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "status", "force", "expected_requests", "expected_waits"),
    [
        pytest.param(
            "ENABLED",
            "VALID",
            False,
            [("UpdateQuotaShare", {"quotaShareArn": share_arn("team-c"), "state": "DISABLED"})],
            ["quota share team-c to be disabled before it is deleted"],
            id="disabled-first",
        ),
        pytest.param(
            "DISABLED",
            "VALID",
            False,
            [("DeleteQuotaShare", {"quotaShareArn": share_arn("team-c")})],
            [],
            id="then-deleted",
        ),
        pytest.param(
            "DISABLED",
            "VALID",
            True,
            [("DeleteQuotaShare", {"quotaShareArn": share_arn("team-c")})],
            [],
            id="then-deleted-forced",
        ),
        pytest.param(
            "DISABLED",
            "DELETING",
            False,
            [],
            ["quota share team-c is DELETING (being removed)"],
            id="while-deleting",
        ),
    ],
)
def test_removed_share_is_disabled_then_deleted(
    state: str,
    status: str,
    force: bool,
    expected_requests: list[tuple[str, dict[str, Any]]],
    expected_waits: list[str],
) -> None:
    have = converged(guide()).edit_share("team-c", state=state, status=status)

    the_plan = plan_for(desired(guide(drop=("team-c",)), force=force), have)

    assert requests(the_plan) == expected_requests
    assert the_plan.wait_texts == expected_waits


@pytest.mark.parametrize(
    ("state", "force", "deletes_share", "reduction"),
    [
        pytest.param("ENABLED", False, False, "disabled", id="disable-is-a-reduction"),
        pytest.param("DISABLED", False, True, "deleted", id="delete-waits-for-idle-share"),
        pytest.param("DISABLED", True, False, "deleted", id="forced-delete-does-not-wait"),
    ],
)
def test_removing_a_share_is_marked_for_the_guard(
    state: str, force: bool, deletes_share: bool, reduction: str
) -> None:
    have = converged(guide()).edit_share("team-c", state=state)

    (action,) = plan_for(desired(guide(drop=("team-c",)), force=force), have).actions

    assert action.share == "team-c"
    assert action.deletes_share is deletes_share
    assert action.reductions == (Reduction(reduction, "team-c", None, None, None),)


def test_document_force_reaches_the_delete() -> None:
    have = converged(guide()).edit_share("team-c", state="DISABLED")

    (action,) = plan_for(desired(guide(drop=("team-c",)).set(force=True)), have).actions

    assert action.operation == "DeleteQuotaShare"
    assert action.deletes_share is False


# -- changes to the environment and the queue ------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "changed", "expected_reductions"),
    [
        pytest.param(
            guide(env_limits=g5(4)),
            guide(env_limits=g5(3)),
            {"capacityLimits": limits(**g5(3))},
            (Reduction("limit", None, G5, 4, 3),),
            id="capacity-lowered",
        ),
        pytest.param(
            guide(env_limits=g5(3)),
            guide(env_limits=g5(6)),
            {"capacityLimits": limits(**g5(6))},
            (),
            id="capacity-raised",
        ),
        pytest.param(
            guide(env_limits={G5: 3, G5_2X: 2}),
            guide(env_limits=g5(3)),
            {"capacityLimits": limits(**g5(3))},
            (Reduction("unit-removed", None, G5_2X, 2, 0),),
            id="unit-removed",
        ),
        pytest.param(
            guide(),
            guide(env={"state": "DISABLED"}),
            {"state": "DISABLED"},
            (),
            id="disabled",
        ),
    ],
)
def test_environment_update(
    before: DocBuilder,
    after: DocBuilder,
    changed: dict[str, Any],
    expected_reductions: tuple[Reduction, ...],
) -> None:
    the_plan = plan_for(desired(after), converged(before))

    assert requests(the_plan) == [
        ("UpdateServiceEnvironment", {"serviceEnvironment": env_arn(ENV), **changed})
    ]
    assert the_plan.actions[0].reductions == expected_reductions
    assert the_plan.wait_texts == []


CAPACITY, LIMIT = STUCK["reason"], OVER_QUOTA["reason"]


@pytest.mark.parametrize(
    ("before", "after", "changed", "terminating"),
    [
        pytest.param({}, {"priority": 10}, {"priority": 10}, [], id="priority"),
        pytest.param({}, {"state": "DISABLED"}, {"state": "DISABLED"}, [], id="state"),
        pytest.param(
            {},
            {"jobStateTimeLimitActions": [STUCK]},
            {"jobStateTimeLimitActions": [STUCK]},
            [(CAPACITY, None, 3600)],
            id="time-limit-added",
        ),
        pytest.param(
            {"jobStateTimeLimitActions": [STUCK]},
            {},
            {"jobStateTimeLimitActions": []},
            [],
            id="time-limit-removed",
        ),
        pytest.param(
            {"jobStateTimeLimitActions": [STUCK]},
            {"jobStateTimeLimitActions": [{**STUCK, "maxTimeSeconds": 600}]},
            {"jobStateTimeLimitActions": [{**STUCK, "maxTimeSeconds": 600}]},
            [(CAPACITY, 3600, 600)],
            id="time-limit-sooner",
        ),
        pytest.param(
            {"jobStateTimeLimitActions": [{**STUCK, "maxTimeSeconds": 600}]},
            {"jobStateTimeLimitActions": [STUCK]},
            {"jobStateTimeLimitActions": [STUCK]},
            [],
            id="time-limit-later",
        ),
        pytest.param(
            {"priority": 3},
            {"priority": 0, "state": "DISABLED", "jobStateTimeLimitActions": [OVER_QUOTA]},
            {"priority": 0, "state": "DISABLED", "jobStateTimeLimitActions": [OVER_QUOTA]},
            [(LIMIT, None, 7200)],
            id="all-at-once",
        ),
    ],
)
def test_queue_update_carries_only_the_changed_fields(
    before: dict[str, Any],
    after: dict[str, Any],
    changed: dict[str, Any],
    terminating: list[tuple[str, int | None, int]],
) -> None:
    the_plan = plan_for(desired(guide(queue=after)), converged(guide(queue=before)))

    assert requests(the_plan) == [("UpdateJobQueue", {"jobQueue": queue_arn(), **changed})]
    # A TERMINATE rule added or made sooner is judged as a reduction: the jobs stuck for its
    # reason may be terminated as it lands (impact_layouts: their risks). Nothing else is.
    assert all(r.kind == "terminates" for r in the_plan.actions[0].reductions)
    assert [
        (r.unit, r.before, r.after)
        for r in the_plan.actions[0].reductions
        if r.kind == "terminates"
    ] == terminating


def test_reordered_time_limits_are_no_change() -> None:
    before = guide(queue={"jobStateTimeLimitActions": [STUCK, OVER_QUOTA]})
    after = guide(queue={"jobStateTimeLimitActions": [OVER_QUOTA, STUCK]})

    assert plan_for(desired(after), converged(before)).converged


# -- tags ------------------------------------------------------------------------------------

WANTED_TAGS = {"team": "ml", "cost": "42"}


@pytest.mark.parametrize(
    ("have_tags", "owned", "added", "removed"),
    [
        pytest.param({"cost": "42"}, True, {"team": "ml"}, None, id="tag-missing"),
        pytest.param({"team": "old", "cost": "42"}, True, {"team": "ml"}, None, id="value-changed"),
        pytest.param(
            {**WANTED_TAGS, "old": "x", "stale": "y"},
            True,
            None,
            ["old", "stale"],
            id="extra-tags",
        ),
        pytest.param(
            {**WANTED_TAGS, "aws:cloudformation:stack-name": "s"},
            True,
            None,
            None,
            id="aws-tags-are-never-removed",
        ),
        # Without the owner tag only an adopted resource is tagged (see the adoption tests).
        pytest.param(WANTED_TAGS, False, dict(OWNER), None, id="owner-tag-missing-adopted"),
        pytest.param(
            {"team": "old", "old": "x", "aws:createdBy": "me"},
            True,
            {"team": "ml", "cost": "42"},
            ["old"],
            id="all-at-once",
        ),
    ],
)
def test_tag_drift_is_repaired_on_policy_environment_and_queue(
    have_tags: dict[str, str],
    owned: bool,
    added: dict[str, str] | None,
    removed: list[str] | None,
) -> None:
    adopt = {} if owned else {"adopt": True}
    doc = guide(
        policy={"tags": WANTED_TAGS, **adopt},
        env={"tags": WANTED_TAGS, **adopt},
        queue={"tags": WANTED_TAGS, **adopt},
    )
    have = (
        converged(doc)
        .edit_policy(tags=have_tags, owned=owned)
        .edit_env(tags=have_tags, owned=owned)
        .edit_queue(tags=have_tags, owned=owned)
    )

    the_plan = plan_for(desired(doc), have)

    expected: list[tuple[str, dict[str, Any]]] = []
    for arn in (policy_arn(POLICY), env_arn(ENV), queue_arn()):
        # Untag first: Batch counts added tags against its 50 before any are removed.
        if removed:
            expected.append(("UntagResource", {"resourceArn": arn, "tagKeys": removed}))
        if added:
            expected.append(("TagResource", {"resourceArn": arn, "tags": added}))
    assert requests(the_plan) == expected


@pytest.mark.parametrize(
    ("applied", "expected"),
    [
        pytest.param({}, [], id="never-applied"),
        pytest.param({"team-a": {"cost": "a", **OWNER}}, [], id="as-applied"),
        pytest.param(
            {"team-a": OWNER},
            [("TagResource", {"resourceArn": share_arn("team-a"), "tags": {"cost": "a"}})],
            id="tag-added",
        ),
        pytest.param(
            {"team-a": {"cost": "b", **OWNER}},
            [("TagResource", {"resourceArn": share_arn("team-a"), "tags": {"cost": "a"}})],
            id="value-changed",
        ),
        pytest.param(
            {"team-a": {"cost": "a", "old": "x", **OWNER}},
            [("UntagResource", {"resourceArn": share_arn("team-a"), "tagKeys": ["old"]})],
            id="tag-removed",
        ),
        pytest.param(
            {"team-a": {"cost": "a"}},
            [("TagResource", {"resourceArn": share_arn("team-a"), "tags": OWNER})],
            id="owner-tag-added",
        ),
    ],
)
def test_share_tags_are_compared_to_the_applied_tags(
    applied: dict[str, dict[str, str]], expected: list[tuple[str, dict[str, Any]]]
) -> None:
    doc = guide(share("team-a", "LEND_AND_BORROW", 100, **g5(1)).set(tags={"cost": "a"}))

    the_plan = plan_for(desired(doc, applied_share_tags=applied), converged(doc))

    assert requests(the_plan) == expected


# -- renamed environment and policy ----------------------------------------------------------

ENV_1 = guide(env={"serviceEnvironmentName": "env-1"})
ENV_2 = guide(env={"serviceEnvironmentName": "env-2"})


@pytest.mark.parametrize(
    ("have", "expected_requests", "expected_waits"),
    [
        pytest.param(
            converged(ENV_1),
            [
                (
                    "CreateServiceEnvironment",
                    {
                        "serviceEnvironmentName": "env-2",
                        "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                        "state": "ENABLED",
                        "capacityLimits": limits(**g5(3)),
                        "tags": OWNER,
                    },
                )
            ],
            ["service environment env-2 to be created"],
            id="new-environment-created",
        ),
        pytest.param(
            converged(ENV_1).env("env-2", status="CREATING", **g5(3)),
            [],
            [
                "service environment env-2 is CREATING",
                f"job queue {QUEUE} waits for its new service environment",
            ],
            id="queue-waits-for-new-environment",
        ),
        pytest.param(
            converged(ENV_1).env("env-2", **g5(3)),
            [
                (
                    "UpdateJobQueue",
                    {
                        "jobQueue": queue_arn(),
                        "serviceEnvironmentOrder": [
                            {"order": 1, "serviceEnvironment": env_arn("env-2")}
                        ],
                    },
                )
            ],
            [],
            id="queue-switched-once-valid",
        ),
        pytest.param(
            converged(ENV_2).env("env-1", **g5(3)),
            [
                (
                    "UpdateServiceEnvironment",
                    {"serviceEnvironment": env_arn("env-1"), "state": "DISABLED"},
                )
            ],
            ["service environment env-1 to be disabled before it is deleted"],
            id="old-environment-disabled",
        ),
        pytest.param(
            converged(ENV_2).env("env-1", state="DISABLED", **g5(3)),
            [("DeleteServiceEnvironment", {"serviceEnvironment": env_arn("env-1")})],
            [],
            id="old-environment-deleted",
        ),
        pytest.param(
            converged(ENV_2).env("env-1", state="DISABLED", status="DELETING", **g5(3)),
            [],
            ["service environment env-1 is DELETING (being removed)"],
            id="old-environment-deleting",
        ),
        pytest.param(
            converged(ENV_2).env("env-1", state="DISABLED", status="DELETED", **g5(3)),
            [],
            [],
            id="old-environment-already-deleted",
        ),
        pytest.param(
            converged(ENV_2).env("env-1", owned=False, **g5(3)),
            [],
            [],
            id="old-environment-not-owned",
        ),
        pytest.param(
            converged(ENV_2).env("env-1", owned="other-queue", **g5(3)),
            [],
            [],
            id="old-environment-of-another-queue",
        ),
    ],
)
def test_renamed_environment_is_replaced_and_the_old_one_retired(
    have: ObservedBuilder,
    expected_requests: list[tuple[str, dict[str, Any]]],
    expected_waits: list[str],
) -> None:
    the_plan = plan_for(desired(ENV_2, managed_environment="env-1"), have)

    assert requests(the_plan) == expected_requests
    assert the_plan.wait_texts == expected_waits
    assert the_plan.conflicts == []


POLICY_1 = guide(policy={"name": "pol-1"})
POLICY_2 = guide(policy={"name": "pol-2"})


@pytest.mark.parametrize(
    ("have", "expected_requests", "expected_waits"),
    [
        pytest.param(
            converged(POLICY_1),
            [
                (
                    "CreateSchedulingPolicy",
                    {"name": "pol-2", "quotaSharePolicy": FIFO, "tags": OWNER},
                )
            ],
            [f"job queue {QUEUE} waits for its new scheduling policy"],
            id="new-policy-created",
        ),
        pytest.param(
            converged(POLICY_1).policy("pol-2"),
            [
                (
                    "UpdateJobQueue",
                    {"jobQueue": queue_arn(), "schedulingPolicyArn": policy_arn("pol-2")},
                )
            ],
            [],
            id="queue-switched",
        ),
        pytest.param(converged(POLICY_2), [], [], id="switched"),
    ],
)
def test_renamed_policy_is_replaced(
    have: ObservedBuilder,
    expected_requests: list[tuple[str, dict[str, Any]]],
    expected_waits: list[str],
) -> None:
    the_plan = plan_for(desired(POLICY_2, managed_policy="pol-1"), have)

    assert requests(the_plan) == expected_requests
    assert the_plan.wait_texts == expected_waits


@pytest.mark.parametrize(
    ("owned", "expected"),
    [
        pytest.param(True, [("DeleteSchedulingPolicy", {"arn": policy_arn("pol-1")})], id="owned"),
        pytest.param(False, [], id="not-owned"),
        pytest.param("other-queue", [], id="of-another-queue"),
    ],
)
def test_replaced_policy_is_deleted_only_when_owned(
    owned: bool | str, expected: list[tuple[str, dict[str, Any]]]
) -> None:
    # ObservedState holds one policy: here Batch reports the old one, the queue is on pol-2.
    have = converged(POLICY_2).policy("pol-1", owned=owned)

    the_plan = plan_for(desired(POLICY_2, managed_policy="pol-1"), have)

    on_old = [(a.operation, dict(a.params)) for a in the_plan.actions if "pol-1" in a.resource]
    assert on_old == expected


def test_replaced_policy_still_used_by_the_queue_is_kept() -> None:
    have = converged(POLICY_1)

    the_plan = plan_for(desired(POLICY_2, managed_policy="pol-1"), have)

    assert [a.operation for a in the_plan.actions if "pol-1" in a.resource] == []


# -- teardown --------------------------------------------------------------------------------

SHARES_WAIT = f"job queue {QUEUE} waits for its shares to be deleted"


@pytest.mark.parametrize(
    ("have", "expected_requests", "expected_waits"),
    [
        pytest.param(
            converged(guide()),
            [
                ("UpdateQuotaShare", {"quotaShareArn": share_arn(s), "state": "DISABLED"})
                for s in SHARES
            ],
            [f"quota share {s} to be disabled before it is deleted" for s in SHARES]
            + [SHARES_WAIT],
            id="shares-disabled-first",
        ),
        pytest.param(
            converged(guide()).edit_share(state="DISABLED"),
            [("DeleteQuotaShare", {"quotaShareArn": share_arn(s)}) for s in SHARES],
            [SHARES_WAIT],
            id="then-shares-deleted",
        ),
        pytest.param(
            converged(guide()).drop_share(),
            [("UpdateJobQueue", {"jobQueue": queue_arn(), "state": "DISABLED"})],
            [f"job queue {QUEUE} to be disabled"],
            id="then-queue-disabled",
        ),
        pytest.param(
            converged(guide()).drop_share().edit_queue(state="DISABLED"),
            [("DeleteJobQueue", {"jobQueue": queue_arn()})],
            [f"job queue {QUEUE} to be deleted"],
            id="then-queue-deleted",
        ),
        pytest.param(
            converged(guide()).drop_share().edit_queue(state="DISABLED", status="DELETING"),
            [],
            [f"job queue {QUEUE} is DELETING"],
            id="while-queue-deleting",
        ),
        pytest.param(
            converged(guide()).drop_share().edit_queue(state="DISABLED", status="DELETED"),
            [
                ("DeleteSchedulingPolicy", {"arn": policy_arn(POLICY)}),
                (
                    "UpdateServiceEnvironment",
                    {"serviceEnvironment": env_arn(ENV), "state": "DISABLED"},
                ),
            ],
            [f"service environment {ENV} to be disabled before it is deleted"],
            id="then-policy-deleted-and-environment-disabled",
        ),
        pytest.param(
            converged(guide()).drop_share().drop_queue().edit_env(state="DISABLED"),
            [
                ("DeleteSchedulingPolicy", {"arn": policy_arn(POLICY)}),
                ("DeleteServiceEnvironment", {"serviceEnvironment": env_arn(ENV)}),
            ],
            [],
            id="then-environment-deleted",
        ),
        pytest.param(
            observed().env(state="DISABLED", status="DELETING", **g5(3)),
            [],
            [f"service environment {ENV} is DELETING (being removed)"],
            id="while-environment-deleting",
        ),
        pytest.param(
            observed().env(state="DISABLED", status="DELETED", **g5(3)),
            [],
            [],
            id="environment-deleted",
        ),
        pytest.param(observed(), [], [], id="nothing-left"),
        pytest.param(
            observed().policy(owned=False).env(owned=False, **g5(3)),
            [],
            [],
            id="policy-and-environment-not-owned",
        ),
        pytest.param(
            observed().policy(owned="other-queue").env(owned="other-queue", **g5(3)),
            [],
            [],
            id="policy-and-environment-of-another-queue",
        ),
    ],
)
def test_teardown_runs_in_reverse_dependency_order(
    have: ObservedBuilder,
    expected_requests: list[tuple[str, dict[str, Any]]],
    expected_waits: list[str],
) -> None:
    the_plan = plan_for(desired(None), have)

    assert requests(the_plan) == expected_requests
    assert the_plan.wait_texts == expected_waits
    assert the_plan.conflicts == []


@pytest.mark.parametrize(
    ("force", "deletes_share"),
    [pytest.param(False, True, id="waits-for-idle"), pytest.param(True, False, id="forced")],
)
def test_teardown_share_delete_respects_force(force: bool, deletes_share: bool) -> None:
    have = converged(guide()).edit_share(state="DISABLED")

    the_plan = plan_for(desired(None, force=force), have)

    assert [a.deletes_share for a in the_plan.actions] == [deletes_share] * 3


@pytest.mark.parametrize(
    "have",
    [
        pytest.param(converged(guide()).drop_share().edit_queue(owned=False), id="untagged"),
        pytest.param(
            converged(guide()).drop_share().edit_queue(owned="other-queue"),
            id="of-another-queue",
        ),
        pytest.param(converged(guide()).edit_queue(owned=False), id="untagged-with-shares"),
    ],
)
def test_teardown_leaves_a_queue_it_does_not_own(have: ObservedBuilder) -> None:
    the_plan = plan_for(desired(None), have)

    assert the_plan.actions == []
    assert len(the_plan.conflicts) == 1
    assert "not marked as managed" in the_plan.conflicts[0]


# -- conflicts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("have", "fragment"),
    [
        pytest.param(
            observed().policy(fair_share=True), "exists as a fair-share policy", id="fair-share"
        ),
        pytest.param(
            observed().policy(fair_share=True).env(**g5(3)),
            "exists as a fair-share policy",
            id="fair-share-environment-ready",
        ),
        pytest.param(
            observed().policy().env(env_type="ECS", **g5(3)),
            "not SAGEMAKER_TRAINING",
            id="environment-of-another-type",
        ),
        pytest.param(
            converged(guide()).drop_share().edit_queue(queue_type="ECS", env=None),
            "exists with type ECS",
            id="ecs-queue",
        ),
        pytest.param(
            converged(guide()).drop_share().edit_queue(policy=None),
            "created without a scheduling policy",
            id="queue-without-policy",
        ),
        pytest.param(
            observed().policy(owned="queue-b"),
            "scheduling policy ml-training-quota-policy is managed by job queue queue-b's "
            "document (tag batch-quota-controller:queue); each queue needs its own: name another "
            "in schedulingPolicy.name",
            id="policy-of-another-queue",
        ),
        pytest.param(
            observed().policy().env(owned="queue-b", **g5(3)),
            "service environment ml-training-env is managed by job queue queue-b's document",
            id="environment-of-another-queue",
        ),
    ],
)
def test_conflicts_are_reported_and_nothing_is_created(
    have: ObservedBuilder, fragment: str
) -> None:
    the_plan = plan_for(desired(guide()), have)

    assert len(the_plan.conflicts) == 1
    assert fragment in the_plan.conflicts[0]
    assert [s for s in steps(the_plan) if s.startswith("Create")] == []
    assert not the_plan.converged


def test_another_queues_environment_is_neither_changed_nor_retagged_nor_attached() -> None:
    have = (
        converged(guide())
        .drop_share()
        .drop_queue()
        .edit_env(owned="queue-b", capacityLimits=limits(**{"ml.g5.xlarge": 5}))
    )

    the_plan = plan_for(desired(guide()), have)

    assert the_plan.actions == []
    assert [c.split(";")[0] for c in the_plan.conflicts] == [
        "service environment ml-training-env is managed by job queue queue-b's document "
        "(tag batch-quota-controller:queue)"
    ]


@pytest.mark.parametrize(
    ("part", "what", "edit"),
    [
        pytest.param("policy", "scheduling policy", "edit_policy", id="policy"),
        pytest.param("env", "service environment", "edit_env", id="environment"),
        pytest.param("queue", "job queue", "edit_queue", id="queue"),
    ],
)
def test_an_untagged_resource_is_a_conflict_unless_adopted(part: str, what: str, edit: str) -> None:
    """A resource of that name that the controller did not create (no owner tag) is never
    changed or tagged: nothing at all is planned until the document adopts it."""
    have = getattr(converged(guide(env_limits=g5(4))), edit)(owned=False)

    the_plan = plan_for(desired(guide()), have)  # would cut the environment 4 -> 3

    assert requests(the_plan) == []
    [conflict] = the_plan.conflicts
    assert conflict.startswith(f"{what} ")
    assert "was not created by this controller" in conflict
    section = {"policy": "schedulingPolicy", "env": "serviceEnvironment", "queue": "jobQueue"}
    assert f"{section[part]}.adopt: true" in conflict

    adopted = plan_for(desired(guide(**{part: {"adopt": True}})), have)

    assert adopted.conflicts == []
    assert ("TagResource", {OWNER_TAG: "ml-training"}) in [
        (op, params.get("tags")) for op, params in requests(adopted)
    ]


# -- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "have"),
    [
        pytest.param(guide(), observed(), id="from-empty"),
        pytest.param(guide(), converged(guide()).drop_share(), id="create-shares"),
        pytest.param(
            guide(share("team-a", "LEND", **g5(2)), drop=("team-c",), env_limits=g5(2)),
            converged(guide()),
            id="edits-and-removal",
        ),
        pytest.param(None, converged(guide()), id="teardown"),
    ],
)
def test_plans_are_deterministic(doc: DocBuilder | None, have: ObservedBuilder) -> None:
    first = plan_for(desired(doc), have)
    second = plan_for(desired(doc), have)

    assert first == second
    assert first.actions or first.waits


def test_plan_does_not_depend_on_listing_order() -> None:
    def document(order: tuple[str, ...]) -> DocBuilder:
        doc = DocBuilder(QUEUE).env(**g5(3))
        for name in order:
            doc.share(name, **g5(2))
        return doc

    def listing(order: tuple[str, ...]) -> ObservedBuilder:
        have = converged(guide()).drop_share()
        for name in order:
            have.share(name, strategy="LEND", **g5(1))
        return have

    forwards = plan_for(desired(document(("team-a", "team-b"))), listing(SHARES))
    backwards = plan_for(desired(document(("team-b", "team-a"))), listing(SHARES[::-1]))

    assert forwards == backwards
    assert steps(forwards) == [
        "UpdateQuotaShare quota share team-c",  # removals first (the 20-share limit)
        "UpdateQuotaShare quota share team-a",
        "UpdateQuotaShare quota share team-b",
    ]
