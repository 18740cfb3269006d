"""The `sam build` output (.aws-sam/build, made by `make build`, which `make test` runs first):
python3.13 on arm64, this repository's first-party code, aarch64 wheels, shipped bytecode, and
every handler importable and runnable from the build output alone.

What this proves and what it does not: the build runs offline (no AWS account, no Docker) and
packages the right files for arm64. This machine is x86_64, so the layer's compiled packages
(pydantic_core, msgspec's _core, PyYAML's _yaml, wrapt's _wrappers) cannot load here; the import
test swaps in the same versions built for this machine (.aws-sam/host-native) and loads
everything else - handlers, quota_controller, boto3, botocore, Powertools, pydantic - from the
build output, with nothing else on sys.path. That the aarch64 binaries load on Graviton is only
checked by their ELF header and wheel tags here; it is proven by the first deployed invocation."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from quota_local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".aws-sam" / "build"
LAYER = BUILD / "CoreLayer" / "python"
HOST_NATIVE = ROOT / ".aws-sam" / "host-native"
FUNCTIONS = {
    "Reconcile": "reconcile",
    "Resync": "resync",
    "Alert": "alert",
    "SlackNotify": "slack_notify",
    "OwnerNotify": "owner_notify",
}
EM_AARCH64 = 183


@pytest.fixture(scope="module", autouse=True)
def build() -> None:
    missing = [
        str(p) for p in (BUILD / "template.yaml", HOST_NATIVE / ".installed") if not p.exists()
    ]
    if missing:
        pytest.fail(f"no build output ({', '.join(missing)}): run `make build` (make test does)")


def built_template() -> dict[str, Any]:
    return load_template(BUILD / "template.yaml")


def test_every_function_is_built_for_python313_on_arm64_with_the_layer() -> None:
    template = built_template()
    globals_ = template["Globals"]["Function"]
    assert (globals_["Runtime"], globals_["Architectures"]) == ("python3.13", ["arm64"])
    assert globals_["Layers"] == [{"Ref": "CoreLayer"}]
    layer = template["Resources"]["CoreLayer"]
    assert layer["Properties"]["ContentUri"] == "CoreLayer"
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    for name in FUNCTIONS:
        assert template["Resources"][name]["Properties"]["CodeUri"] == name


def test_the_layer_holds_exactly_the_first_party_code() -> None:
    source = ROOT / "layers" / "core" / "quota_controller"
    built = LAYER / "quota_controller"
    files = {
        p.relative_to(source)
        for p in source.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    shipped = {
        p.relative_to(built)
        for p in built.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert shipped == files, "the build is stale: run `make build`"
    stale = [str(f) for f in files if (source / f).read_bytes() != (built / f).read_bytes()]
    assert stale == [], "the build is stale: run `make build`"


def test_each_function_holds_its_handler() -> None:
    for name, folder in FUNCTIONS.items():
        source = (ROOT / "functions" / folder / "app.py").read_bytes()
        assert (BUILD / name / "app.py").read_bytes() == source, name


def test_the_layer_satisfies_its_requirements() -> None:
    versions = {}
    for dist in LAYER.glob("*.dist-info"):
        name, version = dist.name.removesuffix(".dist-info").split("-", 1)
        versions[name.lower().replace("_", "-")] = version
    lines = (ROOT / "layers" / "core" / "requirements.txt").read_text().splitlines()
    for line in lines:
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            name = req.name.lower().replace("_", "-")
            assert name in versions, f"{req.name} is not in the layer"
            assert req.specifier.contains(versions[name]), f"{req.name} {versions[name]} vs {req}"


def test_compiled_code_is_aarch64_only() -> None:
    shared = list(LAYER.rglob("*.so"))
    assert {p.parent.name for p in shared} >= {"pydantic_core", "msgspec", "yaml"}
    for path in shared:
        header = path.read_bytes()[:20]
        assert header[:4] == b"\x7fELF", path
        assert int.from_bytes(header[18:20], "little") == EM_AARCH64, f"{path} is not aarch64"
        assert "aarch64" in path.name, path
    for wheel in LAYER.glob("*.dist-info/WHEEL"):
        tags = [line for line in wheel.read_text().splitlines() if line.startswith("Tag:")]
        assert all(t.endswith("-any") or "aarch64" in t for t in tags), (wheel, tags)


def test_the_host_stand_ins_are_the_same_versions_as_the_layers_compiled_packages() -> None:
    native = {
        d.name.removesuffix(".dist-info")
        for d in LAYER.glob("*.dist-info")
        if ".so," in (d / "RECORD").read_text()
    }
    host = {d.name.removesuffix(".dist-info") for d in HOST_NATIVE.glob("*.dist-info")}
    compiled = ("pydantic_core", "msgspec", "pyyaml", "wrapt")
    assert native == host == {n for n in native if n.split("-")[0] in compiled}


def test_every_module_ships_with_bytecode_of_its_current_source() -> None:
    # Lambda cannot write .pyc to /opt or /var/task: without these, every cold start compiles.
    # unchecked-hash: sam's zips reset file times, so timestamp-checked .pyc would be ignored.
    sources = [p for p in BUILD.rglob("*.py") if "__pycache__" not in p.parts]
    assert any(p.name == "planner.py" for p in sources)
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.exists(), f"{source} has no bytecode: run `make build`"
        data = cached.read_bytes()
        flags = int.from_bytes(data[4:8], "little")
        assert flags == 0b01, f"{cached} is not unchecked-hash bytecode"
        assert data[8:16] == importlib.util.source_hash(source.read_bytes()), f"{cached} is stale"


CHILD = """
import json, os, sys
sys.path[:0] = {paths!r}
import app
{invoke}
# What the handlers import lazily at their first invocation: all of quota_controller.
import pkgutil, importlib, quota_controller
for module in pkgutil.walk_packages(quota_controller.__path__, "quota_controller."):
    importlib.import_module(module.name)
roots = {roots!r}
stdlib = os.path.dirname(os.__file__)
outside = sorted(
    name for name, module in sys.modules.items()
    if getattr(module, "__file__", None)
    and not module.__file__.startswith((stdlib, *roots))
)
origins = {{
    name: sys.modules[name].__file__
    for name in ("app", "quota_controller", "boto3", "botocore", "aws_lambda_powertools",
                 "pydantic", "pydantic_core", "msgspec", "yaml")
    if name in sys.modules
}}
print(json.dumps({{"outside": outside, "origins": origins, "result": result,
                  "callable": callable(app.lambda_handler),
                  "xray": "aws_xray_sdk" in sys.modules,
                  "parser": "aws_lambda_powertools.utilities.parser.models" in sys.modules}}))
"""

# Offline invocations that touch no AWS API: records that fail to parse.
INVOCATIONS = {
    "Reconcile": (
        "import quota_controller.composition\n"
        "event = json.load(open({event!r}))\n"
        "result = app.lambda_handler(event, Context())\n"
    ),
    "Alert": (
        "event = {{'Records': [{{'messageId': 'm-1', 'body': 'not json', "
        "'eventSource': 'aws:sqs', 'attributes': {{}}, 'messageAttributes': {{}}}}]}}\n"
        "result = app.lambda_handler(event, Context())\n"
    ),
}
CONTEXT = textwrap.dedent(
    """
    class Context:
        function_name = "built"
        memory_limit_in_mb = 512
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:built"
        aws_request_id = "00000000-0000-0000-0000-000000000000"
        def get_remaining_time_in_millis(self):
            return 60000
    """
)
ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "offline",
    "AWS_SECRET_ACCESS_KEY": "offline",
    "AWS_EC2_METADATA_DISABLED": "true",
    # Anything that did try to call AWS would fail at once here instead of leaving the machine.
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "CONFIG_TABLE": "t",
    "ALERTS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:t",
    "REQUEUE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
    "IDEMPOTENCY_TABLE": "i",
    "ACCOUNT_ID": "123456789012",
    "POWERTOOLS_METRICS_NAMESPACE": "Test",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
}


def run_built(name: str, **env: str) -> dict[str, Any]:
    invoke = INVOCATIONS.get(name, "result = None\n")
    invoke = CONTEXT + invoke.format(
        event=str(ROOT / "events" / "reconcile" / "sqs-malformed.json")
    )
    paths = [str(BUILD / name), str(HOST_NATIVE), str(LAYER)]
    code = CHILD.format(paths=paths, invoke=invoke, roots=paths)
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", code],
        capture_output=True,
        text=True,
        env={**ENV, "POWERTOOLS_SERVICE_NAME": name, **env},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_each_handler_imports_from_the_build_output_alone(name: str) -> None:
    report = run_built(name)
    assert report["callable"]
    assert report["outside"] == [], "modules loaded from outside the build output"
    origins = {k: Path(v) for k, v in report["origins"].items()}
    assert origins["app"] == BUILD / name / "app.py"
    for package in ("quota_controller", "aws_lambda_powertools", "pydantic"):
        assert origins[package].is_relative_to(LAYER), package
    assert origins["pydantic_core"].is_relative_to(HOST_NATIVE)
    assert origins["msgspec"].is_relative_to(HOST_NATIVE)


def test_built_handlers_run_offline() -> None:
    # The reconcile handler builds its adapters (composition) and answers the malformed
    # requeue message with a batch item failure; the alert handler does the same for an event
    # that is not JSON. Neither may reach AWS.
    assert run_built("Reconcile")["result"] == {
        "batchItemFailures": [{"itemIdentifier": "3c1a2b4d-0000-4000-8000-000000000001"}]
    }
    assert run_built("Alert")["result"] == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


def test_the_reconcile_handler_skips_powertools_parser_models() -> None:
    # Powertools' batch utility builds its parser models (pydantic, unused here, about 25 ms of
    # cold start) only when pydantic is loaded first: the handler imports it before pydantic.
    assert run_built("Reconcile")["parser"] is False


def test_the_xray_sdk_is_loaded_only_when_tracing_is_on() -> None:
    # EnableTracing=true sets POWERTOOLS_TRACE_DISABLED=false: Powertools Tracer, with the
    # X-Ray SDK from the layer. Off (the default), the SDK is never imported (cold start).
    traced = run_built("Reconcile", POWERTOOLS_TRACE_DISABLED="false")
    assert traced["result"]["batchItemFailures"]
    assert traced["xray"] is True
    assert run_built("Reconcile")["xray"] is False


def test_the_layer_is_pinned_to_the_versions_the_tests_run_with() -> None:
    def pins(path: Path) -> dict[str, str]:
        out = {}
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                req = Requirement(line)
                (spec,) = req.specifier
                assert spec.operator == "==", f"{path.name}: {line} is not an exact pin"
                out[req.name.lower().replace("_", "-")] = spec.version
        return out

    layer = pins(ROOT / "layers" / "core" / "requirements.txt")
    tested = pins(ROOT / "constraints.txt")
    assert {name: tested.get(name) for name in layer} == layer


def test_the_package_fits_lambdas_limits() -> None:
    def megabytes(folder: Path) -> float:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6

    layer = megabytes(BUILD / "CoreLayer")
    for name in FUNCTIONS:
        assert layer + megabytes(BUILD / name) < 250, name  # unzipped, function and layers


def test_samconfig_deploys_this_templates_parameters() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]
    deploy = config["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    overrides = dict(item.split("=", 1) for item in shlex.split(deploy["parameter_overrides"]))
    parameters = load_template()["Parameters"]
    assert set(overrides) <= set(parameters)
    # The defaults samconfig gives are the template's own: one source of truth. A parameter
    # without a default (ManagedNamePrefix: the operator's choice) is given by samconfig.
    required = {k for k, spec in parameters.items() if "Default" not in spec}
    assert required == {"ManagedNamePrefix"}
    assert required <= set(overrides)
    assert {k: str(parameters[k]["Default"]) for k in overrides if k not in required} == {
        k: v for k, v in overrides.items() if k not in required
    }
    assert overrides["ManagedNamePrefix"] != "*"
