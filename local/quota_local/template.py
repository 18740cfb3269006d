"""Reads template.yaml (CloudFormation short-form tags included) so the local stack builds what
the deployment builds: the same table keys, stream filter, batch sizes, retries and schedule."""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from quota_local.paths import template_file


# libyaml's parser when PyYAML has it (ten times faster: every LocalStack reads the template).
class _CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path | Traversable | None = None) -> dict[str, Any]:
    """The template as data (by default the deployment's, shipped in the package); intrinsic
    functions become their long form."""
    source = path or template_file()
    with source.open(encoding="utf-8") as handle:
        text = handle.read()
    # Parsed once per text (each stack reads it twice, a test run hundreds of times); each
    # caller gets its own copy to change.
    return copy.deepcopy(_parsed(text))


@functools.lru_cache(maxsize=4)
def _parsed(text: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(text, Loader=_CfnLoader)
    return data


_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")


def rate_seconds(expression: str) -> int:
    """`rate(5 minutes)` -> 300."""
    match = _RATE.match(expression.strip())
    if not match:
        raise ValueError(f"unsupported schedule expression {expression!r} (use rate(N unit))")
    amount, unit = int(match.group(1)), match.group(2)
    return amount * {"minute": 60, "hour": 3600, "day": 86400}[unit.rstrip("s")]


_SUB = re.compile(r"\$\{([A-Za-z0-9:]+)\}")


def resolve(value: Any, refs: dict[str, str], conditions: dict[str, bool]) -> Any:
    """Evaluate Ref, Fn::Sub and Fn::If with the given references (parameters, pseudo
    parameters, resource names); enough for the event patterns and names the stack reads."""
    if isinstance(value, list):
        return [resolve(v, refs, conditions) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return refs[arg]
        if key == "Fn::Sub":
            text = arg if isinstance(arg, str) else arg[0]
            return _SUB.sub(lambda m: refs[m.group(1)], text)
        if key == "Fn::If":
            name, yes, no = arg
            return resolve(yes if conditions[name] else no, refs, conditions)
    return {k: resolve(v, refs, conditions) for k, v in value.items()}


def parameter_defaults(template: dict[str, Any]) -> dict[str, str]:
    """Each parameter's default, as text."""
    return {
        name: str(spec.get("Default", "")) for name, spec in template.get("Parameters", {}).items()
    }


@dataclass(frozen=True)
class StackShape:
    """What the local stack takes from the template."""

    table_key_schema: list[dict[str, str]]
    table_attributes: list[dict[str, str]]
    stream_view_type: str
    stream_filter: str | None
    stream_batch_size: int
    stream_max_retries: int
    requeue_batch_size: int
    requeue_max_receive: int
    # Seconds a received message stays invisible (a failed one comes back after that).
    requeue_visibility_timeout: int
    resync_seconds: int
    requeue_seconds: int
    # Event patterns of the rules that feed the alert buffer (intrinsics left unresolved).
    alert_rules: dict[str, Any]
    alert_batch_size: int
    alert_max_receive: int
    alert_visibility_timeout: int
    # The job history: its table's keys and index, the rules that feed its buffer, the buffer.
    history_key_schema: list[dict[str, str]]
    history_attributes: list[dict[str, str]]
    history_indexes: list[dict[str, Any]]
    history_rules: dict[str, Any]
    history_batch_size: int
    history_max_receive: int
    history_visibility_timeout: int
    history_retention_days: int


# SQS's default when a queue sets no VisibilityTimeout.
_SQS_DEFAULT_VISIBILITY_TIMEOUT = 30


def stack_shape(template: dict[str, Any]) -> StackShape:
    """Extract the shape; fails loudly when the template no longer has what it expects."""
    resources = template["Resources"]
    params = template.get("Parameters", {})
    table = resources["ConfigTable"]["Properties"]
    events = resources["Reconcile"]["Properties"]["Events"]
    stream = events["ConfigStream"]["Properties"]
    filters = stream.get("FilterCriteria", {}).get("Filters", [])
    requeue = events["Requeue"]["Properties"]
    requeue_queue = resources["RequeueQueue"]["Properties"]
    alert_buffer = resources["AlertBuffer"]["Properties"]
    history = resources["HistoryTable"]["Properties"]
    history_buffer = resources["HistoryBuffer"]["Properties"]
    return StackShape(
        table_key_schema=table["KeySchema"],
        table_attributes=table["AttributeDefinitions"],
        stream_view_type=table["StreamSpecification"]["StreamViewType"],
        stream_filter=filters[0]["Pattern"] if filters else None,
        stream_batch_size=int(stream.get("BatchSize", 100)),
        stream_max_retries=int(stream.get("MaximumRetryAttempts", -1)),
        requeue_batch_size=int(requeue.get("BatchSize", 10)),
        requeue_max_receive=int(requeue_queue["RedrivePolicy"]["maxReceiveCount"]),
        requeue_visibility_timeout=int(
            requeue_queue.get("VisibilityTimeout", _SQS_DEFAULT_VISIBILITY_TIMEOUT)
        ),
        resync_seconds=rate_seconds(params["ResyncRate"]["Default"]),
        requeue_seconds=int(params["RequeueSeconds"]["Default"]),
        alert_rules=_rules_to(resources, "AlertBuffer"),
        alert_batch_size=int(
            resources["Alert"]["Properties"]["Events"]["FromBuffer"]["Properties"].get(
                "BatchSize", 10
            )
        ),
        alert_max_receive=int(alert_buffer["RedrivePolicy"]["maxReceiveCount"]),
        alert_visibility_timeout=int(
            alert_buffer.get("VisibilityTimeout", _SQS_DEFAULT_VISIBILITY_TIMEOUT)
        ),
        history_key_schema=history["KeySchema"],
        history_attributes=history["AttributeDefinitions"],
        history_indexes=history.get("GlobalSecondaryIndexes", []),
        history_rules=_rules_to(resources, "HistoryBuffer"),
        history_batch_size=int(
            resources["RecordHistory"]["Properties"]["Events"]["FromBuffer"]["Properties"].get(
                "BatchSize", 10
            )
        ),
        history_max_receive=int(history_buffer["RedrivePolicy"]["maxReceiveCount"]),
        history_visibility_timeout=int(
            history_buffer.get("VisibilityTimeout", _SQS_DEFAULT_VISIBILITY_TIMEOUT)
        ),
        history_retention_days=int(params["HistoryRetentionDays"]["Default"]),
    )


def _rules_to(resources: dict[str, Any], queue: str) -> dict[str, Any]:
    """Event patterns of the rules that target the queue (intrinsics left unresolved)."""
    return {
        name: spec["Properties"]["EventPattern"]
        for name, spec in resources.items()
        if spec.get("Type") == "AWS::Events::Rule"
        and any(
            t.get("Arn") == {"Fn::GetAtt": [queue, "Arn"]}
            for t in spec["Properties"].get("Targets", [])
        )
    }
