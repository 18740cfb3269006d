"""Every CloudWatch alarm and dashboard widget of template.yaml reads a metric that exists.

Custom metrics: what the code emits, enumerated statically (every `metrics.add_metric` of the
functions, f-string names expanded from the Literal types) and observed on the local stack with
metrics on (namespace, dimension sets, names). Powertools adds one dimension, `service`, from
POWERTOOLS_SERVICE_NAME (set per function in the template); usage_metrics' own EMF lines carry
JobQueue, QuotaShare and InstanceType. AWS metrics: the namespace, metric and dimension names
AWS publishes, with values that name a function or queue of this template.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, get_args

import pytest

from quota_controller.domain.alerts.model import AlertCause
from quota_controller.services import usage_metrics
from quota_controller.services.reconcile import Outcome
from quota_local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
T = load_template()
R: dict[str, Any] = T["Resources"]
NAMESPACE = T["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"]
FUNCTIONS = {k: v for k, v in R.items() if v["Type"] == "AWS::Serverless::Function"}
SERVICE = {
    k: v["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    for k, v in FUNCTIONS.items()
}
CODE = {k: Path(v["Properties"]["CodeUri"]).name for k, v in FUNCTIONS.items()}
USAGE_DIMS = frozenset(usage_metrics.DIMENSIONS)
ANY = "*"  # a dimension value the code fills in (queue, share, instance type)

# What AWS publishes (namespace, metric) -> its dimension, and the resource type it names.
AWS_METRICS = {
    ("AWS/Lambda", "Errors"): ("FunctionName", "AWS::Serverless::Function"),
    ("AWS/Lambda", "Throttles"): ("FunctionName", "AWS::Serverless::Function"),
    ("AWS/Lambda", "IteratorAge"): ("FunctionName", "AWS::Serverless::Function"),
    ("AWS/SQS", "ApproximateNumberOfMessagesVisible"): ("QueueName", "AWS::SQS::Queue"),
    ("AWS/SQS", "ApproximateAgeOfOldestMessage"): ("QueueName", "AWS::SQS::Queue"),
}


# -- what the code emits -----------------------------------------------------------------------


def _verdict_kinds_without_cause() -> set[str]:
    """Kinds the alert function publishes without a cause (`Verdict(kind, None, ...)`)."""
    path = ROOT / "layers/core/quota_controller/domain/alerts/classify.py"
    kinds = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Verdict":
            kind, cause = node.args[0], node.args[1]
            if isinstance(cause, ast.Constant) and cause.value is None:
                kinds.add(kind.value)  # type: ignore[attr-defined]
    return kinds


# The f-string parts of metric names, by source text: every value they can take.
FSTRING_VALUES = {
    "result.outcome": set(get_args(Outcome)),
    "alert.cause": set(get_args(AlertCause)),
    "alert.cause or alert.kind": set(get_args(AlertCause)) | _verdict_kinds_without_cause(),
}


@cache
def emitted() -> dict[tuple[str, str, frozenset[tuple[str, str]]], dict[str, Any]]:
    """(namespace, metric, dimensions) -> {function}: every metric the code can emit."""
    out: dict[tuple[str, str, frozenset[tuple[str, str]]], dict[str, Any]] = {}
    for function, code in CODE.items():
        path = ROOT / "functions" / code / "app.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_metric"):
                continue
            name = node.args[0]
            if isinstance(name, ast.Constant):
                names = {name.value}
            else:
                assert isinstance(name, ast.JoinedStr), ast.unparse(name)
                prefix, expr = name.values
                source = ast.unparse(expr.value)  # type: ignore[attr-defined]
                assert source in FSTRING_VALUES, f"{path}: enumerate {source!r} in FSTRING_VALUES"
                names = {prefix.value + v for v in FSTRING_VALUES[source]}  # type: ignore[attr-defined]
            for n in names:
                dims = frozenset({("service", SERVICE[function])})
                out[(NAMESPACE, n, dims)] = {"function": function}
    for metric in (usage_metrics.USAGE, usage_metrics.QUOTA):
        dims = frozenset((d, ANY) for d in usage_metrics.DIMENSIONS)
        out[(NAMESPACE, metric, dims)] = {"function": "Resync"}
    return out


# -- what the template reads -------------------------------------------------------------------


def _resource_name(logical: str, attribute: str | None) -> str:
    """The physical name a Ref/GetAtt resolves to, as its !Sub template ("${NamePrefix}-x")."""
    props = R[logical]["Properties"]
    key = {"AWS::Serverless::Function": "FunctionName", "AWS::SQS::Queue": "QueueName"}.get(
        R[logical]["Type"]
    )
    if key is None or attribute not in (None, key):
        return f"<{logical}.{attribute}>"
    return str(props[key]["Fn::Sub"])


def _value(v: Any) -> str:
    if isinstance(v, str):
        return v
    if "Ref" in v:
        return _resource_name(v["Ref"], None)
    if "Fn::GetAtt" in v:
        return _resource_name(*v["Fn::GetAtt"])
    if "Fn::Sub" in v:
        return str(v["Fn::Sub"])
    raise AssertionError(v)


def alarms() -> Iterator[tuple[str, dict[str, Any]]]:
    for logical, res in R.items():
        if res["Type"] == "AWS::CloudWatch::Alarm":
            yield logical, res


def dashboard() -> dict[str, Any]:
    body = R["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]

    def sub(m: re.Match[str]) -> str:
        ref = m.group(1)
        if ref.startswith("!"):
            return "${" + ref[1:] + "}"
        if ref in T["Parameters"]:
            return "${" + ref + "}"
        if ref.startswith("AWS::"):
            return "us-east-1"
        logical, _, attribute = ref.partition(".")
        assert logical in R, f"dashboard references unknown resource {ref}"
        return _resource_name(logical, attribute or None).replace('"', '\\"')

    parsed: dict[str, Any] = json.loads(re.sub(r"\$\{([^}]+)\}", sub, body))
    return parsed


def widget_metrics() -> Iterator[tuple[str, dict[str, Any]]]:
    """(widget title, {namespace, metric, dims, stat, period} or {expression}) of every graph."""
    for widget in dashboard()["widgets"]:
        if widget["type"] != "metric":
            continue
        props = widget["properties"]
        previous: list[Any] = []
        for row in props["metrics"]:
            options = row[-1] if isinstance(row[-1], dict) else {}
            row = row[:-1] if options else row
            if "expression" in options:
                yield props["title"], {"expression": options["expression"]}
                continue
            row = [previous[i] if v == "." else v for i, v in enumerate(row)]
            previous = row
            namespace, metric, *pairs = row
            dims = frozenset(zip(pairs[::2], pairs[1::2], strict=True))
            yield (
                props["title"],
                {
                    "namespace": namespace,
                    "metric": metric,
                    "dims": dims,
                    "stat": options.get("stat", props.get("stat")),
                    "period": options.get("period", props.get("period")),
                },
            )


def _check(namespace: str, metric: str, dims: frozenset[tuple[str, str]]) -> str | None:
    """None when the metric exists; else why not."""
    if namespace.startswith("AWS/"):
        known = AWS_METRICS.get((namespace, metric))
        if known is None:
            return f"{namespace} {metric}: not in AWS_METRICS"
        dim, rtype = known
        names = {_resource_name(k, None) for k, v in R.items() if v["Type"] == rtype}
        if {d for d, _ in dims} != {dim}:
            return f"{namespace} {metric}: dimensions {sorted(dims)}, AWS publishes {dim}"
        value = next(v for _, v in dims)
        return None if value in names else f"{namespace} {metric}: {value} names no {rtype}"
    if (namespace, metric, dims) in emitted():
        return None
    return f"{namespace} {metric} {sorted(dims)}: not emitted by the code"


# -- the checks --------------------------------------------------------------------------------


@pytest.mark.parametrize("logical", [k for k, _ in alarms()])
def test_every_alarm_reads_an_emitted_metric(logical: str) -> None:
    p = R[logical]["Properties"]
    dims = frozenset((d["Name"], _value(d["Value"])) for d in p.get("Dimensions", []))
    assert _check(p["Namespace"], p["MetricName"], dims) is None
    # Threshold 0 (any occurrence) on metrics that are absent while all is well.
    assert p.get("TreatMissingData") == "notBreaching"
    if p["Namespace"] == NAMESPACE:
        assert p["Statistic"] == "Sum"


def test_every_dashboard_graph_reads_an_emitted_metric() -> None:
    problems = []
    for title, m in widget_metrics():
        if "expression" in m:
            expression = m["expression"]
            search = re.match(r"SEARCH\('\{([^}]*)\} MetricName=\"(\w+)\"'", expression)
            if search:
                namespace, *dim_names = [s.strip() for s in search.group(1).split(",")]
                dims = frozenset((d, ANY) for d in dim_names)
                if (why := _check(namespace, search.group(2), dims)) is not None:
                    problems.append(f"{title}: {why}")
            continue
        if (why := _check(m["namespace"], m["metric"], m["dims"])) is not None:
            problems.append(f"{title}: {why}")
    assert problems == []


def test_the_alarm_widget_lists_every_unconditional_alarm() -> None:
    listed = {
        a.removeprefix("<").split(".")[0]
        for w in dashboard()["widgets"]
        if w["type"] == "alarm"
        for a in w["properties"]["alarms"]
    }
    unconditional = {k for k, v in alarms() if "Condition" not in v}
    assert listed == unconditional


def test_every_function_has_its_errors_and_throttles_on_the_dashboard() -> None:
    graphed = {
        (m["metric"], next(v for _, v in m["dims"]))
        for _, m in widget_metrics()
        if m.get("namespace") == "AWS/Lambda" and m["metric"] in ("Errors", "Throttles")
    }
    missing = sorted(
        f"{metric} {k}"
        for k in FUNCTIONS
        for metric in ("Errors", "Throttles")
        if (metric, _resource_name(k, None)) not in graphed
    )
    assert missing == []


# Backticked words of the docs' metric passages that name no metric.
NOT_METRICS = set(usage_metrics.DIMENSIONS) | {
    "BatchQuotaController",
    "GetJobQueueSnapshot",
    "ListQuotaShares",
    "Resync",
    "Timeout",
}


def _metric_passages() -> Iterator[tuple[str, str]]:
    deploy = (ROOT / "docs/deploy.md").read_text()
    yield "deploy.md", deploy.split("- **Metrics**")[1].split("- **Dashboard**")[0]
    reconciler = (ROOT / "docs/reconciler.md").read_text()
    yield "reconciler.md", reconciler.split("## Metrics")[1].split("\n## ")[0]
    for line in (ROOT / "docs/alerts.md").read_text().splitlines():
        if "metric" in line or "counted in" in line:
            yield "alerts.md", line


def test_every_metric_the_docs_name_is_emitted() -> None:
    names = {n for _, n, _ in emitted()}
    wrong = []
    for doc, text in _metric_passages():
        for word in re.findall(r"`([A-Z][A-Za-z]+(?:_<[^>`]+>)?)`", text):
            if "_<" in word:
                ok = any(n.startswith(word.split("<")[0]) for n in names)
            else:
                ok = word in names or word in NOT_METRICS
            if not ok:
                wrong.append(f"{doc}: {word}")
    assert wrong == []
    deploy = next(text for doc, text in _metric_passages() if doc == "deploy.md")
    undocumented = sorted(
        n for n in names if f"`{n}`" not in deploy and f"`{n.split('_')[0]}_<" not in deploy
    )
    assert undocumented == []


# -- observed: the handlers on the local stack, metrics on ---------------------------------------


class _Webhook:
    def post(self, message: Any) -> None:
        pass


def test_the_handlers_emit_what_the_enumeration_says(capsys: pytest.CaptureFixture[str]) -> None:
    from alert_builders import CROSS, preemption_events
    from builders import guide_layout

    from quota_controller.adapters.slack_webhook import use_webhook
    from quota_local.emulator import Fault
    from quota_local.event_sources import FakeContext
    from quota_local.stack import LocalStack

    queue = "ml-training"
    with LocalStack(run_jobs=False) as stack:
        saved = os.environ.get("POWERTOOLS_METRICS_DISABLED")
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"
        try:
            stack.apply(guide_layout().set(reductionPolicy="warn").build())
            stack.advance(120)
            # A preemption (alert function), then its alert through the Slack function.
            job = stack.submit_job(queue, "team-a", "ml.g5.xlarge", 2, name="borrower")
            stack.emulator.set_job_status(job, "RUNNING")
            other = stack.submit_job(queue, "team-c", "ml.g5.xlarge", 1, name="owner")
            stack.emulator.set_job_status(other, "RUNNING")
            described = stack.batch.describe_service_job(jobId=job)
            stack.put_events(*preemption_events(described, stack.clock.now(), CROSS, "RUNNABLE"))
            stack.run_until_idle()
            alert = next(a for a in stack.alerts() if a["kind"] == "PREEMPTION")
            use_webhook(_Webhook())  # type: ignore[arg-type]
            try:
                stack.handler("slack_notify")(
                    {"Records": [{"Sns": {"Message": json.dumps(alert)}}]},
                    FakeContext("slack-notify"),
                )
            finally:
                use_webhook(None)
            # Batch refuses every UpdateQuotaShare: each resync's reconcile ends `failed`.
            stack.emulator.inject(
                Fault(
                    frozenset({"UpdateQuotaShare"}),
                    code="ClientException",
                    status=400,
                    message="refused",
                    times=-1,
                )
            )
            doc = guide_layout().set(reductionPolicy="warn").build()
            doc["quotaShares"][1]["resourceSharingConfiguration"]["borrowLimit"] = 50
            stack.apply(doc)
            stack.run_until_idle()
            stack.advance(2 * stack.shape.resync_seconds)
        finally:
            if saved is None:
                os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
            else:
                os.environ["POWERTOOLS_METRICS_DISABLED"] = saved
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    assert lines
    names_by_function: dict[str, set[str]] = {}
    for key, info in emitted().items():
        names_by_function.setdefault(info["function"], set()).add(key[1])
    seen: set[str] = set()
    failed = 0
    for line in lines:
        (directive,) = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == NAMESPACE
        names = {m["Name"] for m in directive["Metrics"]}
        seen |= names
        if names <= {usage_metrics.USAGE, usage_metrics.QUOTA}:
            assert [frozenset(d) for d in directive["Dimensions"]] == [USAGE_DIMS]
            continue
        # A Powertools blob: one function's metrics, the one dimension `service`.
        assert directive["Dimensions"] == [["service"]]
        assert line["service"] == "local"  # the stack's POWERTOOLS_SERVICE_NAME: read from env
        assert any(names <= n for n in names_by_function.values()), names
        if "Reconcile_failed" in line:
            v = line["Reconcile_failed"]
            failed += len(v) if isinstance(v, list) else 1
    assert seen <= {n for _, n, _ in emitted()}
    assert {"Records", "AlertEvents", "SlackPosts", "ResyncQueues", "ShareUsage"} <= seen
    assert failed >= 2, "Reconcile_failed: once per resync while Batch refuses"
