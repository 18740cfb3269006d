"""Behaviours AWS Batch leaves open, as named emulator variants.

The emulator and the controller were written from the same reading of the AWS docs; where the
docs are silent, one reading alone would let both be wrong together. Each open behaviour is a
variant here: a name, the value the emulator uses by default, every alternative, the value of
the `pessimistic` profile (the one hardest on a client), and the AWS source, or "not
documented". The controller must be right under every value (`make test` runs its end-to-end
suites under the default and the pessimistic profile).

    resolve_variants({"describe_unknown_arn": "error"})   # -> every variant's value
    resolve_variants("pessimistic")                        # a profile
    resolve_variants(Path("conformance.json"))             # what `quotactl conformance` saw

Names and values are part of the public interface (tests outside this repository select them);
docs/emulator.md has the table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOT_DOCUMENTED = "not documented"
_GUIDE = "https://docs.aws.amazon.com/batch/latest/userguide/"
_API = "https://docs.aws.amazon.com/batch/latest/APIReference/"
# The environment variable LocalStack reads when it is given no variants (a profile name,
# NAME=VALUE pairs separated by commas, or the path of a conformance file).
VARIANTS_ENV = "QUOTA_LOCAL_VARIANTS"
CONFORMANCE_FORMAT = 1


@dataclass(frozen=True)
class Variant:
    """One open behaviour. `values` lists every allowed value for a choice; a numeric variant
    (`values` empty) takes any number >= 0 of seconds."""

    name: str
    default: Any
    pessimistic: Any
    values: tuple[str, ...]
    source: str
    what: str

    @property
    def numeric(self) -> bool:
        """Seconds rather than a choice."""
        return not self.values

    def allowed(self) -> str:
        """The allowed values in words, for an error message."""
        return "a number of seconds >= 0" if self.numeric else " | ".join(self.values)

    def check(self, value: Any) -> Any:
        """The value as the emulator uses it; ValueError naming the variant and what it allows."""
        if self.numeric:
            number: float | None
            if isinstance(value, bool):
                number = None
            elif isinstance(value, int | float):
                number = float(value)
            else:
                try:
                    number = float(str(value).strip())
                except ValueError:
                    number = None
            if number is None or not number >= 0 or number == float("inf"):
                raise ValueError(
                    f"variant {self.name}: {value!r} is not allowed; it takes {self.allowed()}"
                )
            return number
        text = str(value).strip()
        if text not in self.values:
            raise ValueError(
                f"variant {self.name}: {value!r} is not allowed; it takes {self.allowed()}"
            )
        return text


_ALL = (
    Variant(
        "preempted_attempts_order",
        "oldest_first",
        "newest_first",
        ("oldest_first", "newest_first"),
        NOT_DOCUMENTED + " (the API model does not say; AWS's SageMaker Python SDK reads "
        "element 0 of recentPreemptedAttempts as the most recent)",
        "order of preemptionSummary.recentPreemptedAttempts",
    ),
    Variant(
        "snapshot_lag_seconds",
        0.0,
        60.0,
        (),
        _API + "API_GetJobQueueSnapshot.html (lastUpdatedAt: when the utilisation was last "
        "computed; how often is " + NOT_DOCUMENTED + ")",
        "GetJobQueueSnapshot is recomputed only this often; lastUpdatedAt says when",
    ),
    Variant(
        "stuck_reason_delivery",
        "queue_blocked_event",
        "both",
        ("queue_blocked_event", "state_change", "both"),
        _GUIDE
        + "batch-service-job-queue-blocked-events.html, "
        + _GUIDE
        + "sm_job_stuck_in_runnable.html (the reason is set when the job reaches the front of "
        "the queue, announced by a Queue Blocked event)",
        "how a stuck job's reason is announced: a Queue Blocked event (documented), a State "
        "Change carrying it, or both",
    ),
    Variant(
        "read_after_write_lag_seconds",
        0.0,
        5.0,
        (),
        NOT_DOCUMENTED + " (Batch's reads are not documented as read-after-write consistent)",
        "List and Describe show a create, update or delete only this long after it",
    ),
    Variant(
        "describe_unknown_arn",
        "omit",
        "error",
        ("omit", "error"),
        NOT_DOCUMENTED,
        "DescribeSchedulingPolicies / DescribeServiceEnvironments / DescribeJobQueues with a "
        "name or ARN that does not exist: omitted from the answer, or a ClientException",
    ),
    Variant(
        "error_wording",
        "emulator",
        "terse",
        ("emulator", "terse"),
        _API + "API_SubmitServiceJob.html#API_SubmitServiceJob_Errors (each action's Errors "
        "section lists ClientException and ServerException with free text; no wording is "
        "documented)",
        "the message of every ClientException: the emulator's own, or one short generic text",
    ),
    Variant(
        "disabled_share_dispatch",
        "none",
        "submitted_continue",
        ("none", "submitted_continue"),
        _API + 'API_UpdateQuotaShare.html (a DISABLED share accepts no new jobs "but jobs '
        'already submitted can finish"; whether queued ones still start is ' + NOT_DOCUMENTED + ")",
        "whether a DISABLED share still dispatches the jobs already submitted to it",
    ),
    Variant(
        "update_while_transitional",
        "refuse",
        "accept",
        ("refuse", "accept"),
        NOT_DOCUMENTED + " (whether an update of a resource that is CREATING or UPDATING is "
        "refused or taken)",
        "UpdateQuotaShare / UpdateServiceEnvironment / UpdateJobQueue / UpdateSchedulingPolicy "
        "of a resource still CREATING or UPDATING: refused, or taken",
    ),
    Variant(
        "queued_capacity_usage",
        "listed",
        "absent",
        ("listed", "absent"),
        _API
        + 'API_ServiceJobSummary.html (capacityUsage: the capacity "being used"), '
        + _API
        + 'API_DescribeServiceJob.html (capacityUsage: "The configured capacity for the service '
        'job", whose number of instances "should be the same value as the '
        'serviceRequestPayload.InstanceCount field"; whether a job not yet scheduled carries it '
        "in ListServiceJobs is " + NOT_DOCUMENTED + ")",
        "capacityUsage of a SUBMITTED, PENDING or RUNNABLE job in ListServiceJobs and "
        "DescribeServiceJob: listed (what it will use), or absent until it is scheduled",
    ),
    Variant(
        "event_detail_fields",
        "describe_like",
        "documented_example",
        ("describe_like", "documented_example"),
        _GUIDE + "service-job-events.html, " + _GUIDE + "batch-service-job-queue-blocked-"
        "events.html (the examples show no quotaShareName, capacityUsage, schedulingPriority or "
        "preemptionSummary; whether real events carry them is " + NOT_DOCUMENTED + ")",
        "the detail of State Change and Queue Blocked events: DescribeServiceJob's answer (no "
        "tags, no payload), or only the fields the user guide's examples show",
    ),
    Variant(
        "environment_reduction_preempts",
        "no",
        "yes",
        ("no", "yes"),
        NOT_DOCUMENTED + " (the effect of lowering a service environment's capacity limits "
        "below what runs)",
        "whether lowering the service environment's limits below its usage preempts jobs",
    ),
    Variant(
        "client_token_reuse",
        "rejected",
        "rejected",
        ("rejected", "same_job"),
        _API + 'API_SubmitServiceJob.html (clientToken: two requests "with identical payloads '
        'and clientTokens" are "considered the same request and the second request is '
        'rejected"; botocore fills the token and reuses it when it retries)',
        "a SubmitServiceJob repeating an earlier one's clientToken and request: refused with a "
        "ClientException (the model's words), or answered with the earlier job",
    ),
    Variant(
        "preemption_reason_text",
        "emulator",
        "cross_share_only",
        ("emulator", "cross_share_only"),
        _GUIDE + "batch-service-job-preemption-events.html (the only preemption reason shown is "
        '"Cross-share preemption triggered to reclaim borrowed capacity"; the text of an '
        "in-share preemption or of one after a limit was lowered is " + NOT_DOCUMENTED + ")",
        "the reason of a preempted attempt: the emulator's own text per kind, or the documented "
        "cross-share text for every preemption",
    ),
    Variant(
        "preemption_seconds",
        0.0,
        20.0,
        (),
        _GUIDE + "batch-service-job-preemption-events.html (the example's Preemption Started, "
        "victim still RUNNING, is at 19:57:27 and its Preemption Completed at 19:57:47; how "
        "long a preemption takes is " + NOT_DOCUMENTED + ")",
        "how long a preemption takes: the victim keeps its status and capacity from Preemption "
        "Started to Preemption Completed, and the job it is for waits for the capacity",
    ),
    Variant(
        "stuck_front",
        "share",
        "queue",
        ("share", "queue"),
        _GUIDE
        + 'sm_job_stuck_in_runnable_misconfiguration.html (the reason is set when the job "reaches '
        'the front of the queue"), the botocore model\'s JobStateTimeLimitAction ("at the head of '
        "the queue\"); whether a quota share's front counts, or only the whole job queue's, is "
        + NOT_DOCUMENTED,
        "which front a stuck job must reach for its reason to be set, its Queue Blocked event "
        "sent and its JobStateTimeLimit clock to run: the front of its quota share, or of the "
        "whole job queue",
    ),
    Variant(
        "scheduled_at_on_redispatch",
        "new",
        "first",
        ("new", "first"),
        _API + 'API_DescribeServiceJob.html (scheduledAt: "when the service job was dispatched to '
        'SageMaker and the service job transitioned to the SCHEDULED state"), '
        + _API
        + 'API_ServiceJobSummary.html (scheduledAt: when it was "scheduled for execution"); '
        "whether a job dispatched again after a preemption gets a new one is " + NOT_DOCUMENTED,
        "scheduledAt of a job dispatched again (after a preemption): the time of its latest "
        "dispatch, or that of its first",
    ),
    Variant(
        "reduction_preemption",
        "eager",
        "on_demand",
        ("eager", "on_demand"),
        _GUIDE
        + "preemption.html (lowering a quota share's capacity limits makes its jobs \"eligible "
        'for preemption" when it uses more than its limits; whether they are preempted at once '
        "or only when capacity is needed is " + NOT_DOCUMENTED + ")",
        "lowering a share's limits below its usage: its jobs above the new limit are preempted "
        "at once, or only when a job of another share needs the capacity they hold",
    ),
)

VARIANTS: Mapping[str, Variant] = {v.name: v for v in _ALL}
PROFILES: Mapping[str, Mapping[str, Any]] = {
    "default": {v.name: v.default for v in _ALL},
    "pessimistic": {v.name: v.pessimistic for v in _ALL},
}

VariantSpec = Mapping[str, Any] | str | os.PathLike[str] | None


def defaults() -> dict[str, Any]:
    """Every variant at its default."""
    return dict(PROFILES["default"])


def resolve_variants(spec: VariantSpec) -> dict[str, Any]:
    """Every variant's value from a spec: None (the defaults), a profile name (`default`,
    `pessimistic`), a mapping of name -> value (the rest default), a path to a conformance
    file, or text of NAME=VALUE pairs separated by commas. ValueError names what is wrong."""
    if spec is None:
        return defaults()
    if isinstance(spec, Mapping):
        return _with(spec, "")
    if isinstance(spec, os.PathLike):
        return load_conformance(spec)
    text = str(spec).strip()
    if not text:
        return defaults()
    if text in PROFILES:
        return dict(PROFILES[text])
    if "=" in text:
        pairs: dict[str, str] = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"{part.strip()!r} is not NAME=VALUE")
            if name.strip() in pairs:
                raise ValueError(f"variant {name.strip()} is given twice")
            pairs[name.strip()] = value
        return _with(pairs, "")
    if text.endswith(".json") or os.sep in text:
        return load_conformance(Path(text))
    raise ValueError(
        f"{text!r} is neither a profile ({', '.join(PROFILES)}), NAME=VALUE pairs, nor a "
        "conformance file (.json)"
    )


def parse_assignment(text: str) -> tuple[str, Any]:
    """One `NAME=VALUE` (as `quotactl local up --variant` takes it), checked."""
    name, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"--variant {text!r}: expected NAME=VALUE")
    variant = _variant(name.strip())
    return variant.name, variant.check(value)


def load_conformance(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The variants a conformance file records (`quotactl conformance`); those it did not
    probe keep their defaults. ValueError when the file is unreadable or not of this format."""
    where = Path(path)
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"conformance file {where}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"conformance file {where}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("variants"), dict):
        raise ValueError(f"conformance file {where}: no 'variants' object")
    if data.get("format") != CONFORMANCE_FORMAT:
        raise ValueError(
            f"conformance file {where}: format {data.get('format')!r}, this version reads "
            f"format {CONFORMANCE_FORMAT}"
        )
    values: dict[str, Any] = {}
    for name, entry in data["variants"].items():
        if not isinstance(entry, dict) or "value" not in entry:
            raise ValueError(f"conformance file {where}: variants.{name} has no 'value'")
        values[name] = entry["value"]
    return _with(values, f"conformance file {where}: ")


def _variant(name: str) -> Variant:
    variant = VARIANTS.get(name)
    if variant is None:
        raise ValueError(f"unknown variant {name!r}; the variants are: {', '.join(VARIANTS)}")
    return variant


def _with(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = defaults()
    for name, value in values.items():
        try:
            variant = _variant(str(name))
            out[variant.name] = variant.check(value)
        except ValueError as exc:
            raise ValueError(f"{where}{exc}") from None
    return out
