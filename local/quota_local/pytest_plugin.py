"""pytest plugin (entry point `pytest11`): the `quota_stack` fixture, a started LocalStack.

    def test_my_layout(quota_stack):
        quota_stack.apply("quotas.yaml")
        quota_stack.advance(120)
        assert quota_stack.status("ml-training")["conditions"]["Applied"]["status"] == "True"

Options, the first given wins: the `quota_stack` marker (`variants=`, `start=`, `server=` and
any other LocalStack argument), the command line (`--quota-variants`, `--quota-start`,
`--quota-server`), the ini file (`quota_variants`, `quota_start`, `quota_server`). The
`quota_variants(*specs)` marker runs a test once per emulator variant spec. docs/local.md.

pytest loads this module in every run of an environment that has the package installed, so it
imports nothing heavy: LocalStack (moto, boto3) only when a test asks for the fixture.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

_VARIANTS_HELP = (
    "emulator variants of every quota_stack: a profile (default, pessimistic), NAME=VALUE "
    "pairs separated by commas, or a conformance file (.json) from `quotactl conformance`"
)
_START_HELP = "the quota_stack's virtual clock starts here: ISO 8601 (naive = UTC) or 'now'"
_SERVER_HELP = (
    "serve each quota_stack on 127.0.0.1 (AWS_ENDPOINT_URL and QUOTACTL_LOCAL_STATE, which "
    "`quotactl --local` reads, are set while it runs)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("quota_stack", "batch-quota-controller local stack (quota_stack)")
    group.addoption("--quota-variants", metavar="SPEC", default=None, help=_VARIANTS_HELP)
    group.addoption("--quota-start", metavar="TIME", default=None, help=_START_HELP)
    group.addoption("--quota-server", action="store_true", default=None, help=_SERVER_HELP)
    parser.addini("quota_variants", _VARIANTS_HELP + "; a relative path is from the rootdir")
    parser.addini("quota_start", _START_HELP)
    parser.addini("quota_server", _SERVER_HELP, type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "quota_stack(variants=None, start=None, server=False, **options): how the quota_stack "
        "fixture builds its LocalStack (options: any LocalStack argument)",
    )
    config.addinivalue_line(
        "markers",
        "quota_variants(*specs): run the test once per emulator variant spec (a profile name, "
        "a mapping of name -> value, NAME=VALUE text, or a conformance file path)",
    )
    # A bad option fails the run at once, as a usage error, not in every test's setup.
    try:
        _configured(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("quota_variants")
    if marker is None:
        return
    where = metafunc.definition.nodeid
    if "quota_stack" not in metafunc.fixturenames:
        raise pytest.UsageError(
            f"{where}: @pytest.mark.quota_variants needs the quota_stack fixture"
        )
    if not marker.args:
        raise pytest.UsageError(f"{where}: @pytest.mark.quota_variants needs at least one spec")
    metafunc.parametrize(
        "quota_stack", list(marker.args), indirect=True, ids=[_spec_id(s) for s in marker.args]
    )


@pytest.fixture
def quota_stack(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A started `quota_local.stack.LocalStack`, stopped after the test."""
    options = _configured(request.config)
    marker = request.node.get_closest_marker("quota_stack")
    where = request.node.nodeid
    if marker is not None:
        if marker.args:
            pytest.fail(
                f"{where}: @pytest.mark.quota_stack takes keyword arguments only", pytrace=False
            )
        options.update(marker.kwargs)
    if hasattr(request, "param"):
        options["variants"] = request.param
    if importlib.util.find_spec("moto") is None:
        pytest.fail(
            f"{where}: quota_stack runs on moto, which is not installed: "
            "pip install 'batch-quota-controller[local]'",
            pytrace=False,
        )
    from quota_local.stack import LocalStack

    try:
        options = _checked(options, LocalStack)
        stack = LocalStack(**options)
    except (TypeError, ValueError) as exc:
        pytest.fail(f"{where}: quota_stack: {exc}", pytrace=False)
    with stack:
        if not stack.server:
            yield stack
            return
        state = request.getfixturevalue("tmp_path_factory").mktemp("quota_stack") / "local.json"
        with pytest.MonkeyPatch.context() as env:
            _announce(stack, state, env)
            yield stack


# quotactl's --local reads the running stack from this file (quotactl.local_state).
_STATE_ENV = "QUOTACTL_LOCAL_STATE"


def _announce(stack: Any, path: Path, env: pytest.MonkeyPatch) -> None:
    """Name a served stack as `quotactl local up` names itself, in a state file of its own that
    $QUOTACTL_LOCAL_STATE points at while the test runs, so `quotactl ... --local` in a
    subprocess reaches this stack. No clock is recorded: the test moves the stack's clock, so
    commands that need the stack's "now" take the wall clock."""
    import json

    state = {**stack.quotactl_state(), "pid": os.getpid()}
    path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    env.setenv(_STATE_ENV, str(path))


def _configured(config: pytest.Config) -> dict[str, Any]:
    """The LocalStack options the command line and the ini file give."""
    options: dict[str, Any] = {}
    variants = config.getoption("quota_variants")
    if variants is None:
        ini = str(config.getini("quota_variants") or "").strip()
        if ini:
            variants = _from_rootdir(ini, config.rootpath)
    if variants:
        from quota_local.emulator.variants import resolve_variants

        # Checked once here, so a typo is a usage error; the stack resolves it again.
        resolve_variants(variants)
        options["variants"] = variants
    start = config.getoption("quota_start") or str(config.getini("quota_start") or "").strip()
    if start:
        options["start"] = _start(start)
    server = config.getoption("quota_server")
    if server is None:
        server = config.getini("quota_server")
    if server:
        options["server"] = True
    return options


def _from_rootdir(spec: str, rootdir: Path) -> str | Path:
    # A conformance file named in the ini file is relative to the ini file's folder, as pytest's
    # own paths are, not to wherever pytest happens to be run from.
    if spec.endswith(".json") and not os.path.isabs(spec):
        return rootdir / spec
    return spec


def _start(value: Any) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif str(value).strip().lower() == "now":
        moment = datetime.now(UTC)
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise ValueError(
                f"start {value!r} is not an ISO 8601 time such as 2026-03-16T19:00:00Z, nor 'now'"
            ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _checked(options: dict[str, Any], stack_class: type) -> dict[str, Any]:
    """The options as LocalStack takes them; an unknown name is an error naming the known."""
    known = [
        name
        for name, p in inspect.signature(stack_class).parameters.items()
        if p.kind is p.KEYWORD_ONLY
    ]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(
            f"unknown option {', '.join(unknown)}; LocalStack takes: {', '.join(known)}"
        )
    if options.get("start") is not None:
        options["start"] = _start(options["start"])
    return options


def _spec_id(spec: Any) -> str:
    if isinstance(spec, Mapping):
        return ",".join(f"{name}={value}" for name, value in spec.items()) or "default"
    if isinstance(spec, os.PathLike):
        return Path(spec).name
    return str(spec)
