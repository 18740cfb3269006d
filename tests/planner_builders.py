"""Fluent builders for the planner's inputs: what Batch reports, and the desired state.

have = observed().policy().env(**g5(3)).queue().share("team-a", **g5(1)).build()
have = converged(guide_layout()).edit_share("team-a", state="DISABLED").build()
want = desired(guide_layout(), force=True)

Observed resources are written as the Batch API returns them (plain dicts) and parsed with the
`observed` models, with ARNs in the documented formats and the owner tag set unless `owned=False`
(`owned="other-queue"` marks a resource of another queue). Names default to the ones the
controller derives from the queue name: `<queue>-quota-policy` and `<queue>-env`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from builders import DocBuilder

from quota_controller.domain.config import QueueSettings, QuotaShareSpec, validate_document
from quota_controller.domain.config.fields import OWNER_TAG
from quota_controller.domain.observed import (
    ObservedEnvironment,
    ObservedPolicy,
    ObservedQueue,
    ObservedShare,
    ObservedState,
)
from quota_controller.domain.plan_records import Desired, Plan, Scope
from quota_controller.domain.planner import plan

ACCOUNT = "123456789012"
REGION = "us-east-1"
SCOPE = Scope(ACCOUNT, REGION)
QUEUE = "ml-training"

# "Attach what the builder holds": the queue's policy and environment unless named.
_HELD = object()


def policy_arn(name: str) -> str:
    return SCOPE.arn(f"scheduling-policy/{name}")


def env_arn(name: str) -> str:
    return SCOPE.arn(f"service-environment/{name}")


def queue_arn(name: str = QUEUE) -> str:
    return SCOPE.arn(f"job-queue/{name}")


def share_arn(name: str, queue: str = QUEUE) -> str:
    return f"{queue_arn(queue)}/quota-share/{name}"


def limit_list(limits: Mapping[str, int]) -> list[dict[str, Any]]:
    """`{unit: n}` -> `[{"capacityUnit": unit, "maxCapacity": n}]`, as Batch writes limits."""
    return [{"capacityUnit": u, "maxCapacity": n} for u, n in limits.items()]


class ObservedBuilder:
    """Collects resources as keyword arguments; `build()` turns them into Batch API dicts."""

    def __init__(self, queue: str = QUEUE):
        self.queue_name = queue
        self._policy: dict[str, Any] | None = None
        self._envs: dict[str, dict[str, Any]] = {}
        self._queue: dict[str, Any] | None = None
        self._shares: dict[str, dict[str, Any]] = {}

    # -- resources ---------------------------------------------------------------------------

    def policy(
        self,
        name: str | None = None,
        *,
        fair_share: bool = False,
        owned: bool | str = True,
        tags: Mapping[str, str] | None = None,
    ) -> ObservedBuilder:
        """The scheduling policy (Batch reports one per queue here; a second call replaces it)."""
        self._policy = {
            "name": name or f"{self.queue_name}-quota-policy",
            "fair_share": fair_share,
            "owned": owned,
            "tags": dict(tags or {}),
        }
        return self

    def env(
        self,
        name: str | None = None,
        *,
        status: str = "VALID",
        state: str = "ENABLED",
        env_type: str = "SAGEMAKER_TRAINING",
        owned: bool | str = True,
        tags: Mapping[str, str] | None = None,
        **limits: int,
    ) -> ObservedBuilder:
        """A service environment with capacity limits `{instance type: max}`."""
        name = name or f"{self.queue_name}-env"
        self._envs[name] = {
            "status": status,
            "state": state,
            "env_type": env_type,
            "owned": owned,
            "tags": dict(tags or {}),
            "limits": dict(limits),
        }
        return self

    def queue(
        self,
        name: str | None = None,
        *,
        status: str = "VALID",
        state: str = "ENABLED",
        priority: int = 1,
        policy: Any = _HELD,
        env: Any = _HELD,
        queue_type: str = "SAGEMAKER_TRAINING",
        time_limits: Iterable[Mapping[str, Any]] = (),
        owned: bool | str = True,
        tags: Mapping[str, str] | None = None,
    ) -> ObservedBuilder:
        """The job queue. `policy`/`env`: a name, None for none, default what the builder holds."""
        if name:
            self.queue_name = name
        self._queue = {
            "status": status,
            "state": state,
            "priority": priority,
            "policy": policy,
            "env": env,
            "queue_type": queue_type,
            "time_limits": [dict(a) for a in time_limits],
            "owned": owned,
            "tags": dict(tags or {}),
        }
        return self

    def share(
        self,
        name: str,
        *,
        state: str = "ENABLED",
        status: str = "VALID",
        strategy: str = "RESERVE",
        borrow_limit: int | None = None,
        preemption: str = "DISABLED",
        **limits: int,
    ) -> ObservedBuilder:
        """A quota share of the queue (ListQuotaShares carries no tags)."""
        self._shares[name] = {
            "state": state,
            "status": status,
            "strategy": strategy,
            "borrow_limit": borrow_limit,
            "preemption": preemption,
            "limits": dict(limits),
        }
        return self

    # -- changing what is held ---------------------------------------------------------------

    def edit_policy(self, **fields: Any) -> ObservedBuilder:
        assert self._policy is not None, "no policy to edit"
        self._policy.update(fields)
        return self

    def edit_env(self, name: str | None = None, **fields: Any) -> ObservedBuilder:
        self._envs[name or f"{self.queue_name}-env"].update(fields)
        return self

    def edit_queue(self, **fields: Any) -> ObservedBuilder:
        assert self._queue is not None, "no queue to edit"
        self._queue.update(fields)
        return self

    def edit_share(self, *names: str, **fields: Any) -> ObservedBuilder:
        """Change fields of the named shares (of all shares when none is named)."""
        for name in names or tuple(self._shares):
            self._shares[name].update(fields)
        return self

    def drop_policy(self) -> ObservedBuilder:
        self._policy = None
        return self

    def drop_env(self, name: str | None = None) -> ObservedBuilder:
        del self._envs[name or f"{self.queue_name}-env"]
        return self

    def drop_queue(self) -> ObservedBuilder:
        self._queue = None
        return self

    def drop_share(self, *names: str) -> ObservedBuilder:
        """Remove the named shares (all shares when none is named)."""
        for name in names or tuple(self._shares):
            del self._shares[name]
        return self

    # -- the Batch API dicts -----------------------------------------------------------------

    def _tags(self, spec: Mapping[str, Any]) -> dict[str, str]:
        tags = dict(spec["tags"])
        owned = spec["owned"]
        if owned:
            tags[OWNER_TAG] = self.queue_name if owned is True else owned
        return tags

    def policy_raw(self) -> dict[str, Any] | None:
        if self._policy is None:
            return None
        spec = self._policy
        raw: dict[str, Any] = {
            "name": spec["name"],
            "arn": policy_arn(spec["name"]),
            "tags": self._tags(spec),
        }
        if spec["fair_share"]:
            raw["fairsharePolicy"] = {
                "shareDecaySeconds": 3600,
                "computeReservation": 0,
                "shareDistribution": [],
            }
        else:
            raw["quotaSharePolicy"] = {"idleResourceAssignmentStrategy": "FIFO"}
        return raw

    def env_raw(self, name: str) -> dict[str, Any]:
        spec = self._envs[name]
        return {
            "serviceEnvironmentName": name,
            "serviceEnvironmentArn": env_arn(name),
            "serviceEnvironmentType": spec["env_type"],
            "state": spec["state"],
            "status": spec["status"],
            "capacityLimits": limit_list(spec["limits"]),
            "tags": self._tags(spec),
        }

    def queue_raw(self) -> dict[str, Any] | None:
        if self._queue is None:
            return None
        spec = self._queue
        raw: dict[str, Any] = {
            "jobQueueName": self.queue_name,
            "jobQueueArn": queue_arn(self.queue_name),
            "jobQueueType": spec["queue_type"],
            "state": spec["state"],
            "status": spec["status"],
            "priority": spec["priority"],
            "serviceEnvironmentOrder": [],
            "jobStateTimeLimitActions": spec["time_limits"],
            "tags": self._tags(spec),
        }
        policy = spec["policy"]
        if policy is _HELD:
            held = self._policy["name"] if self._policy else None
            policy = held or f"{self.queue_name}-quota-policy"
        if policy is not None:
            raw["schedulingPolicyArn"] = policy_arn(policy)
        env = spec["env"]
        if env is _HELD:
            env = next(iter(self._envs), f"{self.queue_name}-env")
        if env is not None:
            raw["serviceEnvironmentOrder"] = [{"order": 1, "serviceEnvironment": env_arn(env)}]
        return raw

    def share_raw(self, name: str) -> dict[str, Any]:
        spec = self._shares[name]
        sharing: dict[str, Any] = {"strategy": spec["strategy"]}
        if spec["strategy"] == "LEND_AND_BORROW":
            # Batch shows the documented default, -1 (unlimited), when none was given.
            sharing["borrowLimit"] = -1 if spec["borrow_limit"] is None else spec["borrow_limit"]
        return {
            "quotaShareName": name,
            "quotaShareArn": share_arn(name, self.queue_name),
            "jobQueueArn": queue_arn(self.queue_name),
            "capacityLimits": limit_list(spec["limits"]),
            "resourceSharingConfiguration": sharing,
            "preemptionConfiguration": {"inSharePreemption": spec["preemption"]},
            "state": spec["state"],
            "status": spec["status"],
        }

    def build(self) -> ObservedState:
        policy = self.policy_raw()
        queue = self.queue_raw()
        return ObservedState(
            policy=ObservedPolicy.model_validate(policy) if policy else None,
            environments={
                name: ObservedEnvironment.model_validate(self.env_raw(name)) for name in self._envs
            },
            queue=ObservedQueue.model_validate(queue) if queue else None,
            shares={
                name: ObservedShare.model_validate(self.share_raw(name)) for name in self._shares
            },
        )


def observed(queue: str = QUEUE) -> ObservedBuilder:
    """An empty account: add what Batch should report."""
    return ObservedBuilder(queue)


def _raw(doc: DocBuilder | Mapping[str, Any]) -> Mapping[str, Any]:
    return doc.build() if isinstance(doc, DocBuilder) else doc


def _settings(doc: DocBuilder | Mapping[str, Any]) -> tuple[QueueSettings, list[QuotaShareSpec]]:
    report = validate_document(_raw(doc))
    if report.queue_wide_errors or report.settings is None:
        raise ValueError(f"the test document is invalid: {[str(p) for p in report.errors]}")
    return report.settings, report.shares


def desired(
    doc: DocBuilder | Mapping[str, Any] | None,
    *,
    frozen: Iterable[str] = (),
    force: bool | None = None,
    applied_share_tags: Mapping[str, Mapping[str, str]] | None = None,
    managed_policy: str | None = None,
    managed_environment: str | None = None,
    queue: str = QUEUE,
) -> Desired:
    """The planner's Desired for a document, as the reconciler builds it.

    `doc` None means the config is gone (teardown of `queue`). Shares the validator rejects are
    frozen, like the reconciler freezes them; `force` defaults to the document's.
    """
    if doc is None:
        return Desired(
            queue,
            None,
            force=bool(force),
            managed_policy=managed_policy,
            managed_environment=managed_environment,
        )
    report = validate_document(_raw(doc))
    settings = report.settings
    if report.queue_wide_errors or settings is None:
        raise ValueError(f"the test document is invalid: {[str(p) for p in report.errors]}")
    return Desired(
        settings.queue_name,
        settings,
        shares={s.quotaShareName: s for s in report.shares},
        frozen_shares=frozenset(report.invalid_share_names | set(frozen)),
        force=settings.force if force is None else force,
        managed_policy=managed_policy,
        managed_environment=managed_environment,
        applied_share_tags={k: dict(v) for k, v in (applied_share_tags or {}).items()},
    )


def converged(doc: DocBuilder | Mapping[str, Any]) -> ObservedBuilder:
    """What Batch reports once a document is fully applied: everything VALID, tags as wanted.

    Returns the builder, so a test can change one thing: `converged(doc).edit_share(...)`.
    """
    settings, shares = _settings(doc)
    env = settings.serviceEnvironment
    queue = settings.jobQueue
    out = ObservedBuilder(settings.queue_name)
    out.policy(settings.scheduling_policy_name, tags=settings.schedulingPolicy.tags)
    out.env(
        settings.service_environment_name,
        state=env.state,
        tags=env.tags,
        **{c.capacityUnit: c.maxCapacity for c in env.capacityLimits},
    )
    out.queue(
        state=queue.state,
        priority=queue.priority,
        policy=settings.scheduling_policy_name,
        env=settings.service_environment_name,
        time_limits=[a.model_dump() for a in queue.jobStateTimeLimitActions],
        tags=queue.tags,
    )
    for spec in shares:
        sharing = spec.resourceSharingConfiguration
        out.share(
            spec.quotaShareName,
            state=spec.state,
            strategy=sharing.strategy,
            borrow_limit=sharing.borrowLimit,
            preemption=spec.preemptionConfiguration.inSharePreemption,
            **{c.capacityUnit: c.maxCapacity for c in spec.capacityLimits},
        )
    return out


def share_tags(doc: DocBuilder | Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The tags the controller applies to each share of a document (its applied_share_tags)."""
    settings, shares = _settings(doc)
    return {s.quotaShareName: {**s.tags, OWNER_TAG: settings.queue_name} for s in shares}


def plan_for(want: Desired, have: ObservedBuilder | ObservedState) -> Plan:
    """`plan()` in the test account and Region."""
    state = have.build() if isinstance(have, ObservedBuilder) else have
    return plan(want, state, SCOPE)
