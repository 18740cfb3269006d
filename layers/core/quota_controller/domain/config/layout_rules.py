"""The rules of one layout that no single model checks: default names too long for Batch, a
share name used twice, limits for instance types the service environment does not have, the
limits of a share that failed taken one by one, and the capacity warnings (more quota than the
environment has, borrowing that can never happen). `validation` applies them by scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import ValidationError

from quota_controller.domain.config.fields import NAME_MAX
from quota_controller.domain.config.model import (
    CapacityLimit,
    QueueSettings,
    QuotaShareSpec,
    ServiceEnvironmentSpec,
)
from quota_controller.domain.config.problems import (
    Path,
    Problem,
    format_path,
    problems_from,
    scoped,
)
from quota_controller.domain.instance_types import TRAINING_INSTANCE_TYPES


def derived_name_problems(settings: QueueSettings) -> Iterable[Problem]:
    """A default policy or environment name (`<jobQueueName>-quota-policy`, `-env`) that would
    be too long."""
    derived = (
        (("schedulingPolicy", "name"), settings.schedulingPolicy.name, "-quota-policy"),
        (
            ("serviceEnvironment", "serviceEnvironmentName"),
            settings.serviceEnvironment.serviceEnvironmentName,
            "-env",
        ),
    )
    for path, given, suffix in derived:
        default = settings.queue_name + suffix
        if given is None and len(default) > NAME_MAX:
            yield Problem(
                path,
                f"the default name '{default[:40]}…' would be {len(default)} characters (at most "
                f"{NAME_MAX}); set {format_path(path)} or shorten jobQueue.jobQueueName",
            )


def duplicate_names(named: Sequence[tuple[int, str]]) -> Iterable[Problem]:
    """Each share (index, name) whose name another share of the queue also has."""
    for index, name in named:
        others = [i for i, n in named if n == name and i != index]
        if others:
            where = ", ".join(f"quotaShares[{i}]" for i in others)
            yield Problem(
                ("quotaShares", index, "quotaShareName"),
                f"{name!r} is used more than once (also at {where}); share names must be "
                "unique within a job queue",
                share=name,
                share_index=index,
            )


def environment_spec(settings: QueueSettings | None, raw: object) -> ServiceEnvironmentSpec | None:
    """The service environment, even when another part of the queue settings is invalid."""
    if settings is not None:
        return settings.serviceEnvironment
    try:
        return ServiceEnvironmentSpec.model_validate(raw)
    except ValidationError:
        return None


def units_outside_environment(
    environment: ServiceEnvironmentSpec, parsed: Sequence[tuple[int, QuotaShareSpec]]
) -> Iterable[Problem]:
    """The shares' limits for instance types the service environment has no limit for."""
    for index, share in parsed:
        yield from _unit_problems(
            environment, index, share.quotaShareName, enumerate(share.capacityLimits)
        )


def _unit_problems(
    environment: ServiceEnvironmentSpec,
    index: int,
    share: str | None,
    limits: Iterable[tuple[int, CapacityLimit]],
) -> Iterable[Problem]:
    """Limits (with their place in the share's list) of types the environment does not have."""
    env_units = [c.capacityUnit for c in environment.capacityLimits]
    for j, limit in limits:
        if limit.capacityUnit not in env_units:
            yield Problem(
                ("quotaShares", index, "capacityLimits", j, "capacityUnit"),
                f"{limit.capacityUnit} is not in serviceEnvironment.capacityLimits "
                f"({', '.join(env_units)}); jobs of this share that need it could never run",
                share=share,
                share_index=index,
            )


def partial_limit_problems(
    environment: ServiceEnvironmentSpec | None,
    index: int,
    share: str | None,
    limits_raw: object,
    reported: Sequence[Problem],
) -> Iterable[Problem]:
    """The limits of a share that failed validation, one by one: what the model did not get
    to (an entry's own errors when the list was refused as a whole, say for its length), each
    instance type listed twice, and types the environment does not have."""
    if not isinstance(limits_raw, list):
        return
    base: Path = ("quotaShares", index, "capacityLimits")
    good: list[tuple[int, CapacityLimit]] = []
    for j, entry in enumerate(limits_raw):
        try:
            good.append((j, CapacityLimit.model_validate(entry)))
        except ValidationError as exc:
            entry_path = (*base, j)
            if not any(p.path[: len(entry_path)] == entry_path for p in reported):
                yield from (
                    scoped(p, share, index) for p in problems_from(exc, CapacityLimit, entry_path)
                )
    # Each instance type once, judged on what was written (an entry with a bad maxCapacity
    # still names its type; a unit that is no instance type is reported as such, not here).
    # The model names the first repeated type when every entry is valid: that one is not
    # reported again, the others are.
    first: dict[str, int] = {}
    named_by_model = any(p.path == base and "more than once" in p.message for p in reported)
    skip: str | None = None
    for j, entry in enumerate(limits_raw):
        unit = entry.get("capacityUnit") if isinstance(entry, Mapping) else None
        if not isinstance(unit, str) or unit not in TRAINING_INSTANCE_TYPES:
            continue
        if unit in first:
            if named_by_model and skip in (None, unit):
                skip = unit
                continue
            yield Problem(
                (*base, j, "capacityUnit"),
                f"lists {unit} more than once (also at capacityLimits[{first[unit]}]); give "
                "each instance type one limit",
                share=share,
                share_index=index,
            )
        first.setdefault(unit, j)
    if environment is not None:
        # Each type once, at its first valid entry (a repeat is reported above).
        firsts = {limit.capacityUnit: (j, limit) for j, limit in reversed(good)}
        yield from _unit_problems(environment, index, share, sorted(firsts.values()))


# The rule of the warning that a layout's shares' limits of a type add up to more than the
# service environment has (`Problem.rule`).
OVERSUBSCRIBED = "oversubscribed"


def capacity_warnings(
    settings: QueueSettings, parsed: Sequence[tuple[int, QuotaShareSpec]]
) -> Iterable[Problem]:
    """What AWS allows but a platform engineer should know: oversubscription and dead borrowing."""
    env = settings.serviceEnvironment.capacityLimits
    for k, env_limit in enumerate(env):
        unit, env_max = env_limit.capacityUnit, env_limit.maxCapacity
        holders = [(i, s) for i, s in parsed if s.limit_for(unit)]
        for i, share in holders:
            j = next(n for n, c in enumerate(share.capacityLimits) if c.capacityUnit == unit)
            if share.limit_for(unit) > env_max:
                yield Problem(
                    ("quotaShares", i, "capacityLimits", j, "maxCapacity"),
                    f"{share.limit_for(unit)} x {unit} is more than the service environment's "
                    f"{env_max}; the share can never run more than {env_max} at once",
                    "warning",
                    share.quotaShareName,
                    i,
                )
        total = sum(s.limit_for(unit) for _, s in holders)
        if total > env_max:
            yield Problem(
                ("serviceEnvironment", "capacityLimits", k, "maxCapacity"),
                f"the quota shares' limits for {unit} add up to {total}, more than the "
                f"{env_max} the environment has: shares cannot all use their full quota at "
                "once, so some jobs will wait even within quota",
                "warning",
                rule=OVERSUBSCRIBED,
            )
    for i, share in parsed:
        sharing = share.resourceSharingConfiguration
        if sharing.strategy != "LEND_AND_BORROW":
            continue
        if sharing.borrowLimit == 0:
            yield Problem(
                ("quotaShares", i, "resourceSharingConfiguration", "borrowLimit"),
                "0 means this share never borrows; strategy LEND says the same more clearly",
                "warning",
                share.quotaShareName,
                i,
            )
            continue
        for j, limit in enumerate(share.capacityLimits):
            lenders = [
                s.quotaShareName
                for _, s in parsed
                if s is not share
                and s.limit_for(limit.capacityUnit)
                and s.resourceSharingConfiguration.strategy in ("LEND", "LEND_AND_BORROW")
            ]
            if not lenders:
                yield Problem(
                    ("quotaShares", i, "capacityLimits", j, "capacityUnit"),
                    f"no other quota share lends {limit.capacityUnit}, so this "
                    "LEND_AND_BORROW share can never borrow it",
                    "warning",
                    share.quotaShareName,
                    i,
                )
