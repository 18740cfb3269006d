"""Hypothesis strategies for the property tests: valid quota documents, what Batch may report
about them (missing, transitional, drifted, extra, conflicting), documents with exactly one rule
broken, and the events of one job's preemption.

Documents are plain dicts, as YAML gives them. Observed states are `World`s: the Batch API dicts
of every resource (the shapes `planner_builders` writes), which `World.observe` turns into the
planner's `ObservedState` the way the gateway reads it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from planner_builders import QUEUE, SCOPE

from quota_controller.domain.config.fields import OWNER_TAG
from quota_controller.domain.config.model import TIME_LIMIT_REASONS
from quota_controller.domain.observed import (
    ObservedEnvironment,
    ObservedPolicy,
    ObservedQueue,
    ObservedShare,
    ObservedState,
)

POOL = (
    "ml.g5.xlarge",
    "ml.g5.2xlarge",
    "ml.p4d.24xlarge",
    "ml.m5.xlarge",
    "ml.c5.xlarge",
    "ml.trn1.2xlarge",
)
STRATEGIES = ("RESERVE", "LEND", "LEND_AND_BORROW")
STATES = ("ENABLED", "DISABLED")
TRANSITIONAL = ("CREATING", "UPDATING")

names = st.from_regex(r"[a-z][a-z0-9_-]{0,11}", fullmatch=True)
tag_keys = st.from_regex(r"[a-z][a-z0-9.:/=+@_-]{0,10}", fullmatch=True).filter(
    lambda k: not k.startswith("aws:") and k != OWNER_TAG
)
# Values of any script, within the AWS tag restrictions (letters, numbers, spaces, + - = . _ : / @).
tag_values = st.text(
    st.characters(categories=("L", "N", "Zs"), include_characters="+-=._:/@"), max_size=12
).filter(lambda v: not v.lower().startswith("aws:"))
tags = st.dictionaries(tag_keys, tag_values, max_size=3)


def policy_arn(name: str) -> str:
    return SCOPE.arn(f"scheduling-policy/{name}")


def env_arn(name: str) -> str:
    return SCOPE.arn(f"service-environment/{name}")


def queue_arn(name: str) -> str:
    return SCOPE.arn(f"job-queue/{name}")


def share_arn(queue: str, name: str) -> str:
    return f"{queue_arn(queue)}/quota-share/{name}"


# -- valid documents ---------------------------------------------------------------------------


@st.composite
def limits(draw: st.DrawFn, units: list[str], top: int = 64) -> list[dict[str, Any]]:
    chosen = draw(st.lists(st.sampled_from(units), min_size=1, max_size=5, unique=True))
    return [{"capacityUnit": u, "maxCapacity": draw(st.integers(1, top))} for u in chosen]


@st.composite
def shares(draw: st.DrawFn, name: str, units: list[str]) -> dict[str, Any]:
    strategy = draw(st.sampled_from(STRATEGIES))
    sharing: dict[str, Any] = {"strategy": strategy}
    if strategy == "LEND_AND_BORROW":
        borrow = draw(st.none() | st.integers(-1, 300))
        if borrow is not None:
            sharing["borrowLimit"] = borrow
    share: dict[str, Any] = {
        "quotaShareName": name,
        "capacityLimits": draw(limits(units)),
        "resourceSharingConfiguration": sharing,
        "preemptionConfiguration": {"inSharePreemption": draw(st.sampled_from(STATES))},
    }
    if draw(st.booleans()):
        share["state"] = draw(st.sampled_from(STATES))
    if draw(st.booleans()):
        share["tags"] = draw(tags)
    return share


@st.composite
def documents(draw: st.DrawFn, min_shares: int = 1, max_shares: int = 20) -> dict[str, Any]:
    """A valid quota document: 1..20 shares, 1..5 instance types of a small pool."""
    units = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=5, unique=True))
    job_queue: dict[str, Any] = {"jobQueueName": draw(st.sampled_from([QUEUE, "q-2"]))}
    if draw(st.booleans()):
        job_queue["priority"] = draw(st.integers(0, 1000))
    if draw(st.booleans()):
        job_queue["state"] = draw(st.sampled_from(STATES))
    reasons = draw(st.lists(st.sampled_from(TIME_LIMIT_REASONS), max_size=3, unique=True))
    if reasons:
        job_queue["jobStateTimeLimitActions"] = [
            {
                "reason": r,
                "state": "RUNNABLE",
                "maxTimeSeconds": draw(st.integers(600, 86400)),
                "action": "TERMINATE",
            }
            for r in reasons
        ]
    if draw(st.booleans()):
        job_queue["tags"] = draw(tags)
    environment: dict[str, Any] = {
        "capacityLimits": [
            {"capacityUnit": u, "maxCapacity": draw(st.integers(1, 64))} for u in units
        ]
    }
    if draw(st.booleans()):
        environment["serviceEnvironmentName"] = "env-" + draw(names)
    if draw(st.integers(0, 4)) == 0:
        environment["state"] = "DISABLED"
    if draw(st.booleans()):
        environment["tags"] = draw(tags)
    doc: dict[str, Any] = {"jobQueue": job_queue, "serviceEnvironment": environment}
    if draw(st.booleans()):
        doc["schedulingPolicy"] = {"name": "policy-" + draw(names)}
    if draw(st.booleans()):
        doc["reductionPolicy"] = draw(st.sampled_from(["warn", "block", "drain"]))
    share_names = draw(st.lists(names, min_size=min_shares, max_size=max_shares, unique=True))
    doc["quotaShares"] = [draw(shares(n, units)) for n in share_names]
    return doc


def policy_name(doc: Mapping[str, Any]) -> str:
    given = (doc.get("schedulingPolicy") or {}).get("name")
    return str(given or f"{doc['jobQueue']['jobQueueName']}-quota-policy")


def env_name(doc: Mapping[str, Any]) -> str:
    given = doc["serviceEnvironment"].get("serviceEnvironmentName")
    return str(given or f"{doc['jobQueue']['jobQueueName']}-env")


# -- what Batch reports ------------------------------------------------------------------------


class Refused(AssertionError):
    """Batch would refuse this request (a ClientException): a plan must never contain one."""


@dataclass
class World:
    """Every Batch resource of one account, as the API returns them, plus the share tags the
    controller last applied (status `appliedTags`: ListQuotaShares returns no tags)."""

    queue_name: str
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    envs: dict[str, dict[str, Any]] = field(default_factory=dict)
    queue: dict[str, Any] | None = None
    shares: dict[str, dict[str, Any]] = field(default_factory=dict)
    share_tags: dict[str, dict[str, str]] = field(default_factory=dict)
    applied_share_tags: dict[str, dict[str, str]] = field(default_factory=dict)

    def copy(self) -> World:
        return copy.deepcopy(self)

    # -- reading, as BotoBatchGateway.observe does -------------------------------------------

    def observe(self, wanted_policy: str, reverse: bool = False) -> ObservedState:
        """The planner's input; `reverse` lists every mapping in the opposite order."""

        def order(items: Mapping[str, Any]) -> list[tuple[str, Any]]:
            pairs = list(items.items())
            return pairs[::-1] if reverse else pairs

        def tagged(raw: dict[str, Any]) -> dict[str, Any]:
            out = dict(raw)
            if "tags" in out:
                out["tags"] = dict(order(out["tags"]))
            return out

        queue = self.queue
        read = {
            n: p
            for n, p in self.policies.items()
            if n == wanted_policy
            or (queue is not None and queue.get("schedulingPolicyArn") == p["arn"])
            or p["tags"].get(OWNER_TAG) == self.queue_name
        }
        by_arn = sorted(read.values(), key=lambda p: p["arn"])
        chosen = read.get(wanted_policy) or (by_arn[0] if by_arn else None)
        shares = {} if queue is None or queue["status"] == "DELETED" else self.shares
        return ObservedState(
            policy=ObservedPolicy.model_validate(tagged(chosen)) if chosen else None,
            policies={n: ObservedPolicy.model_validate(tagged(p)) for n, p in order(read)},
            environments={
                n: ObservedEnvironment.model_validate(tagged(e)) for n, e in order(self.envs)
            },
            queue=ObservedQueue.model_validate(tagged(queue)) if queue else None,
            shares={n: ObservedShare.model_validate(s) for n, s in order(shares)},
        )

    # -- writing, with the rules Batch enforces ----------------------------------------------

    def _env_by_arn(self, arn: str) -> dict[str, Any]:
        for env in self.envs.values():
            if arn in (env["serviceEnvironmentArn"], env["serviceEnvironmentName"]):
                return env
        raise Refused(f"service environment {arn} does not exist")

    def _policy_by_arn(self, arn: str) -> dict[str, Any]:
        for policy in self.policies.values():
            if policy["arn"] == arn:
                return policy
        raise Refused(f"scheduling policy {arn} does not exist")

    def _share_by_arn(self, arn: str) -> dict[str, Any]:
        for share in self.shares.values():
            if share["quotaShareArn"] == arn:
                return share
        raise Refused(f"quota share {arn} does not exist")

    def _live_queue(self, arn: str) -> dict[str, Any]:
        queue = self.queue
        if queue is None or queue["status"] == "DELETED" or queue["jobQueueArn"] != arn:
            raise Refused(f"job queue {arn} does not exist")
        return queue

    @staticmethod
    def _settled(resource: Mapping[str, Any], what: str) -> None:
        if resource.get("status") in ("CREATING", "UPDATING", "DELETING"):
            raise Refused(f"{what} cannot be changed while {resource['status']}")

    def _attached(self, env: Mapping[str, Any]) -> bool:
        queue = self.queue
        if queue is None or queue["status"] == "DELETED":
            return False
        refs = {o["serviceEnvironment"] for o in queue["serviceEnvironmentOrder"]}
        return bool(refs & {env["serviceEnvironmentArn"], env["serviceEnvironmentName"]})

    def _tag_target(self, arn: str) -> dict[str, str]:
        for policy in self.policies.values():
            if policy["arn"] == arn:
                return policy["tags"]  # type: ignore[no-any-return]
        for env in self.envs.values():
            if env["serviceEnvironmentArn"] == arn and env["status"] != "DELETED":
                return env["tags"]  # type: ignore[no-any-return]
        if self.queue is not None and self.queue["jobQueueArn"] == arn:
            return self.queue["tags"]  # type: ignore[no-any-return]
        for name, share in self.shares.items():
            if share["quotaShareArn"] == arn:
                return self.share_tags.setdefault(name, {})
        raise Refused(f"resource {arn} does not exist")

    def apply(self, operation: str, params: Mapping[str, Any]) -> None:
        """Make one planned request; raises Refused where Batch would refuse it."""
        p = copy.deepcopy(dict(params))
        getattr(self, "_" + operation)(p)

    def _CreateSchedulingPolicy(self, p: dict[str, Any]) -> None:
        if p["name"] in self.policies:
            raise Refused(f"scheduling policy {p['name']} already exists")
        if "quotaSharePolicy" not in p:
            raise Refused("the controller must create quota-share policies only")
        self.policies[p["name"]] = {
            "name": p["name"],
            "arn": policy_arn(p["name"]),
            "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"},
            "tags": dict(p.get("tags") or {}),
        }

    def _DeleteSchedulingPolicy(self, p: dict[str, Any]) -> None:
        policy = self._policy_by_arn(p["arn"])
        queue = self.queue
        in_use = queue is not None and queue["status"] != "DELETED"
        if in_use and queue is not None and queue.get("schedulingPolicyArn") == policy["arn"]:
            raise Refused(f"scheduling policy {policy['name']} is in use by a job queue")
        del self.policies[policy["name"]]

    def _CreateServiceEnvironment(self, p: dict[str, Any]) -> None:
        name = p["serviceEnvironmentName"]
        if name in self.envs and self.envs[name]["status"] != "DELETED":
            raise Refused(f"service environment {name} already exists")
        if p["serviceEnvironmentType"] != "SAGEMAKER_TRAINING":
            raise Refused("wrong environment type")
        self.envs[name] = {
            "serviceEnvironmentName": name,
            "serviceEnvironmentArn": env_arn(name),
            "serviceEnvironmentType": "SAGEMAKER_TRAINING",
            "state": p.get("state", "ENABLED"),
            "status": "CREATING",
            "capacityLimits": p["capacityLimits"],
            "tags": dict(p.get("tags") or {}),
        }

    def _UpdateServiceEnvironment(self, p: dict[str, Any]) -> None:
        env = self._env_by_arn(p["serviceEnvironment"])
        if env["status"] == "DELETED":
            raise Refused("service environment is deleted")
        self._settled(env, "service environment")
        for key in ("state", "capacityLimits"):
            if key in p:
                env[key] = p[key]
        env["status"] = "UPDATING"

    def _DeleteServiceEnvironment(self, p: dict[str, Any]) -> None:
        env = self._env_by_arn(p["serviceEnvironment"])
        self._settled(env, "service environment")
        if env["state"] != "DISABLED":
            raise Refused("a service environment must be DISABLED before it is deleted")
        if self._attached(env):
            raise Refused("a service environment used by a job queue cannot be deleted")
        env["status"] = "DELETING"

    def _CreateJobQueue(self, p: dict[str, Any]) -> None:
        if self.queue is not None and self.queue["status"] != "DELETED":
            raise Refused("job queue already exists")
        (order,) = p["serviceEnvironmentOrder"]
        env = self._env_by_arn(order["serviceEnvironment"])
        if env["status"] != "VALID":
            raise Refused("the service environment must be VALID")
        policy = self._policy_by_arn(p["schedulingPolicyArn"])
        if "quotaSharePolicy" not in policy:
            raise Refused("quota management needs a quota-share policy")
        self.queue = {
            "jobQueueName": p["jobQueueName"],
            "jobQueueArn": queue_arn(p["jobQueueName"]),
            "jobQueueType": p["jobQueueType"],
            "state": p.get("state", "ENABLED"),
            "status": "CREATING",
            "priority": p["priority"],
            "schedulingPolicyArn": policy["arn"],
            "serviceEnvironmentOrder": [
                {"order": 1, "serviceEnvironment": env["serviceEnvironmentArn"]}
            ],
            "jobStateTimeLimitActions": p.get("jobStateTimeLimitActions", []),
            "tags": dict(p.get("tags") or {}),
        }
        self.shares.clear()

    def _UpdateJobQueue(self, p: dict[str, Any]) -> None:
        queue = self._live_queue(p["jobQueue"])
        self._settled(queue, "job queue")
        if "schedulingPolicyArn" in p:
            new = self._policy_by_arn(p["schedulingPolicyArn"])
            old_arn = queue.get("schedulingPolicyArn")
            if old_arn is None:
                raise Refused("a queue created without a scheduling policy cannot get one")
            old = self._policy_by_arn(old_arn)
            if ("quotaSharePolicy" in old) != ("quotaSharePolicy" in new):
                raise Refused("the policy type of a job queue cannot be switched")
            queue["schedulingPolicyArn"] = new["arn"]
        if "serviceEnvironmentOrder" in p:
            (order,) = p["serviceEnvironmentOrder"]
            env = self._env_by_arn(order["serviceEnvironment"])
            if env["status"] != "VALID":
                raise Refused("the service environment must be VALID")
            queue["serviceEnvironmentOrder"] = [
                {"order": 1, "serviceEnvironment": env["serviceEnvironmentArn"]}
            ]
        for key in ("priority", "state", "jobStateTimeLimitActions"):
            if key in p:
                queue[key] = p[key]
        queue["status"] = "UPDATING"

    def _DeleteJobQueue(self, p: dict[str, Any]) -> None:
        queue = self._live_queue(p["jobQueue"])
        self._settled(queue, "job queue")
        if queue["state"] != "DISABLED":
            raise Refused("a job queue must be DISABLED before it is deleted")
        queue["status"] = "DELETING"

    def _CreateQuotaShare(self, p: dict[str, Any]) -> None:
        queue = self._live_queue(p["jobQueue"])
        if queue["status"] != "VALID":
            raise Refused(f"the job queue must be VALID to take shares (is {queue['status']})")
        policy = self._policy_by_arn(queue.get("schedulingPolicyArn") or "-")
        if "quotaSharePolicy" not in policy:
            raise Refused("quota shares need a queue with a quota-share policy")
        name = p["quotaShareName"]
        if name in self.shares:
            raise Refused(f"quota share {name} already exists")
        if len(self.shares) >= 20:
            raise Refused("a job queue has at most 20 quota shares")
        sharing = dict(p["resourceSharingConfiguration"])
        if sharing["strategy"] == "LEND_AND_BORROW":
            sharing.setdefault("borrowLimit", -1)
        self.shares[name] = {
            "quotaShareName": name,
            "quotaShareArn": share_arn(queue["jobQueueName"], name),
            "jobQueueArn": queue["jobQueueArn"],
            "capacityLimits": p["capacityLimits"],
            "resourceSharingConfiguration": sharing,
            "preemptionConfiguration": p["preemptionConfiguration"],
            "state": p.get("state", "ENABLED"),
            "status": "CREATING",
        }
        self.share_tags[name] = dict(p.get("tags") or {})

    def _UpdateQuotaShare(self, p: dict[str, Any]) -> None:
        share = self._share_by_arn(p["quotaShareArn"])
        self._settled(share, "quota share")
        for key in ("capacityLimits", "preemptionConfiguration", "state"):
            if key in p:
                share[key] = p[key]
        if "resourceSharingConfiguration" in p:
            sharing = dict(p["resourceSharingConfiguration"])
            if sharing["strategy"] == "LEND_AND_BORROW":
                sharing.setdefault("borrowLimit", -1)
            share["resourceSharingConfiguration"] = sharing
        share["status"] = "UPDATING"

    def _DeleteQuotaShare(self, p: dict[str, Any]) -> None:
        share = self._share_by_arn(p["quotaShareArn"])
        self._settled(share, "quota share")
        if share["state"] != "DISABLED":
            raise Refused("a quota share must be DISABLED before it is deleted")
        share["status"] = "DELETING"

    def _TagResource(self, p: dict[str, Any]) -> None:
        target = self._tag_target(p["resourceArn"])
        target.update(p["tags"])
        if len(target) > 50:
            raise Refused("a resource can have at most 50 tags")

    def _UntagResource(self, p: dict[str, Any]) -> None:
        target = self._tag_target(p["resourceArn"])
        for key in p["tagKeys"]:
            target.pop(key, None)

    def settle(self) -> None:
        """Batch finishes everything pending: CREATING/UPDATING -> VALID, DELETING -> gone."""
        for env in self.envs.values():
            if env["status"] in TRANSITIONAL:
                env["status"] = "VALID"
            elif env["status"] == "DELETING":
                env["status"] = "DELETED"
        queue = self.queue
        if queue is not None:
            if queue["status"] in TRANSITIONAL:
                queue["status"] = "VALID"
            elif queue["status"] == "DELETING":
                queue["status"] = "DELETED"
                self.shares.clear()
        for name in list(self.shares):
            share = self.shares[name]
            if share["status"] in TRANSITIONAL:
                share["status"] = "VALID"
            elif share["status"] == "DELETING":
                del self.shares[name]
                self.share_tags.pop(name, None)
                self.applied_share_tags.pop(name, None)


def _owned(extra: Mapping[str, str], queue: str, owned: bool = True) -> dict[str, str]:
    out = dict(extra)
    if owned:
        out[OWNER_TAG] = queue
    return out


@st.composite
def worlds(draw: st.DrawFn, doc: Mapping[str, Any], conflicts: bool = False) -> World:
    """What Batch may report for a document: each resource missing, transitional or drifted,
    extra shares, replaced (renamed) policy and environment, and (with `conflicts`) resources
    of the wrong kind that no request can fix."""
    queue_name = doc["jobQueue"]["jobQueueName"]
    world = World(queue_name)
    units = [c["capacityUnit"] for c in doc["serviceEnvironment"]["capacityLimits"]]
    want_policy, want_env = policy_name(doc), env_name(doc)

    def drifted_tags(want: Mapping[str, str]) -> dict[str, str]:
        return dict(draw(st.sampled_from([dict(want), {}, draw(tags)])))

    def claimed(section: str) -> bool:
        """Whether the wanted resource carries the owner tag; one that does not is one the
        controller did not create, so the document adopts it (or it is left alone)."""
        owned = draw(st.booleans())
        if not owned:
            doc.setdefault(section, {})["adopt"] = True  # type: ignore[attr-defined]
        return owned

    # Policies: the wanted one, maybe an older one the controller replaced.
    if draw(st.booleans()):
        fair = conflicts and draw(st.integers(0, 3)) == 0
        raw: dict[str, Any] = {
            "name": want_policy,
            "arn": policy_arn(want_policy),
            "tags": _owned(drifted_tags({}), queue_name, claimed("schedulingPolicy")),
        }
        if fair:
            raw["fairsharePolicy"] = {"shareDecaySeconds": 0, "computeReservation": 0}
        else:
            raw["quotaSharePolicy"] = {"idleResourceAssignmentStrategy": "FIFO"}
        world.policies[want_policy] = raw
    if draw(st.booleans()):
        old = "old-policy"
        world.policies[old] = {
            "name": old,
            "arn": policy_arn(old),
            "tags": _owned({}, queue_name, draw(st.booleans())),
        }
        if conflicts and draw(st.integers(0, 3)) == 0:
            world.policies[old]["fairsharePolicy"] = {"shareDecaySeconds": 0}
        else:
            world.policies[old]["quotaSharePolicy"] = {"idleResourceAssignmentStrategy": "FIFO"}

    # Environments: the wanted one and maybe an older one.
    def environment(name: str, section: str | None = None) -> dict[str, Any]:
        drift = draw(st.booleans())
        env_units = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=5, unique=True))
        wrong_type = conflicts and draw(st.integers(0, 5)) == 0
        return {
            "serviceEnvironmentName": name,
            "serviceEnvironmentArn": env_arn(name),
            "serviceEnvironmentType": "ECS" if wrong_type else "SAGEMAKER_TRAINING",
            "state": draw(st.sampled_from(STATES)),
            "status": draw(st.sampled_from(["VALID", "VALID", "CREATING", "UPDATING"])),
            "capacityLimits": (
                [{"capacityUnit": u, "maxCapacity": draw(st.integers(1, 64))} for u in env_units]
                if drift
                else copy.deepcopy(doc["serviceEnvironment"]["capacityLimits"])
            ),
            "tags": _owned(
                drifted_tags({}),
                queue_name,
                claimed(section) if section else draw(st.booleans()),
            ),
        }

    if draw(st.booleans()):
        world.envs[want_env] = environment(want_env, "serviceEnvironment")
    if draw(st.booleans()):
        world.envs["old-env"] = environment("old-env")
        world.envs["old-env"]["serviceEnvironmentType"] = "SAGEMAKER_TRAINING"
        if draw(st.booleans()):
            world.envs["old-env"]["status"] = "DELETED"

    # The queue, attached to an existing environment and policy.
    live_envs = [n for n, e in world.envs.items() if e["status"] != "DELETED"]
    if live_envs and world.policies and draw(st.integers(0, 3)) > 0:
        attached_env = draw(st.sampled_from(sorted(live_envs)))
        policy = draw(st.sampled_from(sorted(world.policies)))
        no_policy = conflicts and draw(st.integers(0, 5)) == 0
        other_type = conflicts and draw(st.integers(0, 7)) == 0
        spec = doc["jobQueue"]
        world.queue = {
            "jobQueueName": queue_name,
            "jobQueueArn": queue_arn(queue_name),
            "jobQueueType": "ECS" if other_type else "SAGEMAKER_TRAINING",
            "state": draw(st.sampled_from([spec.get("state", "ENABLED"), *STATES])),
            "status": draw(st.sampled_from(["VALID", "VALID", "VALID", *TRANSITIONAL])),
            "priority": draw(st.sampled_from([spec.get("priority", 1), 0, 500])),
            "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": env_arn(attached_env)}],
            "jobStateTimeLimitActions": draw(
                st.sampled_from([copy.deepcopy(spec.get("jobStateTimeLimitActions", [])), []])
            ),
            "tags": _owned(drifted_tags(spec.get("tags", {})), queue_name, claimed("jobQueue")),
        }
        if not no_policy:
            world.queue["schedulingPolicyArn"] = world.policies[policy]["arn"]

    # Shares, only in a live queue.
    if world.queue is not None:
        doc_shares = {s["quotaShareName"]: s for s in doc["quotaShares"]}
        present = draw(st.lists(st.sampled_from(sorted(doc_shares)), unique=True))
        extra = draw(st.lists(names.filter(lambda n: n not in doc_shares), max_size=3, unique=True))
        for name in [*present, *extra][:20]:
            spec = doc_shares.get(name)
            strategy = draw(st.sampled_from(STRATEGIES))
            sharing: dict[str, Any] = {"strategy": strategy}
            if strategy == "LEND_AND_BORROW":
                sharing["borrowLimit"] = draw(st.integers(-1, 300))
            drift = spec is None or draw(st.booleans())
            world.shares[name] = {
                "quotaShareName": name,
                "quotaShareArn": share_arn(queue_name, name),
                "jobQueueArn": queue_arn(queue_name),
                "capacityLimits": (
                    draw(limits(units + list(POOL[:1])))
                    if drift or spec is None
                    else copy.deepcopy(spec["capacityLimits"])
                ),
                "resourceSharingConfiguration": sharing,
                "preemptionConfiguration": {"inSharePreemption": draw(st.sampled_from(STATES))},
                "state": draw(st.sampled_from(STATES)),
                "status": draw(
                    st.sampled_from(["VALID", "VALID", "VALID", *TRANSITIONAL, "DELETING"])
                ),
            }
            want_tags = _owned((spec or {}).get("tags", {}), queue_name)
            world.share_tags[name] = draw(st.sampled_from([want_tags, drifted_tags({})]))
            applied = draw(st.sampled_from(["same", "none", "drift"]))
            if applied == "same":
                world.applied_share_tags[name] = dict(world.share_tags[name])
            elif applied == "drift":
                world.applied_share_tags[name] = drifted_tags({})
    return world


# -- documents with exactly one rule broken ----------------------------------------------------


@dataclass(frozen=True)
class Breaker:
    """Breaks one rule of a valid document; `path` is where the validator must report it."""

    name: str
    path: Callable[[dict[str, Any]], str]
    apply: Callable[[dict[str, Any], st.DrawFn], None]
    # False when the config table cannot hold the mistake (its keys make it impossible).
    as_items: bool = True
    # None: the problem concerns the queue; else the index of the share it concerns.
    share: Callable[[dict[str, Any]], int] | None = None


def _fixed(path: str) -> Callable[[dict[str, Any]], str]:
    return lambda _doc: path


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any], st.DrawFn], None]:
    def apply(doc: dict[str, Any], _draw: st.DrawFn) -> None:
        target: Any = doc
        for part in path[:-1]:
            if isinstance(part, str) and part not in target:
                target[part] = {}
            target = target[part]
        target[path[-1]] = value

    return apply


def _share_set(field_path: tuple[str | int, ...], value: Any) -> Breaker:
    dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in field_path)
    return Breaker(
        f"share{dotted}={value!r}",
        lambda doc: f"quotaShares[{len(doc['quotaShares']) - 1}]{dotted}",
        lambda doc, draw: _set(("quotaShares", len(doc["quotaShares"]) - 1, *field_path), value)(
            doc, draw
        ),
        share=lambda doc: len(doc["quotaShares"]) - 1,
    )


def _unit_outside_env(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    env_units = {c["capacityUnit"] for c in doc["serviceEnvironment"]["capacityLimits"]}
    outside = next(u for u in POOL if u not in env_units)
    doc["quotaShares"][-1]["capacityLimits"][0]["capacityUnit"] = outside


def _duplicate_unit(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    limits_ = doc["quotaShares"][-1]["capacityLimits"]
    if len(limits_) == 5:
        limits_[-1] = dict(limits_[0])
    else:
        limits_.append(dict(limits_[0]))


def _borrow_without_lend_and_borrow(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    doc["quotaShares"][-1]["resourceSharingConfiguration"] = {"strategy": "LEND", "borrowLimit": 5}


def _too_many_shares(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    template = doc["quotaShares"][0]
    while len(doc["quotaShares"]) <= 20:
        share = copy.deepcopy(template)
        share["quotaShareName"] = f"extra-{len(doc['quotaShares'])}"
        doc["quotaShares"].append(share)


def _duplicate_name(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    twin = copy.deepcopy(doc["quotaShares"][0])
    if len(doc["quotaShares"]) == 20:
        doc["quotaShares"][-1] = twin
    else:
        doc["quotaShares"].append(twin)


def _long_default_name(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    doc["jobQueue"]["jobQueueName"] = "q" * 120
    doc.pop("schedulingPolicy", None)


def _too_many_tags(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    doc["jobQueue"]["tags"] = {f"k{i}": "v" for i in range(51)}


def _six_env_limits(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    doc["serviceEnvironment"]["capacityLimits"] = [
        {"capacityUnit": u, "maxCapacity": 1} for u in POOL
    ]


def _duplicate_reason(doc: dict[str, Any], _draw: st.DrawFn) -> None:
    action = {
        "reason": TIME_LIMIT_REASONS[0],
        "state": "RUNNABLE",
        "maxTimeSeconds": 600,
        "action": "TERMINATE",
    }
    doc["jobQueue"]["jobStateTimeLimitActions"] = [action, dict(action)]


def _time_limit(field_name: str, value: Any) -> Breaker:
    def apply(doc: dict[str, Any], _draw: st.DrawFn) -> None:
        action: dict[str, Any] = {
            "reason": TIME_LIMIT_REASONS[1],
            "state": "RUNNABLE",
            "maxTimeSeconds": 3600,
            "action": "TERMINATE",
        }
        action[field_name] = value
        doc["jobQueue"]["jobStateTimeLimitActions"] = [action]

    return Breaker(
        f"jobStateTimeLimitActions.{field_name}={value!r}",
        _fixed(f"jobQueue.jobStateTimeLimitActions[0].{field_name}"),
        apply,
    )


BREAKERS: tuple[Breaker, ...] = (
    # The queue.
    Breaker(
        "queue name chars",
        _fixed("jobQueue.jobQueueName"),
        _set(("jobQueue", "jobQueueName"), "ml training"),
    ),
    Breaker(
        "queue name length",
        _fixed("jobQueue.jobQueueName"),
        _set(("jobQueue", "jobQueueName"), "q" * 129),
    ),
    Breaker(
        "queue priority high", _fixed("jobQueue.priority"), _set(("jobQueue", "priority"), 1001)
    ),
    Breaker("queue priority low", _fixed("jobQueue.priority"), _set(("jobQueue", "priority"), -1)),
    Breaker(
        "queue priority text", _fixed("jobQueue.priority"), _set(("jobQueue", "priority"), "3")
    ),
    Breaker(
        "queue priority float", _fixed("jobQueue.priority"), _set(("jobQueue", "priority"), 3.5)
    ),
    Breaker("queue state", _fixed("jobQueue.state"), _set(("jobQueue", "state"), "ON")),
    Breaker("queue state bool", _fixed("jobQueue.state"), _set(("jobQueue", "state"), True)),
    Breaker("queue unknown field", _fixed("jobQueue.priorty"), _set(("jobQueue", "priorty"), 1)),
    Breaker("queue tags", _fixed("jobQueue.tags"), _set(("jobQueue", "tags"), {"aws:x": "y"})),
    Breaker(
        "queue tag value", _fixed("jobQueue.tags"), _set(("jobQueue", "tags"), {"k": "v" * 257})
    ),
    Breaker("queue tag count", _fixed("jobQueue.tags"), _too_many_tags),
    Breaker(
        "duplicate time limit reason",
        _fixed("jobQueue.jobStateTimeLimitActions"),
        _duplicate_reason,
    ),
    _time_limit("reason", "CAPACITY:SOMETHING"),
    _time_limit("state", "RUNNING"),
    _time_limit("maxTimeSeconds", 599),
    _time_limit("maxTimeSeconds", 86401),
    _time_limit("action", "CANCEL"),
    # The policy.
    Breaker(
        "policy name", _fixed("schedulingPolicy.name"), _set(("schedulingPolicy", "name"), "pol/1")
    ),
    Breaker(
        "policy unknown field",
        _fixed("schedulingPolicy.fairsharePolicy"),
        _set(("schedulingPolicy", "fairsharePolicy"), {}),
    ),
    Breaker("default names too long", _fixed("schedulingPolicy.name"), _long_default_name),
    # The environment.
    Breaker(
        "env no limits",
        _fixed("serviceEnvironment.capacityLimits"),
        _set(("serviceEnvironment", "capacityLimits"), []),
    ),
    Breaker("env six limits", _fixed("serviceEnvironment.capacityLimits"), _six_env_limits),
    Breaker(
        "env NUM_INSTANCES",
        _fixed("serviceEnvironment.capacityLimits[0].capacityUnit"),
        _set(("serviceEnvironment", "capacityLimits", 0, "capacityUnit"), "NUM_INSTANCES"),
    ),
    Breaker(
        "env unknown type",
        _fixed("serviceEnvironment.capacityLimits[0].capacityUnit"),
        _set(("serviceEnvironment", "capacityLimits", 0, "capacityUnit"), "ml.g5.huge"),
    ),
    Breaker(
        "env max 0",
        _fixed("serviceEnvironment.capacityLimits[0].maxCapacity"),
        _set(("serviceEnvironment", "capacityLimits", 0, "maxCapacity"), 0),
    ),
    Breaker(
        "env max null",
        _fixed("serviceEnvironment.capacityLimits[0].maxCapacity"),
        _set(("serviceEnvironment", "capacityLimits", 0, "maxCapacity"), None),
    ),
    Breaker(
        "env name",
        _fixed("serviceEnvironment.serviceEnvironmentName"),
        _set(("serviceEnvironment", "serviceEnvironmentName"), ""),
    ),
    Breaker(
        "env state",
        _fixed("serviceEnvironment.state"),
        _set(("serviceEnvironment", "state"), "enabled "),
    ),
    # Top level.
    Breaker("reduction policy", _fixed("reductionPolicy"), _set(("reductionPolicy",), "wrn")),
    Breaker("approved change", _fixed("approvedChange"), _set(("approvedChange",), "ABC")),
    Breaker("force", _fixed("force"), _set(("force",), "yes")),
    Breaker("unknown top-level field", _fixed("quotaShare"), _set(("quotaShare",), [])),
    Breaker("too many shares", _fixed("quotaShares"), _too_many_shares),
    Breaker(
        "shares not a list",
        _fixed("quotaShares"),
        _set(("quotaShares",), {"team-a": {}}),
        as_items=False,
    ),
    # One share.
    _share_set(("quotaShareName",), "team a"),
    _share_set(("capacityLimits",), []),
    _share_set(("capacityLimits", 0, "maxCapacity"), 0),
    _share_set(("capacityLimits", 0, "maxCapacity"), "2"),
    _share_set(("capacityLimits", 0, "capacityUnit"), "NUM_INSTANCES"),
    _share_set(("resourceSharingConfiguration", "strategy"), "SHARE"),
    _share_set(
        ("resourceSharingConfiguration",), {"strategy": "LEND_AND_BORROW", "borrowLimit": -2}
    ),
    _share_set(("preemptionConfiguration",), {}),
    _share_set(("preemptionConfiguration", "inSharePreemption"), False),
    _share_set(("state",), "PAUSED"),
    _share_set(("tags",), {"": "x"}),
    _share_set(("priority",), 1),
    Breaker(
        "share unit outside the environment",
        lambda doc: f"quotaShares[{len(doc['quotaShares']) - 1}].capacityLimits[0].capacityUnit",
        _unit_outside_env,
        share=lambda doc: len(doc["quotaShares"]) - 1,
    ),
    Breaker(
        "share duplicate unit",
        lambda doc: f"quotaShares[{len(doc['quotaShares']) - 1}].capacityLimits",
        _duplicate_unit,
        share=lambda doc: len(doc["quotaShares"]) - 1,
    ),
    Breaker(
        "borrowLimit without LEND_AND_BORROW",
        lambda doc: (
            f"quotaShares[{len(doc['quotaShares']) - 1}].resourceSharingConfiguration.borrowLimit"
        ),
        _borrow_without_lend_and_borrow,
        share=lambda doc: len(doc["quotaShares"]) - 1,
    ),
    Breaker(
        "duplicate share name",
        lambda doc: f"quotaShares[{len(doc['quotaShares']) - 1}].quotaShareName",
        _duplicate_name,
        as_items=False,
        share=lambda doc: len(doc["quotaShares"]) - 1,
    ),
)


# -- one job's preemption, as events ----------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """Events of one preemption as the alert buffer delivers them: batches of SQS bodies."""

    batches: list[list[dict[str, Any]]]
    final_status: str
    described: list[str]


@st.composite
def deliveries(draw: st.DrawFn, events: Callable[[str], list[dict[str, Any]]]) -> Delivery:
    """The Started, Completed and State Change events of one preemption, each delivered one to
    three times, in any order, split across one to four batches; and what DescribeServiceJob
    answers at each batch (before the preemption, requeued, dispatched again, failed)."""
    final = draw(st.sampled_from(["RUNNABLE", "FAILED"]))
    base = events(final)
    copies = [e for e in base for _ in range(draw(st.integers(1, 3)))]
    # At least one event of the preemption arrives (SQS may drop nothing; it may repeat).
    order = draw(st.permutations(copies))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(order) - 1)), max_size=3, unique=True)))
    batches: list[list[dict[str, Any]]] = []
    start = 0
    for cut in [*cuts, len(order)]:
        if cut > start:
            batches.append([copy.deepcopy(e) for e in order[start:cut]])
            start = cut
    # DescribeServiceJob answers what the job is when the batch is handled: it only moves on.
    stages = ["running", "failed"] if final == "FAILED" else ["running", "requeued", "redispatched"]
    picks = sorted(draw(st.integers(0, len(stages) - 1)) for _ in batches)
    return Delivery(batches, final, [stages[i] for i in picks])
