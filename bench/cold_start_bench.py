"""Cold start and package size of the built functions (`make build` first; `make bench` does).

For each handler, a fresh interpreter (-I -S: no site-packages, -B: no bytecode written, as on
Lambda's read-only file system) imports the built handler module, parses one sample event into
its model and imports what the handler's first invocation imports lazily (composition builds
its adapters then: boto3 and the adapter modules; without them, lazy imports would only move
cost out of the measurement, not out of the cold start) and, for the reconcile and the alert,
does the part of their first invocation that loads or builds most on first use (`FIRST_WORK`:
validate the document and decide, not announce, execute or write; classify the event and render
its alert). A whole first reconcile on in-memory stand-ins adds about 1 ms of first use more.
Against it, a fresh interpreter that only imports boto3 from the same layer. The ratio of the
medians (same run, interleaved; CPU time of the process) is `cold_start.<handler>.import_ratio`,
reported but no target: the libraries alone cost more than 1.5 times boto3.

The target is on our own code. A handler's library floor is exactly the library modules its
process loaded (every module from the layer or the host wheels outside `OWN_PACKAGES`, found by
running the handler once and listing `sys.modules`), imported in the order they finished
loading, then used once as `FLOORS` do (`first_use`). A fresh interpreter (same flags, same
paths) runs the floor, then the handler's part, and reports its CPU time in between: what the
handler's part costs, `cold_start.<handler>.own_code_ms`, is what our code adds over its
libraries (its own modules, the standard-library modules only it imports, building its pydantic
models, parsing the event), measured in one process, so without the start-up noise of a second
interpreter. It must stay within `OWN_CODE_TARGET_MS`. `floor_ms` is that process's CPU time up
to the end of the floor, `first_use_ms` the floor's first use. The hand-written floors
(`FLOORS`: the libraries every handler needs, none of our code) are reported as
`cold_start.floor_<name>.import_ratio`.

The layer in .aws-sam/build is for arm64; this machine is x86, so the layer's compiled packages
(pydantic_core, msgspec's _core, PyYAML's _yaml, wrapt's _wrappers) are taken from
.aws-sam/host-native (same versions, this machine's wheels). Everything else - the handler,
quota_controller, boto3, Powertools, pydantic - is the build output itself.

Measured twice: with the bytecode `make build` ships (unchecked-hash .pyc), and from source
only (what a plain `sam build` ships: no .pyc, and Lambda cannot write them). Also: the cost of
Powertools Tracer (the layer's X-Ray SDK) on top of boto3, and the zipped size
of each function with its layer (what `sam deploy` uploads; Lambda allows 50 MB zipped for a
direct upload and 250 MB unzipped for a function and its layers).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `make build`'s output; BENCH_SAM_DIR measures another checkout's (e.g. a worktree without one).
SAM_DIR = Path(os.environ.get("BENCH_SAM_DIR") or ROOT / ".aws-sam")
BUILD = SAM_DIR / "build"
HOST_NATIVE = SAM_DIR / "host-native"
EVENTS = ROOT / "events"
LAYER = "CoreLayer"

# handler -> (build folder, sample event, code that parses `event` into its model)
HANDLERS: dict[str, tuple[str, str, str]] = {
    "reconcile": (
        "Reconcile",
        "reconcile/stream-share-modified.json",
        "from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent\n"
        "from quota_controller.services.reconcile_events import queue_of_stream_record\n"
        "assert queue_of_stream_record(next(iter(DynamoDBStreamEvent(event).records)))\n",
    ),
    "resync": (
        "Resync",
        "resync/schedule.json",
        # The handler reads nothing of its schedule event: there is no model to parse it into.
        "assert event['detail-type'] == 'Scheduled Event'\n",
    ),
    "alert": (
        "Alert",
        "alert/preemption-completed.json",
        "from quota_controller.domain.alerts.events import BatchEvent\n"
        "assert BatchEvent.model_validate(event).job_id()\n",
    ),
    "slack_notify": (
        "SlackNotify",
        "",  # no sample folder: an SNS event around an alert (below)
        "from quota_controller.domain.alerts.model import ReceivedAlert\n"
        "assert [ReceivedAlert.model_validate_json(r['Sns']['Message']) "
        "for r in event['Records']]\n",
    ),
    "record_history": (
        "RecordHistory",
        "",  # no sample folder: the history buffer's SQS batch around a Batch event (below)
        "from quota_controller.domain.alerts.events import BatchEvent\n"
        "from quota_controller.services.history_events import observation\n"
        "assert all(observation(BatchEvent.model_validate_json(r['body'])) "
        "for r in event['Records'])\n",
    ),
    "owner_notify": (
        "OwnerNotify",
        "",  # no sample folder: the SNS event around an alert about a share, as SlackNotify's
        "from quota_controller.domain.alerts.model import ReceivedAlert\n"
        "assert ReceivedAlert.model_validate_json(event['Records'][0]['Sns']['Message'])"
        ".quotaShareName\n",
    ),
}

# What each handler's first invocation imports through composition (besides the handler module).
FIRST_CALL: dict[str, tuple[str, ...]] = {
    "reconcile": (
        "botocore.config",
        "quota_controller.adapters.batch_gateway",
        "quota_controller.adapters.config_store",
        "quota_controller.services.log_safety",
        "quota_controller.adapters.settings",
        "quota_controller.adapters.sns_notifier",
        "quota_controller.adapters.sns_owners",
        "quota_controller.adapters.sqs_requeuer",
    ),
    "resync": (
        "botocore.config",
        "aws_lambda_powertools.metrics.functions",
        "quota_controller.adapters.batch_reader",
        "quota_controller.adapters.queue_scan",
        "quota_controller.services.log_safety",
        "quota_controller.adapters.sqs_requeuer",
        "quota_controller.adapters.settings",
        "quota_controller.services.resync",
        "quota_controller.services.tag_drift",
        "quota_controller.services.usage_metrics",
    ),
    "alert": (
        "botocore.config",
        "aws_lambda_powertools.utilities.idempotency",
        "quota_controller.services.alert_events",
        "quota_controller.adapters.batch_reader",
        "quota_controller.adapters.idempotency_claims",
        "quota_controller.adapters.config_store",
        "quota_controller.services.log_safety",
        "quota_controller.adapters.settings",
        "quota_controller.adapters.sns_notifier",
    ),
    "record_history": (
        "botocore.config",
        "quota_controller.services.log_safety",
        "quota_controller.adapters.settings",
        "quota_controller.adapters.history_store",
        # A job's end without preemptionSummary is described once (history_events._Completion).
        "quota_controller.adapters.batch_reader",
    ),
    "slack_notify": (
        "aws_lambda_powertools.utilities.parameters",
        "quota_controller.services.log_safety",
        "quota_controller.adapters.settings",
        "quota_controller.adapters.slack_webhook",
    ),
    # The share's owners read, each webhook or chat topic claimed (Idempotency), a webhook's
    # secret read (Parameters), a topic published to.
    "owner_notify": (
        "botocore.config",
        "aws_lambda_powertools.utilities.idempotency",
        "aws_lambda_powertools.utilities.parameters",
        "quota_controller.services.log_safety",
        "quota_controller.adapters.settings",
        "quota_controller.adapters.idempotency_claims",
        "quota_controller.adapters.share_owners",
        "quota_controller.adapters.slack_webhook",
        "quota_controller.adapters.sns_chat_topics",
    ),
}

# What a typical first invocation does after its imports, short of AWS calls (the ports are
# stand-ins answering from the samples): without it, a model or module loaded on first use would
# leave the measurement, not the cold start. The reconcile validates the example document (as
# read from the config table: its items) and decides on it against a Batch that has none of it
# yet: the plan and the guard, as `services.decision` does for the reconcile. The alert handles
# its sample as the handler does (`handle_alert_batch`): the job described (a preempted job of
# team-a), the document validated, the preemption classified and its alert rendered for SNS.
# Neither sample document has quota windows or owners, and the reconcile sends no alert: what
# a first invocation that takes those paths adds is in docs/performance.md, "Cold start".
FIRST_WORK: dict[str, str] = {
    "reconcile": (
        "from datetime import datetime, timezone\n"
        "from quota_controller.domain.config.items import document_to_items, validate_items\n"
        "from quota_controller.domain.observed import ObservedState\n"
        "from quota_controller.domain.plan_records import Scope\n"
        "from quota_controller.domain.status import read_status\n"
        "from quota_controller.services.decision import decide\n"
        "class _Batch:\n"
        "    scope = Scope('123456789012', 'us-east-1')\n"
        "    def observe(self, queue, policies, environments):\n"
        "        return ObservedState()\n"
        "    def queue_jobs(self, queue):\n"
        "        return []\n"
        "_items = document_to_items(json.loads({document!r}))\n"
        "_queue = _items[0]['jobQueue']['jobQueueName']\n"
        "_now = datetime(2026, 3, 16, 19, 0, tzinfo=timezone.utc)\n"
        "_assembled, _report = validate_items(_queue, _items, _now)\n"
        "assert _report.ok, _report.errors\n"
        "_decision = decide(_queue, _report, read_status(_items), _Batch(), "
        "assembled=_assembled, now=_now.isoformat())\n"
        "assert _decision.plan.actions and all(d.applies for d in _decision.decided)\n"
    ),
    "alert": (
        "from quota_controller.adapters.sns_notifier import SnsNotifier\n"
        "from quota_controller.domain.config.items import document_to_items\n"
        "from quota_controller.services.alert_events import AlertDeps, handle_alert_batch\n"
        "_job = event['detail']['preemptedJobArn']\n"
        "class _Reader:\n"
        "    def describe_job(self, job_id):\n"
        "        return {{'jobArn': _job, 'jobId': job_id, 'jobName': 'train-0', "
        "'jobQueue': 'arn:aws:batch:us-east-1:123456789012:job-queue/ml-training', "
        "'status': 'RUNNABLE', 'quotaShareName': 'team-a', "
        "'capacityUsage': [{{'capacityUnit': 'ml.g5.xlarge', 'quantity': 1}}], "
        "'preemptionSummary': event['detail']['preemptionSummary']}}\n"
        "    def snapshot(self, queue):\n"
        "        return None\n"
        "class _Store:\n"
        "    def load_partition(self, queue):\n"
        "        return document_to_items(json.loads({document!r}))\n"
        "    def recent_changes(self, queue, since):\n"
        "        return []\n"
        "class _Claims:\n"
        "    def claim(self, key):\n"
        "        return True\n"
        "    def confirm(self, key):\n"
        "        pass\n"
        "class _Sns:\n"
        "    def publish(self, **message):\n"
        "        self.message = message\n"
        "_sns = _Sns()\n"
        "_deps = AlertDeps(_Reader(), _Store(), SnsNotifier(_sns, 'arn:aws:sns:::alerts'), "
        "_Claims())\n"
        "_batch = {{'Records': [{{'messageId': '1', 'body': json.dumps(event)}}]}}\n"
        "_response, _outcome = handle_alert_batch(_batch, _deps)\n"
        "assert _outcome.published and _sns.message and not _response['batchItemFailures']\n"
    ),
}
# The sample document: the layout of the AWS Batch guide, three shares (examples/quotas.yaml).
DOCUMENT = ROOT / "examples" / "quotas.yaml"

_ALERT = {
    "schemaVersion": "1",
    "kind": "PREEMPTION",
    "cause": "CAPACITY_RECLAIM",
    "severity": "warning",
    "jobQueue": "ml-training",
    "quotaShareName": "team-a",
    "jobs": [{"jobId": "51f245a9", "jobName": "train-0", "statusBefore": "RUNNING"}],
    "summary": "1 job of team-a preempted: borrowed capacity reclaimed",
    "occurredAt": "2026-03-16T19:10:00Z",
    "dedupKey": "ml-training:team-a:CAPACITY_RECLAIM:1",
}
SNS_EVENT = {
    "Records": [
        {
            "EventSource": "aws:sns",
            "EventVersion": "1.0",
            "Sns": {"Type": "Notification", "MessageId": "1", "Message": json.dumps(_ALERT)},
        }
    ]
}

ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "bench",
    "POWERTOOLS_METRICS_NAMESPACE": "Bench",
}
# Our packages in the layer: what a handler's library floor leaves out.
OWN_PACKAGES = ("quota_controller",)
# CPU ms a handler's own code may add over its library floor.
OWN_CODE_TARGET_MS = 50.0

# The floors: what the libraries every handler must use cost before any of our code, measured in
# the same run. Powertools Logger and Metrics (every handler logs and publishes metrics) and one
# pydantic model validated (every handler's event, alert, settings or config model); "batch" adds
# Powertools' BatchProcessor (the reconcile handler's partial batch responses), imported before
# pydantic as the reconcile does. A handler cannot start below its floor whatever its own code does.
_POWERTOOLS = "from aws_lambda_powertools import Logger, Metrics\nLogger()\nMetrics()\n"
_PYDANTIC = (
    "from pydantic import BaseModel\n"
    "class Sample(BaseModel):\n    name: str\n"
    "Sample.model_validate({'name': 'x'})\n"
)
_BATCH = (
    "from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType\n"
    "BatchProcessor(EventType.SQS)\n"
)
FLOORS: dict[str, str] = {
    "floor_powertools_pydantic": f"import boto3\n{_POWERTOOLS}{_PYDANTIC}",
    "floor_powertools_pydantic_batch": f"import boto3\n{_POWERTOOLS}{_BATCH}{_PYDANTIC}",
}


def _require_build() -> None:
    missing = [p for p in (BUILD / LAYER, HOST_NATIVE / ".installed") if not p.exists()]
    if missing:
        raise SystemExit(f"no build output ({', '.join(map(str, missing))}): run `make build`")


def history_buffer_event() -> dict[str, object]:
    """What RecordHistory receives: an SQS batch from the history buffer, each body a Batch
    event as the HistoryEventsRule puts it there (here: a job's State Change to SUCCEEDED)."""
    body = (EVENTS / "alert" / "state-change-succeeded.json").read_text()
    return {
        "Records": [
            {
                "messageId": "1",
                "receiptHandle": "1",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:history-buffer",
                "awsRegion": "us-east-1",
            }
        ]
    }


def _sample(handler: str) -> str:
    name = HANDLERS[handler][1]
    if name:
        return (EVENTS / name).read_text()
    return json.dumps(history_buffer_event() if handler == "record_history" else SNS_EVENT)


def _code(paths: list[Path], body: str) -> str:
    return f"import sys\nsys.path[:0] = {[str(p) for p in paths]!r}\n{body}"


def handler_paths(root: Path, handler: str, native: Path) -> list[Path]:
    """The handler's sys.path: its function folder, the host wheels, the layer."""
    return [root / HANDLERS[handler][0], native, root / LAYER / "python"]


def handler_body(handler: str) -> str:
    """What the handler's process does: import the handler, parse the sample, import what its
    first invocation imports, and do its first invocation's work short of AWS (`FIRST_WORK`)."""
    _, _, parse = HANDLERS[handler]
    first_call = "".join(f"import {m}\n" for m in ("boto3", *FIRST_CALL[handler]))
    work = FIRST_WORK.get(handler, "").format(document=_document())
    return (
        f"import json\nimport app\nevent = json.loads({_sample(handler)!r})\n"
        f"{parse}{first_call}{work}"
    )


def _document() -> str:
    """The sample document as JSON (its YAML read here, so the handler's process loads no
    YAML parser the function does not)."""
    import yaml

    return json.dumps(yaml.safe_load(DOCUMENT.read_text()))


def handler_code(root: Path, handler: str, native: Path) -> str:
    """What the handler's fresh interpreter runs: import the handler, parse the sample."""
    return _code(handler_paths(root, handler, native), handler_body(handler))


def boto3_code(root: Path, native: Path) -> str:
    """The baseline: only `import boto3`, from the same layer."""
    return _code([native, root / LAYER / "python"], "import boto3\n")


_LIST_MODULES = (
    "import json as _json, sys as _sys\n"
    "_mods = list(_sys.modules.items())\n"
    "print(_json.dumps([[n, getattr(m, '__file__', None)] for n, m in _mods]))\n"
)


def library_modules(
    code: str, roots: Sequence[Path], own: Sequence[str] = OWN_PACKAGES
) -> list[str]:
    """The modules a fresh interpreter running `code` has loaded from `roots` (the libraries),
    in the order they finished loading (a package after the submodules its `__init__`
    imports: `sys.modules` order), our own packages (`own`) left out."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", code + _LIST_MODULES],
        check=True,
        env=ENV,
        capture_output=True,
        text=True,
    )
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    prefixes = [os.path.realpath(root) + os.sep for root in roots]
    names = []
    for name, file in loaded:
        if not file or name.split(".")[0] in own:
            continue
        if any(os.path.realpath(file).startswith(prefix) for prefix in prefixes):
            names.append(name)
    return names


def first_use(modules: Sequence[str]) -> str:
    """What using the libraries at all costs before a line of ours, as in `FLOORS`: a Powertools
    Logger and Metrics, one pydantic model built and validated (pydantic's first model pays its
    one-off set-up, whatever the model), each only for a library among `modules`."""
    loaded = set(modules)
    parts = []
    if "aws_lambda_powertools.logging" in loaded:
        parts.append("from aws_lambda_powertools import Logger\nLogger()\n")
    if "aws_lambda_powertools.metrics" in loaded:
        parts.append("from aws_lambda_powertools import Metrics\nMetrics()\n")
    if "pydantic" in loaded:
        parts.append(_PYDANTIC)
    return "".join(parts)


def _imports(modules: Sequence[str]) -> str:
    return (
        f"import importlib\nfor _name in {list(modules)!r}:\n    importlib.import_module(_name)\n"
    )


def own_code_program(paths: Sequence[Path], modules: Sequence[str], body: str) -> str:
    """One fresh interpreter: the library floor, then the handler's `body`; it prints its CPU
    seconds after the imports, after their first use and at the end. The handler's part is what
    our code adds over its libraries, measured without a second interpreter's start-up noise."""
    return _code(
        list(paths),
        "import time as _time\n"
        + _imports(modules)
        + "_marks = [_time.process_time()]\n"
        + first_use(modules)
        + "_marks.append(_time.process_time())\n"
        + body
        + "_marks.append(_time.process_time())\nprint(_marks)\n",
    )


def own_code(program: str, repeats: int) -> dict[str, float]:
    """Medians over `repeats` fresh runs of an `own_code_program`: CPU seconds up to the end of
    the floor (`floor`), of the libraries' first use (`first_use`) and of our code (`own`)."""
    marks: list[list[float]] = []
    for _ in range(repeats + 1):  # the first run warms the page cache
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", program],
            check=True,
            env=ENV,
            capture_output=True,
            text=True,
        )
        marks.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    runs = marks[1:]
    return {
        "floor": statistics.median(m[1] for m in runs),
        "first_use": statistics.median(m[1] - m[0] for m in runs),
        "own": statistics.median(m[2] - m[1] for m in runs),
    }


def _run(code: str, env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system) of a fresh interpreter running the code: unlike wall time,
    this does not count the time other processes of a busy machine hold the CPU."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", "-c", code],
        env=env or ENV,
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return usage.ru_utime + usage.ru_stime


def _medians(
    codes: dict[str, str], repeats: int, env: dict[str, str] | None = None
) -> dict[str, float]:
    """Median CPU seconds of a fresh process per code, the codes interleaved in every round."""
    times: dict[str, list[float]] = {name: [] for name in codes}
    for code in codes.values():  # warm the page cache once
        _run(code, env=env)
    for _ in range(repeats):
        for name, code in codes.items():
            times[name].append(_run(code, env=env))
    return {name: statistics.median(values) for name, values in times.items()}


def _source_only_copy(into: Path) -> tuple[Path, Path]:
    """The build and the host wheels without any .pyc (what a plain `sam build` ships)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    root, native = into / "build", into / "native"
    for folder in [LAYER, *(h[0] for h in HANDLERS.values())]:
        shutil.copytree(BUILD / folder, root / folder, ignore=ignore)
    shutil.copytree(HOST_NATIVE, native, ignore=ignore)
    return root, native


def import_profile(handler: str, top: int = 6) -> list[tuple[str, float]]:
    """`python -X importtime` of the handler process: self time per top-level package (ms)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-B",
            "-X",
            "importtime",
            "-c",
            handler_code(BUILD, handler, HOST_NATIVE),
        ],
        check=True,
        env=ENV,
        capture_output=True,
        text=True,
    )
    totals: Counter[str] = Counter()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, self_us, _, name = (part.strip() for part in line.replace(":", "|", 1).split("|"))
        totals[name.split(".")[0]] += int(self_us) / 1000
    return [(name, round(ms, 1)) for name, ms in totals.most_common(top)]


def _zipped_mb(folder: Path) -> float:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder))
    return buffer.tell() / 1e6


def _unzipped_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def package_sizes() -> dict[str, float]:
    """Zipped MB of each function plus its layer, and unzipped MB of both."""
    layer_zip, layer_raw = _zipped_mb(BUILD / LAYER), _unzipped_mb(BUILD / LAYER)
    out: dict[str, float] = {}
    for folder, _, _ in HANDLERS.values():
        out[f"package.{folder}.zipped_mb"] = round(layer_zip + _zipped_mb(BUILD / folder), 2)
        out[f"package.{folder}.unzipped_mb"] = round(layer_raw + _unzipped_mb(BUILD / folder), 1)
    return out


def tracer_codes() -> dict[str, str]:
    """boto3 alone, and boto3 plus an enabled Powertools Tracer (X-Ray SDK import + patch)."""
    paths = [HOST_NATIVE, BUILD / LAYER / "python"]
    return {
        "boto3": _code(paths, "import boto3\n"),
        "tracer": _code(
            paths, "import boto3\nfrom aws_lambda_powertools import Tracer\nTracer(service='x')\n"
        ),
    }


def run(repeats: int = 7) -> dict[str, float]:
    """Measure; returns flat results keyed as in bench/results.json."""
    _require_build()
    results: dict[str, float] = {}
    codes = {h: handler_code(BUILD, h, HOST_NATIVE) for h in HANDLERS}
    codes["boto3"] = boto3_code(BUILD, HOST_NATIVE)
    paths = [HOST_NATIVE, BUILD / LAYER / "python"]
    codes.update({name: _code(paths, body) for name, body in FLOORS.items()})
    for handler in HANDLERS:
        modules = library_modules(codes[handler], paths)
        results[f"cold_start.{handler}.library_modules"] = len(modules)
        program = own_code_program(
            handler_paths(BUILD, handler, HOST_NATIVE), modules, handler_body(handler)
        )
        split = own_code(program, repeats)
        results[f"cold_start.{handler}.floor_ms"] = round(split["floor"] * 1000, 1)
        results[f"cold_start.{handler}.first_use_ms"] = round(split["first_use"] * 1000, 1)
        results[f"cold_start.{handler}.own_code_ms"] = round(split["own"] * 1000, 1)
    with_bytecode = _medians(codes, repeats)
    with tempfile.TemporaryDirectory() as tmp:
        root, native = _source_only_copy(Path(tmp))
        plain = {h: handler_code(root, h, native) for h in HANDLERS}
        plain["boto3"] = boto3_code(root, native)
        source_only = _medians(plain, max(3, repeats // 2))
    base = with_bytecode["boto3"]
    results["cold_start.boto3.import_ms"] = round(base * 1000, 1)
    results["cold_start.boto3.import_ms_no_bytecode"] = round(source_only["boto3"] * 1000, 1)
    for handler in HANDLERS:
        results[f"cold_start.{handler}.import_ratio"] = round(with_bytecode[handler] / base, 2)
        results[f"cold_start.{handler}.import_ms"] = round(with_bytecode[handler] * 1000, 1)
        results[f"cold_start.{handler}.import_ms_no_bytecode"] = round(
            source_only[handler] * 1000, 1
        )
    for floor in FLOORS:
        results[f"cold_start.{floor}.import_ratio"] = round(with_bytecode[floor] / base, 2)
        results[f"cold_start.{floor}.import_ms"] = round(with_bytecode[floor] * 1000, 1)
    env = {**ENV, "LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"}
    traced = _medians(tracer_codes(), repeats, env)
    results["cold_start.tracer.added_ms"] = round((traced["tracer"] - traced["boto3"]) * 1000)
    results["cold_start.tracer.boto3_ratio"] = round(traced["tracer"] / traced["boto3"], 2)
    results.update(package_sizes())
    print("what dominates a handler's import (python -X importtime, self ms per package):")
    for handler in HANDLERS:
        print(f"  {handler:13} " + ", ".join(f"{n} {ms}" for n, ms in import_profile(handler)))
    return results
