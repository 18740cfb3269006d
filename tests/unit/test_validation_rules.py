"""Every validator rule: a document that breaks it (path + message) and the boundary that passes.

Built from the AWS guide's layout (environment of 3 x ml.g5.xlarge, shares team-a/b/c of one
each) with exactly one thing changed, so each failing case must produce exactly one error.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import DocBuilder, ShareBuilder, g5, guide_layout

from quota_controller.domain.config import QuotaDocument, ValidationReport, validate_document
from quota_controller.domain.config.source import parse_text

FIVE_UNITS = {
    "ml.g5.xlarge": 1,
    "ml.g5.2xlarge": 1,
    "ml.g5.4xlarge": 1,
    "ml.g5.8xlarge": 1,
    "ml.g5.12xlarge": 1,
}
SIX_UNITS = {**FIVE_UNITS, "ml.g5.16xlarge": 1}
ACTION = {
    "reason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
    "state": "RUNNABLE",
    "maxTimeSeconds": 3600,
    "action": "TERMINATE",
}


def assert_error(raw: object, path: str, fragment: str) -> ValidationReport:
    """Exactly one error, at `path`, whose message contains `fragment`; nothing is accepted."""
    report = validate_document(raw)
    found = [(p.location, p.message) for p in report.errors]
    assert [location for location, _ in found] == [path], found
    assert fragment in found[0][1], found
    assert not report.ok
    assert report.document is None
    return report


def assert_valid(raw: object) -> ValidationReport:
    report = validate_document(raw)
    assert [str(p) for p in report.errors] == []
    assert report.ok
    assert isinstance(report.document, QuotaDocument)
    return report


# -- small ways to change one thing in the guide's layout -------------------------------------


def top(**fields: Any) -> dict[str, Any]:
    return guide_layout().set(**fields).build()


def without(*keys: str) -> dict[str, Any]:
    raw = guide_layout().build()
    for key in keys:
        del raw[key]
    return raw


def queue(**fields: Any) -> dict[str, Any]:
    return guide_layout().queue(**fields).build()


def action(**fields: Any) -> dict[str, Any]:
    return queue(jobStateTimeLimitActions=[{**ACTION, **fields}])


def action_without(key: str) -> dict[str, Any]:
    act = dict(ACTION)
    del act[key]
    return queue(jobStateTimeLimitActions=[act])


def policy(**fields: Any) -> dict[str, Any]:
    return guide_layout().set(schedulingPolicy=fields).build()


def env(**fields: Any) -> dict[str, Any]:
    raw = guide_layout().build()
    raw["serviceEnvironment"].update(fields)
    return raw


def env_limits(limits: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The environment's capacity limits replaced; one share using the first unit."""
    first = next(iter(limits), "ml.g5.xlarge")
    doc = DocBuilder().env(**limits).share("team-a", **{first: 1})
    doc.raw["serviceEnvironment"]["capacityLimits"] = [
        {"capacityUnit": u, "maxCapacity": m, **extra} for u, m in limits.items()
    ]
    return doc.build()


def env_limit(**fields: Any) -> dict[str, Any]:
    raw = guide_layout().build()
    raw["serviceEnvironment"]["capacityLimits"][0].update(fields)
    return raw


def share(**fields: Any) -> dict[str, Any]:
    """team-a (quotaShares[0]) with fields replaced."""
    raw = guide_layout().build()
    raw["quotaShares"][0].update(fields)
    return raw


def share_without(key: str) -> dict[str, Any]:
    raw = guide_layout().build()
    del raw["quotaShares"][0][key]
    return raw


def share_limit(**fields: Any) -> dict[str, Any]:
    raw = guide_layout().build()
    raw["quotaShares"][0]["capacityLimits"][0].update(fields)
    return raw


def share_units(limits: dict[str, int], env_units: dict[str, int] = FIVE_UNITS) -> dict[str, Any]:
    """One share with these capacity limits in an environment of `env_units`."""
    return DocBuilder().env(**env_units).add(ShareBuilder("team-a", limits)).build()


def sharing(**cfg: Any) -> dict[str, Any]:
    return share(resourceSharingConfiguration=cfg)


def preemption(**cfg: Any) -> dict[str, Any]:
    return share(preemptionConfiguration=cfg)


def shares(n: int) -> dict[str, Any]:
    doc = DocBuilder().env(**g5(n))
    for i in range(n):
        doc.share(f"team-{i}", **g5(1))
    return doc.build()


def tags(where: str, value: dict[Any, Any]) -> dict[str, Any]:
    raw = guide_layout().build()
    target = {
        "jobQueue": raw["jobQueue"],
        "schedulingPolicy": raw.setdefault("schedulingPolicy", {}),
        "serviceEnvironment": raw["serviceEnvironment"],
        "quotaShares[0]": raw["quotaShares"][0],
    }[where]
    target["tags"] = value
    return raw


def named(queue_name: str, *, policy_name: str | None, env_name: str | None) -> dict[str, Any]:
    raw = queue(jobQueueName=queue_name)
    if policy_name is not None:
        raw["schedulingPolicy"] = {"name": policy_name}
    if env_name is not None:
        raw["serviceEnvironment"]["serviceEnvironmentName"] = env_name
    return raw


def many_tags(n: int) -> dict[str, str]:
    return {f"key-{i}": "v" for i in range(n)}


S0 = "quotaShares[0]"
RSC = f"{S0}.resourceSharingConfiguration"
JSTLA = "jobQueue.jobStateTimeLimitActions[0]"
YAML_HINT = "YAML reads unquoted on/off/yes/no/true/false as a boolean"

FAILING = [
    # -- the document itself
    pytest.param(None, "", "the document is empty", id="document-null"),
    pytest.param([1, 2], "", "must be a mapping with jobQueue", id="document-list"),
    pytest.param("jobQueue", "", "(got text)", id="document-text"),
    pytest.param(
        top(quotaShare=[]), "quotaShare", "did you mean 'quotaShares'?", id="unknown-top-level"
    ),
    pytest.param(
        top(jobQeue={}), "jobQeue", "did you mean 'jobQueue'?", id="unknown-top-level-typo"
    ),
    pytest.param(without("jobQueue"), "jobQueue", "is required", id="jobQueue-missing"),
    pytest.param(
        without("serviceEnvironment"), "serviceEnvironment", "is required", id="env-missing"
    ),
    pytest.param(
        top(jobQueue="ml-training"), "jobQueue", "must be a mapping", id="jobQueue-not-mapping"
    ),
    pytest.param(
        top(quotaShares={"team-a": {}}),
        "quotaShares",
        "must be a list of quota shares (got a mapping)",
        id="shares-not-list",
    ),
    pytest.param(
        top(quotaShares=["team-a"]), S0, "must be a mapping (got text)", id="share-not-mapping"
    ),
    pytest.param(
        shares(21), "quotaShares", "has 21 quota shares; a job queue allows at most 20", id="21"
    ),
    pytest.param(
        top(reductionPolicy="WARN"), "reductionPolicy", "did you mean warn?", id="reduction-case"
    ),
    pytest.param(
        top(reductionPolicy="delete"),
        "reductionPolicy",
        "must be one of warn, block or drain (got 'delete')",
        id="reduction-enum",
    ),
    # -- jobQueue
    pytest.param(
        queue(jobQueueName=None), "jobQueue.jobQueueName", "must be text", id="queue-name-null"
    ),
    pytest.param(
        named("q" * 129, policy_name="p", env_name="e"),
        "jobQueue.jobQueueName",
        "is 129 characters long; at most 128 are allowed",
        id="queue-name-129",
    ),
    pytest.param(
        queue(jobQueueName="ml training/v2"),
        "jobQueue.jobQueueName",
        "may contain only letters, digits, hyphens and underscores (found ' ', '/')",
        id="queue-name-characters",
    ),
    pytest.param(
        queue(jobQueueName=""), "jobQueue.jobQueueName", "must not be empty", id="queue-name-empty"
    ),
    pytest.param(
        queue(jobQueueName=7), "jobQueue.jobQueueName", "must be text (got 7)", id="queue-name-int"
    ),
    pytest.param(
        queue(priority=-1), "jobQueue.priority", "must be at least 0 (got -1)", id="priority--1"
    ),
    pytest.param(
        queue(priority=1001),
        "jobQueue.priority",
        "must be at most 1000 (got 1001)",
        id="priority-1001",
    ),
    pytest.param(
        queue(priority=True),
        "jobQueue.priority",
        "must be a whole number (got true)",
        id="priority-bool",
    ),
    pytest.param(
        queue(priority="10"),
        "jobQueue.priority",
        "must be a whole number (got '10')",
        id="priority-str",
    ),
    pytest.param(
        queue(priority=10.0),
        "jobQueue.priority",
        "must be a whole number (got 10.0)",
        id="priority-float",
    ),
    pytest.param(
        queue(priority=None),
        "jobQueue.priority",
        "must be a whole number (got null)",
        id="priority-null",
    ),
    pytest.param(
        queue(state="enabled"), "jobQueue.state", "did you mean ENABLED?", id="queue-state-case"
    ),
    pytest.param(
        queue(state="ACTIVE"),
        "jobQueue.state",
        "must be one of ENABLED or DISABLED (got 'ACTIVE')",
        id="queue-state-enum",
    ),
    pytest.param(
        queue(prority=5), "jobQueue.prority", "did you mean 'priority'?", id="queue-unknown-field"
    ),
    pytest.param(
        queue(jobStateTimeLimitActions={}),
        "jobQueue.jobStateTimeLimitActions",
        "must be a list",
        id="actions-not-list",
    ),
    pytest.param(
        action(maxTimeSeconds=599),
        f"{JSTLA}.maxTimeSeconds",
        "must be at least 600 (got 599)",
        id="maxTimeSeconds-599",
    ),
    pytest.param(
        action(maxTimeSeconds=86401),
        f"{JSTLA}.maxTimeSeconds",
        "must be at most 86400 (got 86401)",
        id="maxTimeSeconds-86401",
    ),
    pytest.param(
        action(maxTimeSeconds="1h"),
        f"{JSTLA}.maxTimeSeconds",
        "must be a whole number (got '1h')",
        id="maxTimeSeconds-str",
    ),
    pytest.param(
        action(state="RUNNING"),
        f"{JSTLA}.state",
        "must be one of RUNNABLE (got 'RUNNING')",
        id="action-state",
    ),
    pytest.param(
        action(action="CANCEL"),
        f"{JSTLA}.action",
        "must be one of TERMINATE (got 'CANCEL')",
        id="action-cancel",
    ),
    pytest.param(
        action(reason="MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT"),
        f"{JSTLA}.reason",
        "must be one of CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY, "
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE or "
        "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
        id="action-reason",
    ),
    pytest.param(
        action(reason="capacity:insufficient_instance_capacity"),
        f"{JSTLA}.reason",
        "did you mean CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY?",
        id="action-reason-case",
    ),
    pytest.param(action_without("reason"), f"{JSTLA}.reason", "is required", id="action-no-reason"),
    pytest.param(
        action(maxTime=600),
        f"{JSTLA}.maxTime",
        "did you mean 'maxTimeSeconds'?",
        id="action-unknown-field",
    ),
    pytest.param(
        queue(jobStateTimeLimitActions=[ACTION, {**ACTION, "maxTimeSeconds": 7200}]),
        "jobQueue.jobStateTimeLimitActions",
        "more than one action for reason CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
        id="action-reason-twice",
    ),
    # -- tags (the checks are shared by every resource; each resource gets one case below)
    pytest.param(
        tags("jobQueue", many_tags(50)),
        "jobQueue.tags",
        "has 50 tags; at most 49 are allowed",
        id="tags-50",
    ),
    pytest.param(
        tags("jobQueue", {"team": "x" * 257}),
        "jobQueue.tags",
        "the value of tag 'team' is 257 characters; at most 256",
        id="tag-value-257",
    ),
    pytest.param(
        tags("jobQueue", {"k" * 129: "v"}),
        "jobQueue.tags",
        "must be 1 to 128 characters (is 129)",
        id="tag-key-129",
    ),
    pytest.param(
        tags("jobQueue", {"": "v"}),
        "jobQueue.tags",
        "must be 1 to 128 characters (is 0)",
        id="tag-key-empty",
    ),
    pytest.param(
        tags("jobQueue", {"aws:team": "ml"}),
        "jobQueue.tags",
        "tag key 'aws:team' uses the reserved prefix 'aws:'",
        id="tag-aws-prefix",
    ),
    pytest.param(
        tags("jobQueue", {"AWS:team": "ml"}),
        "jobQueue.tags",
        "reserved prefix 'aws:'",
        id="tag-aws-prefix-upper",
    ),
    pytest.param(
        tags("jobQueue", {"team#1": "ml"}),
        "jobQueue.tags",
        "tag key 'team#1' may contain only letters, numbers, spaces and + - = . _ : / @ "
        "(AWS tag restrictions) (found '#')",
        id="tag-key-character",
    ),
    pytest.param(
        tags("jobQueue", {"team": "ml\nNext steps"}),
        "jobQueue.tags",
        "the value of tag 'team' may contain only letters, numbers, spaces and + - = . _ : / @ "
        "(AWS tag restrictions) (found '\\n')",
        id="tag-value-line-break",
    ),
    pytest.param(
        tags("quotaShares[0]", {"owner": "a,b;c\x1b"}),
        f"{S0}.tags",
        "(found '\\x1b', ',', ';')",
        id="tag-value-characters",
    ),
    pytest.param(
        tags("jobQueue", {"team": "aws:ml"}),
        "jobQueue.tags",
        "the value of tag 'team' uses the reserved prefix 'aws:'",
        id="tag-value-aws-prefix",
    ),
    pytest.param(
        tags("jobQueue", {"cost-center": 42}),
        "jobQueue.tags.cost-center",
        "must be text (got 42)",
        id="tag-value-int",
    ),
    pytest.param(
        tags("jobQueue", ["team=ml"]), "jobQueue.tags", "must be a mapping", id="tags-list"
    ),
    pytest.param(
        tags("schedulingPolicy", {"aws:x": "1"}),
        "schedulingPolicy.tags",
        "reserved prefix 'aws:'",
        id="policy-tags",
    ),
    pytest.param(
        tags("serviceEnvironment", many_tags(50)),
        "serviceEnvironment.tags",
        "has 50 tags",
        id="env-tags",
    ),
    pytest.param(
        tags("quotaShares[0]", {"team": "x" * 257}),
        f"{S0}.tags",
        "is 257 characters; at most 256",
        id="share-tags",
    ),
    # -- schedulingPolicy and derived names
    pytest.param(
        policy(name="p" * 129),
        "schedulingPolicy.name",
        "is 129 characters long",
        id="policy-name-129",
    ),
    pytest.param(
        policy(name="quota policy"),
        "schedulingPolicy.name",
        "may contain only letters, digits, hyphens and underscores (found ' ')",
        id="policy-name-characters",
    ),
    pytest.param(
        policy(nam="p"), "schedulingPolicy.nam", "did you mean 'name'?", id="policy-unknown-field"
    ),
    pytest.param(
        policy(idleResourceAssignmentStrategy="FIFO"),
        "schedulingPolicy.idleResourceAssignmentStrategy",
        "unknown field (allowed: name, tags, adopt)",
        id="policy-unknown-field-no-hint",
    ),
    pytest.param(
        named("q" * 116, policy_name=None, env_name=None),
        "schedulingPolicy.name",
        "would be 129 characters (at most 128); set schedulingPolicy.name",
        id="derived-policy-name-129",
    ),
    pytest.param(
        named("q" * 125, policy_name="p", env_name=None),
        "serviceEnvironment.serviceEnvironmentName",
        "would be 129 characters (at most 128); set serviceEnvironment.serviceEnvironmentName",
        id="derived-env-name-129",
    ),
    # -- serviceEnvironment
    pytest.param(
        env(serviceEnvironmentName="ml env"),
        "serviceEnvironment.serviceEnvironmentName",
        "may contain only letters, digits, hyphens and underscores",
        id="env-name-characters",
    ),
    pytest.param(
        env(capacityLimits=[]),
        "serviceEnvironment.capacityLimits",
        "needs at least 1 entry (got 0)",
        id="env-0-limits",
    ),
    pytest.param(
        env_limits(SIX_UNITS),
        "serviceEnvironment.capacityLimits",
        "allows at most 5 entries (got 6)",
        id="env-6-limits",
    ),
    pytest.param(
        env(capacityLimit=[]),
        "serviceEnvironment.capacityLimit",
        "did you mean 'capacityLimits'?",
        id="env-unknown-field",
    ),
    pytest.param(
        env(state="disabled"), "serviceEnvironment.state", "did you mean DISABLED?", id="env-state"
    ),
    pytest.param(
        env_limit(capacityUnit="NUM_INSTANCES"),
        "serviceEnvironment.capacityLimits[0].capacityUnit",
        "NUM_INSTANCES is not allowed with quota management",
        id="env-NUM_INSTANCES",
    ),
    pytest.param(
        env_limit(capacityUnit="ml.g5.xlarg"),
        "serviceEnvironment.capacityLimits[0].capacityUnit",
        "(did you mean 'ml.g5.xlarge'?)",
        id="env-unit-near-miss",
    ),
    pytest.param(
        env_limit(maxCapacity=0),
        "serviceEnvironment.capacityLimits[0].maxCapacity",
        "must be at least 1 (got 0)",
        id="env-maxCapacity-0",
    ),
    pytest.param(
        env_limit(maxCapacity=2.5),
        "serviceEnvironment.capacityLimits[0].maxCapacity",
        "must be a whole number (got 2.5)",
        id="env-maxCapacity-float",
    ),
    pytest.param(
        env_limit(maxCapcity=3),
        "serviceEnvironment.capacityLimits[0].maxCapcity",
        "did you mean 'maxCapacity'?",
        id="env-limit-unknown-field",
    ),
    pytest.param(
        env(
            capacityLimits=[
                {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2},
                {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1},
            ]
        ),
        "serviceEnvironment.capacityLimits",
        "lists ml.g5.xlarge more than once; give each instance type one limit",
        id="env-duplicate-unit",
    ),
    # -- quota shares
    pytest.param(
        share(quotaShareName="t" * 129),
        f"{S0}.quotaShareName",
        "is 129 characters long; at most 128 are allowed",
        id="share-name-129",
    ),
    pytest.param(
        share(quotaShareName="team.a"),
        f"{S0}.quotaShareName",
        "may contain only letters, digits, hyphens and underscores (found '.')",
        id="share-name-characters",
    ),
    pytest.param(
        share_without("quotaShareName"),
        f"{S0}.quotaShareName",
        "is required",
        id="share-name-missing",
    ),
    pytest.param(
        share(capacityLimit=[]),
        f"{S0}.capacityLimit",
        "did you mean 'capacityLimits'?",
        id="share-unknown-field",
    ),
    pytest.param(
        share(state=False),
        f"{S0}.state",
        f"did you mean DISABLED? {YAML_HINT}",
        id="share-state-bool",
    ),
    pytest.param(
        share_units({}), f"{S0}.capacityLimits", "needs at least 1 entry (got 0)", id="share-0"
    ),
    pytest.param(
        share_limit(capacityUnit="NUM_INSTANCES"),
        f"{S0}.capacityLimits[0].capacityUnit",
        "NUM_INSTANCES is not allowed with quota management; name a SageMaker Training "
        "instance type",
        id="share-NUM_INSTANCES",
    ),
    pytest.param(
        share_limit(capacityUnit="g5.xlarge"),
        f"{S0}.capacityLimits[0].capacityUnit",
        "'g5.xlarge' is not a SageMaker Training instance type (did you mean 'ml.g5.xlarge'?)",
        id="share-unit-no-ml-prefix",
    ),
    pytest.param(
        share_limit(capacityUnit="ML.G5.XLARGE"),
        f"{S0}.capacityLimits[0].capacityUnit",
        "(did you mean 'ml.g5.xlarge'?)",
        id="share-unit-upper-case",
    ),
    pytest.param(
        share_limit(capacityUnit="ml.g5.xlrage"),
        f"{S0}.capacityLimits[0].capacityUnit",
        "(did you mean 'ml.g5.xlarge'?)",
        id="share-unit-typo",
    ),
    pytest.param(
        share_limit(capacityUnit="m5.large.gpu"),
        f"{S0}.capacityLimits[0].capacityUnit",
        "'m5.large.gpu' is not a SageMaker Training instance type",
        id="share-unit-unknown",
    ),
    pytest.param(
        share_limit(capacityUnit=None),
        f"{S0}.capacityLimits[0].capacityUnit",
        "must be text (got null)",
        id="share-unit-null",
    ),
    pytest.param(
        share_limit(maxCapacity=0),
        f"{S0}.capacityLimits[0].maxCapacity",
        "must be at least 1 (got 0)",
        id="share-maxCapacity-0",
    ),
    pytest.param(
        share_limit(maxCapacity=1.5),
        f"{S0}.capacityLimits[0].maxCapacity",
        "must be a whole number (got 1.5)",
        id="share-maxCapacity-float",
    ),
    pytest.param(
        share_limit(maxCapacity="2"),
        f"{S0}.capacityLimits[0].maxCapacity",
        "must be a whole number (got '2')",
        id="share-maxCapacity-str",
    ),
    pytest.param(
        share_limit(maxCapacity=True),
        f"{S0}.capacityLimits[0].maxCapacity",
        "must be a whole number (got true)",
        id="share-maxCapacity-bool",
    ),
    pytest.param(
        share_limit(maxCapacity=None),
        f"{S0}.capacityLimits[0].maxCapacity",
        "must be a whole number (got null)",
        id="share-maxCapacity-null",
    ),
    pytest.param(
        share_limit(maxCapcity=1),
        f"{S0}.capacityLimits[0].maxCapcity",
        "did you mean 'maxCapacity'?",
        id="share-limit-unknown-field",
    ),
    pytest.param(
        share(
            capacityLimits=[
                {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1},
                {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2},
            ]
        ),
        f"{S0}.capacityLimits",
        "lists ml.g5.xlarge more than once; give each instance type one limit",
        id="share-duplicate-unit",
    ),
    pytest.param(
        share_units({"ml.m5.xlarge": 1}, g5(3)),
        f"{S0}.capacityLimits[0].capacityUnit",
        "ml.m5.xlarge is not in serviceEnvironment.capacityLimits (ml.g5.xlarge); jobs of this "
        "share that need it could never run",
        id="share-unit-outside-environment",
    ),
    pytest.param(
        share_without("resourceSharingConfiguration"),
        f"{S0}.resourceSharingConfiguration",
        "is required",
        id="sharing-missing",
    ),
    pytest.param(sharing(), f"{RSC}.strategy", "is required", id="strategy-missing"),
    pytest.param(
        sharing(strategy="lend_and_borrow"),
        f"{RSC}.strategy",
        "did you mean LEND_AND_BORROW?",
        id="strategy-case",
    ),
    pytest.param(
        sharing(strategy="SHARE"),
        f"{RSC}.strategy",
        "must be one of RESERVE, LEND or LEND_AND_BORROW (got 'SHARE')",
        id="strategy-enum",
    ),
    pytest.param(
        sharing(strategy="LEND", borrowLimit=100),
        f"{RSC}.borrowLimit",
        "only allowed with strategy LEND_AND_BORROW (strategy is LEND)",
        id="borrowLimit-with-LEND",
    ),
    pytest.param(
        sharing(strategy="RESERVE", borrowLimit=-1),
        f"{RSC}.borrowLimit",
        "only allowed with strategy LEND_AND_BORROW (strategy is RESERVE)",
        id="borrowLimit-with-RESERVE",
    ),
    pytest.param(
        sharing(strategy="LEND_AND_BORROW", borrowLimit=-2),
        f"{RSC}.borrowLimit",
        "must be at least -1 (got -2)",
        id="borrowLimit--2",
    ),
    pytest.param(
        sharing(strategy="LEND_AND_BORROW", borrowLimit="100%"),
        f"{RSC}.borrowLimit",
        "must be a whole number (got '100%')",
        id="borrowLimit-str",
    ),
    pytest.param(
        sharing(strategy="LEND_AND_BORROW", borrowLimit=50.5),
        f"{RSC}.borrowLimit",
        "must be a whole number (got 50.5)",
        id="borrowLimit-float",
    ),
    pytest.param(
        sharing(strategy="LEND_AND_BORROW", borrowlimit=100),
        f"{RSC}.borrowlimit",
        "did you mean 'borrowLimit'?",
        id="sharing-unknown-field",
    ),
    pytest.param(
        share_without("preemptionConfiguration"),
        f"{S0}.preemptionConfiguration",
        "is required",
        id="preemption-missing",
    ),
    pytest.param(
        preemption(),
        f"{S0}.preemptionConfiguration.inSharePreemption",
        "is required",
        id="inSharePreemption-missing",
    ),
    pytest.param(
        preemption(inSharePreemption=True),
        f"{S0}.preemptionConfiguration.inSharePreemption",
        f"must be one of ENABLED or DISABLED (got true); did you mean ENABLED? {YAML_HINT}",
        id="inSharePreemption-yaml-on",
    ),
    pytest.param(
        preemption(inSharePreemption=False),
        f"{S0}.preemptionConfiguration.inSharePreemption",
        "did you mean DISABLED?",
        id="inSharePreemption-yaml-off",
    ),
    pytest.param(
        preemption(inSharePreemption="enabled"),
        f"{S0}.preemptionConfiguration.inSharePreemption",
        "did you mean ENABLED?",
        id="inSharePreemption-case",
    ),
    pytest.param(
        preemption(inSharePreemption="ENABLED", inSharePreemtion="ENABLED"),
        f"{S0}.preemptionConfiguration.inSharePreemtion",
        "did you mean 'inSharePreemption'?",
        id="preemption-unknown-field",
    ),
]


@pytest.mark.parametrize(("raw", "path", "fragment"), FAILING)
def test_rule_rejects_with_path_and_message(raw: object, path: str, fragment: str) -> None:
    assert_error(raw, path, fragment)


PASSING = [
    pytest.param(guide_layout().build(), id="guide-layout"),
    pytest.param(shares(20), id="20-shares"),
    pytest.param(top(quotaShares=[]), id="no-shares"),
    pytest.param(top(quotaShares=None), id="shares-null"),
    pytest.param(queue(priority=0), id="priority-0"),
    pytest.param(queue(priority=1000), id="priority-1000"),
    pytest.param(queue(state="DISABLED"), id="queue-state-DISABLED"),
    pytest.param(top(reductionPolicy="drain"), id="reduction-drain"),
    pytest.param(named("q" * 128, policy_name="p", env_name="e"), id="queue-name-128"),
    pytest.param(queue(jobQueueName="ML_training-2"), id="queue-name-characters"),
    pytest.param(named("q" * 115, policy_name=None, env_name=None), id="derived-policy-name-128"),
    pytest.param(named("q" * 124, policy_name="p", env_name=None), id="derived-env-name-128"),
    pytest.param(action(maxTimeSeconds=600), id="maxTimeSeconds-600"),
    pytest.param(action(maxTimeSeconds=86400), id="maxTimeSeconds-86400"),
    pytest.param(
        queue(
            jobStateTimeLimitActions=[
                {**ACTION, "reason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"},
                {**ACTION, "reason": "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"},
                {**ACTION, "reason": "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"},
            ]
        ),
        id="actions-each-reason-once",
    ),
    pytest.param(tags("jobQueue", many_tags(49)), id="tags-49"),
    pytest.param(tags("jobQueue", {"team": "x" * 256}), id="tag-value-256"),
    pytest.param(tags("jobQueue", {"k" * 128: "v"}), id="tag-key-128"),
    pytest.param(tags("jobQueue", {"team": ""}), id="tag-value-empty"),
    pytest.param(tags("jobQueue", {"awsteam": "x", "team:aws": "y"}), id="tag-aws-not-prefix"),
    pytest.param(
        tags("jobQueue", {"cost center/ü 東京": "a+b-c=d.e_f:g/h@i 42", "empty": ""}),
        id="tag-every-allowed-character",
    ),
    pytest.param(tags("schedulingPolicy", many_tags(49)), id="policy-tags-49"),
    pytest.param(tags("serviceEnvironment", many_tags(49)), id="env-tags-49"),
    pytest.param(tags("quotaShares[0]", many_tags(49)), id="share-tags-49"),
    pytest.param(policy(name="p" * 128), id="policy-name-128"),
    pytest.param(env(serviceEnvironmentName="e" * 128), id="env-name-128"),
    pytest.param(env_limits(FIVE_UNITS), id="env-5-limits"),
    pytest.param(env_limit(maxCapacity=1), id="env-maxCapacity-1"),
    pytest.param(share(quotaShareName="t" * 128), id="share-name-128"),
    pytest.param(share_units(FIVE_UNITS), id="share-5-limits"),
    pytest.param(share_units({"ml.g5.4xlarge": 1}), id="share-unit-subset-of-environment"),
    pytest.param(share_limit(maxCapacity=1), id="share-maxCapacity-1"),
    pytest.param(share(state="DISABLED"), id="share-state-DISABLED"),
    pytest.param(sharing(strategy="LEND_AND_BORROW", borrowLimit=-1), id="borrowLimit--1"),
    pytest.param(sharing(strategy="LEND_AND_BORROW", borrowLimit=0), id="borrowLimit-0"),
    pytest.param(sharing(strategy="LEND_AND_BORROW", borrowLimit=500), id="borrowLimit-500"),
    pytest.param(sharing(strategy="LEND_AND_BORROW"), id="borrowLimit-omitted"),
    pytest.param(sharing(strategy="RESERVE"), id="strategy-RESERVE"),
    pytest.param(preemption(inSharePreemption="ENABLED"), id="inSharePreemption-ENABLED"),
]


@pytest.mark.parametrize("raw", PASSING)
def test_boundary_passes(raw: object) -> None:
    assert_valid(raw)


def test_yaml_on_for_in_share_preemption_gets_the_yaml_hint() -> None:
    text = """
jobQueue: {jobQueueName: ml-training}
serviceEnvironment:
  capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
quotaShares:
  - quotaShareName: team-a
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
    resourceSharingConfiguration: {strategy: RESERVE}
    preemptionConfiguration: {inSharePreemption: on}
"""
    assert_error(
        parse_text(text).data,
        "quotaShares[0].preemptionConfiguration.inSharePreemption",
        f"did you mean ENABLED? {YAML_HINT}",
    )


def test_duplicate_share_names_are_reported_at_each_share() -> None:
    raw = guide_layout().share("team-a", "LEND", **g5(1)).build()

    report = validate_document(raw)

    assert {p.location: p.share_index for p in report.errors} == {
        "quotaShares[0].quotaShareName": 0,
        "quotaShares[3].quotaShareName": 3,
    }
    messages = [p.message for p in report.errors]
    assert "'team-a' is used more than once (also at quotaShares[3])" in messages[0]
    assert "share names must be unique within a job queue" in messages[0]
    assert "(also at quotaShares[0])" in messages[1]
    assert report.invalid_share_names == {"team-a"}
    assert [s.quotaShareName for s in report.shares] == ["team-b", "team-c"]


def test_duplicate_share_name_is_reported_even_when_the_other_share_is_invalid() -> None:
    # Every problem at once: the duplicate must not only surface after the other error is fixed.
    raw = guide_layout().add(ShareBuilder("team-a", g5(1)).set(state="on")).build()

    report = validate_document(raw)

    locations = {p.location for p in report.errors}
    assert "quotaShares[3].state" in locations
    assert "quotaShares[0].quotaShareName" in locations
    assert "team-a" not in {s.quotaShareName for s in report.shares}


@pytest.mark.parametrize(
    ("raw", "other_error"),
    [
        pytest.param(
            DocBuilder()
            .env(**g5(3))
            .add(ShareBuilder("team-a", {"ml.m5.xlarge": 1}).set(state="enabled"))
            .build(),
            "quotaShares[0].state",
            id="share-also-invalid",
        ),
        pytest.param(
            DocBuilder()
            .env(**g5(3))
            .queue(priority=5000)
            .add(ShareBuilder("team-a", {"ml.m5.xlarge": 1}))
            .build(),
            "jobQueue.priority",
            id="queue-also-invalid",
        ),
    ],
)
def test_unit_outside_environment_is_reported_alongside_other_errors(
    raw: object, other_error: str
) -> None:
    report = validate_document(raw)

    assert {p.location for p in report.errors} == {
        other_error,
        "quotaShares[0].capacityLimits[0].capacityUnit",
    }
    outside = next(p for p in report.errors if p.location.endswith("capacityUnit"))
    assert "ml.m5.xlarge is not in serviceEnvironment.capacityLimits" in outside.message
    assert (outside.share, outside.share_index) == ("team-a", 0)


def test_every_problem_is_reported_at_once() -> None:
    doc = (
        DocBuilder()
        .env(**g5(3))
        .queue(priority=1001, tags={"aws:owner": "ml"})
        .set(schedulingPolicy={"nam": "p"}, extra=True)
        .share("team-a", "LEND", **g5(1))
        .add(ShareBuilder("team-b", g5(1)).strategy("LEND", 100))
        .add(ShareBuilder("team-c", {"ml.g5.xlarge": 0}))
        .add(ShareBuilder("team-d", {"ml.m5.xlarge": 1}))
        .add(ShareBuilder("team-e", g5(1)).in_share_preemption("enabled"))
        .add(ShareBuilder("team-f", {"NUM_INSTANCES": 1}))
    )

    report = validate_document(doc.build())

    assert sorted(p.location for p in report.errors) == sorted(
        [
            "extra",
            "jobQueue.priority",
            "jobQueue.tags",
            "schedulingPolicy.nam",
            "quotaShares[1].resourceSharingConfiguration.borrowLimit",
            "quotaShares[2].capacityLimits[0].maxCapacity",
            "quotaShares[3].capacityLimits[0].capacityUnit",
            "quotaShares[4].preemptionConfiguration.inSharePreemption",
            "quotaShares[5].capacityLimits[0].capacityUnit",
        ]
    )
    assert [s.quotaShareName for s in report.shares] == ["team-a"]


def test_share_errors_are_scoped_to_their_share() -> None:
    raw = (
        guide_layout()
        .add(ShareBuilder("team-d", g5(1)).strategy("LEND", 50))
        .add(ShareBuilder("team-e", g5(0)))
        .build()
    )

    report = validate_document(raw)

    assert [(p.location, p.share, p.share_index) for p in report.errors] == [
        ("quotaShares[3].resourceSharingConfiguration.borrowLimit", "team-d", 3),
        ("quotaShares[4].capacityLimits[0].maxCapacity", "team-e", 4),
    ]
    assert report.queue_wide_errors == []
    assert report.invalid_share_names == {"team-d", "team-e"}
    # The reconciler can still converge the valid shares of the queue.
    assert [s.quotaShareName for s in report.shares] == ["team-a", "team-b", "team-c"]
    assert sorted(report.valid_shares) == [0, 1, 2]
    assert report.settings is not None
    assert report.document is None


def test_share_without_a_readable_name_is_scoped_by_index() -> None:
    raw = guide_layout().build()
    raw["quotaShares"][1]["quotaShareName"] = 42

    report = validate_document(raw)

    assert [(p.location, p.share, p.share_index) for p in report.errors] == [
        ("quotaShares[1].quotaShareName", None, 1)
    ]
    assert report.queue_wide_errors == []
    assert [s.quotaShareName for s in report.shares] == ["team-a", "team-c"]


def test_queue_wide_errors_are_not_scoped_to_a_share() -> None:
    raw = guide_layout().queue(priority=-1).set(reductionPolicy="never").build()

    report = validate_document(raw)

    assert [(p.location, p.share, p.share_index) for p in report.queue_wide_errors] == [
        ("jobQueue.priority", None, None),
        ("reductionPolicy", None, None),
    ]
    assert report.queue_wide_errors == report.errors
    assert report.invalid_share_names == set()
    assert report.settings is None
    assert report.document is None


def test_too_many_shares_is_queue_wide() -> None:
    report = validate_document(shares(21))

    assert [p.location for p in report.queue_wide_errors] == ["quotaShares"]
    assert report.document is None


def test_valid_document_is_returned_whole() -> None:
    report = assert_valid(guide_layout().build())

    document = report.document
    assert document is not None
    assert document.queue_name == "ml-training"
    assert document.scheduling_policy_name == "ml-training-quota-policy"
    assert document.service_environment_name == "ml-training-env"
    assert [s.quotaShareName for s in document.quotaShares] == ["team-a", "team-b", "team-c"]
    assert report.warnings == []


WARNINGS = [
    pytest.param(
        DocBuilder().env(**g5(2)).share("team-a", "LEND", **g5(3)),
        "quotaShares[0].capacityLimits[0].maxCapacity",
        "3 x ml.g5.xlarge is more than the service environment's 2; the share can never run "
        "more than 2 at once",
        ("team-a", 0),
        id="share-above-environment",
    ),
    pytest.param(
        DocBuilder().env(**g5(3)).share("team-a", "LEND", **g5(2)).share("team-b", "LEND", **g5(2)),
        "serviceEnvironment.capacityLimits[0].maxCapacity",
        "the quota shares' limits for ml.g5.xlarge add up to 4, more than the 3 the environment "
        "has",
        (None, None),
        id="sum-above-environment",
    ),
    pytest.param(
        DocBuilder()
        .env(**g5(3))
        .share("team-a", "LEND_AND_BORROW", **g5(1))
        .share("team-b", "RESERVE", **g5(1)),
        "quotaShares[0].capacityLimits[0].capacityUnit",
        "no other quota share lends ml.g5.xlarge, so this LEND_AND_BORROW share can never "
        "borrow it",
        ("team-a", 0),
        id="borrower-without-lender",
    ),
    pytest.param(
        DocBuilder()
        .env(**g5(3))
        .share("team-a", "LEND_AND_BORROW", 0, **g5(1))
        .share("team-b", "LEND", **g5(1)),
        "quotaShares[0].resourceSharingConfiguration.borrowLimit",
        "0 means this share never borrows",
        ("team-a", 0),
        id="borrowLimit-0",
    ),
]


@pytest.mark.parametrize(("doc", "path", "fragment", "scope"), WARNINGS)
def test_warnings_do_not_make_the_document_invalid(
    doc: DocBuilder, path: str, fragment: str, scope: tuple[str | None, int | None]
) -> None:
    report = assert_valid(doc.build())

    matching = [w for w in report.warnings if w.location == path]
    assert len(matching) == 1, [str(w) for w in report.warnings]
    warning = matching[0]
    assert fragment in warning.message
    assert warning.severity == "warning"
    assert (warning.share, warning.share_index) == scope
    assert len(report.shares) == len(doc.raw["quotaShares"])


def test_sum_equal_to_environment_and_a_lender_give_no_warning() -> None:
    report = assert_valid(guide_layout().build())

    assert report.warnings == []


def test_problem_renders_as_path_and_sentence() -> None:
    report = assert_error(
        sharing(strategy="LEND", borrowLimit=100),
        "quotaShares[0].resourceSharingConfiguration.borrowLimit",
        "only allowed",
    )

    assert str(report.errors[0]) == (
        "quotaShares[0].resourceSharingConfiguration.borrowLimit: only allowed with strategy "
        "LEND_AND_BORROW (strategy is LEND)"
    )


def problems(raw: object) -> list[tuple[str, str]]:
    return [(p.location, p.message) for p in validate_document(raw).errors]


def test_a_share_with_six_limits_gets_every_problem_at_once() -> None:
    # An environment has at most five types, so the sixth is missing from it too.
    assert problems(share_units(SIX_UNITS)) == [
        (f"{S0}.capacityLimits", "allows at most 5 entries (got 6)"),
        (
            f"{S0}.capacityLimits[5].capacityUnit",
            "ml.g5.16xlarge is not in serviceEnvironment.capacityLimits (ml.g5.xlarge, "
            "ml.g5.2xlarge, ml.g5.4xlarge, ml.g5.8xlarge, ml.g5.12xlarge); jobs of this share "
            "that need it could never run",
        ),
    ]


def test_a_share_with_several_broken_limits_gets_every_problem_at_once() -> None:
    raw = share_units({})
    raw["quotaShares"][0]["capacityLimits"] = [
        {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 0},
        {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1},
        {"capacityUnit": "ml.g5.16xlarge", "maxCapacity": 1},
    ]
    raw["quotaShares"][0]["resourceSharingConfiguration"] = {"strategy": "LEND_AND_BOROW"}
    assert [where for where, _ in problems(raw)] == [
        f"{S0}.capacityLimits[0].maxCapacity",
        f"{S0}.resourceSharingConfiguration.strategy",
        f"{S0}.capacityLimits[1].capacityUnit",
        f"{S0}.capacityLimits[2].capacityUnit",
    ]
    assert "lists ml.g5.xlarge more than once (also at capacityLimits[0])" in problems(raw)[2][1]
    assert "ml.g5.16xlarge is not in serviceEnvironment.capacityLimits" in problems(raw)[3][1]


def test_every_repeated_type_is_reported_once() -> None:
    # The model names the first repeated type; the second is reported too, in the same run,
    # and a repeated unit that is no instance type is reported as such, not twice.
    raw = share_units({})
    raw["serviceEnvironment"]["capacityLimits"] = [
        {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 3},
        {"capacityUnit": "ml.p3.2xlarge", "maxCapacity": 3},
    ]
    limits = [(u, 1) for u in ("ml.g5.xlarge", "ml.g5.xlarge", "ml.p3.2xlarge", "ml.p3.2xlarge")]
    raw["quotaShares"][0]["capacityLimits"] = [
        {"capacityUnit": u, "maxCapacity": n} for u, n in limits
    ]
    assert problems(raw) == [
        (
            f"{S0}.capacityLimits",
            "lists ml.g5.xlarge more than once; give each instance type one limit",
        ),
        (
            f"{S0}.capacityLimits[3].capacityUnit",
            "lists ml.p3.2xlarge more than once (also at capacityLimits[2]); give each instance "
            "type one limit",
        ),
    ]
    raw["quotaShares"][0]["capacityLimits"] = [{"capacityUnit": "ml.bogus", "maxCapacity": 1}] * 2
    assert [where for where, _ in problems(raw)] == [
        f"{S0}.capacityLimits[0].capacityUnit",
        f"{S0}.capacityLimits[1].capacityUnit",
    ]
