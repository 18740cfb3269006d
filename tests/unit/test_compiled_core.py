"""The compiled scheduler core (mypyc, `QUOTA_COMPILE_CORE=1` at install; setup.py) decides
exactly what its Python source decides.

The source of the core's modules is loaded a second time under other module names (pure
Python, always), and random scheduling scenarios and simulations run through both it and the
installed `quota_local` modules: every transition, stuck reason and simulator figure must be
identical, down to int versus float. When the installed core is compiled (`make venv` builds
it), this compares the two builds. When it is not (an install without the variable, or a
failed compile), both sides run the same source: the tests then check that the installed
package really is the Python source (every core module imported from its `.py` file, and
`quotactl --version`'s core "pure"), which is the fallback a pure install relies on, besides
checking the comparison harness itself. The stale-build guard is checked on copies of the
sources either way.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import json
import multiprocessing
import os
import pickle
import random
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from builders import DocBuilder
from scheduling_scenarios import overloaded_scenario, random_scenario

import quota_local
from quota_controller.domain.config import QuotaDocument, validate_document
from quota_local import compiled_core, ledger, scheduling, simulate, simulation_results, workload

# The compiled modules, in import order (setup.py's CORE).
CORE = ("ledger", "scheduling", "simulation_results", "workload", "simulate")
INSTALLED = {
    "ledger": ledger,
    "scheduling": scheduling,
    "simulation_results": simulation_results,
    "workload": workload,
    "simulate": simulate,
}
PACKAGE = Path(quota_local.__file__).parent


def _load_sources() -> dict[str, ModuleType]:
    """The core's Python sources as modules of their own (`_source_core_<name>`), importing each
    other, whatever the installed `quota_local` modules are."""
    loaded: dict[str, ModuleType] = {}
    try:
        for name in CORE:
            spec = importlib.util.spec_from_file_location(
                f"_source_core_{name}", PACKAGE / f"{name}.py"
            )
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses look their module up
            # What the next modules' `from quota_local.<name> import ...` bind to.
            sys.modules[f"quota_local.{name}"] = module
            spec.loader.exec_module(module)
            loaded[name] = module
    finally:
        for name, module in INSTALLED.items():
            sys.modules[f"quota_local.{name}"] = module
    return loaded


SOURCE = _load_sources()


def _plain(value: Any) -> Any:
    """A value as plain data that keeps what a user could see differ: int versus float, an
    enum's value, every dataclass field."""
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, QuotaDocument):
        return value.model_dump(mode="json")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return ("int", value)
    raise TypeError(f"unexpected {type(value).__name__} in a result")


def _translate(value: Any, core: ModuleType) -> Any:
    """A scenario's JobSpec or PoolConfig as `core`'s own class (a compiled core takes only its
    own; the source would take either)."""
    if isinstance(value, (scheduling.JobSpec, scheduling.ShareConfig, scheduling.PoolConfig)):
        cls = getattr(core, type(value).__name__)
        return cls(
            **{f.name: _translate(getattr(value, f.name), core) for f in dataclasses.fields(value)}
        )
    if isinstance(value, tuple):
        return tuple(_translate(v, core) for v in value)
    return value


def _replay(core: ModuleType, scenario: Any) -> Any:
    config, ops, flags = scenario
    scheduler = core.QuotaScheduler(_translate(config, core), core.Phases(), **flags)
    log: list[Any] = []
    for op, t, arg in ops:
        log += scheduler.advance(t)
        if op == "submit":
            log.append(("reason", scheduler.submit(_translate(arg, core), t)))
        elif op == "configure":
            scheduler.configure(_translate(arg, core), t)
        elif op == "priority":
            scheduler.set_priority(*arg, t)
        else:
            scheduler.set_status(*arg, t)
    log += scheduler.run(until=1e7)
    states = {job_id: scheduler.job(job_id) for job_id in sorted(scheduler.runnable_ids())}
    return _plain([log, states, scheduler.usage(), scheduler.borrowed()])


def _document(seed: int) -> QuotaDocument:
    rng = random.Random(seed)
    units = ["ml.g5.xlarge", "ml.p4d.24xlarge"][: rng.randint(1, 2)]
    builder = DocBuilder("q").env(**{u: rng.randint(4, 40) for u in units})
    for n in range(rng.randint(2, 20)):
        strategy = rng.choice(["RESERVE", "LEND", "LEND_AND_BORROW"])
        borrow = rng.choice([None, 0, 50, 200]) if strategy == "LEND_AND_BORROW" else None
        builder.share(f"team-{n}", strategy, borrow, **{u: rng.randint(1, 3) for u in units})
        if rng.random() < 0.3:
            builder.raw["quotaShares"][-1]["preemptionConfiguration"] = {
                "inSharePreemption": "ENABLED"
            }
    document = validate_document(builder.build()).document
    assert document is not None
    return document


def _simulation(core: ModuleType, workload_of: ModuleType, seed: int) -> Any:
    document = _document(seed)
    rng = random.Random(seed)
    jobs = workload_of.generate_workload(
        document, rng.choice([200, 1500]), seed=seed, horizon_s=rng.choice([600.0, 6000.0])
    )
    return _plain(core.simulate(document, jobs, timeline=seed % 2 == 0))


WINDOW_START = datetime(2026, 12, 7, tzinfo=UTC)


def _windowed(seed: int) -> dict[str, Any]:
    """A random document whose quota windows lower and raise shares' limits during the run."""
    document = _document(seed)
    rng = random.Random(seed)
    raw = document.model_dump(mode="json", by_alias=True, exclude_none=True)
    windows = []
    end = WINDOW_START + timedelta(seconds=rng.randrange(0, 1200, 60))
    for n in range(rng.randint(1, 3)):  # one after the other: windows may not overlap on a share
        start = end + timedelta(seconds=rng.randrange(60, 600, 60))
        end = start + timedelta(seconds=rng.randrange(300, 1500, 60))
        shares = rng.sample(raw["quotaShares"], min(len(raw["quotaShares"]), 2))
        windows.append(
            {
                "name": f"window-{n}",
                "from": start.isoformat(),
                "until": end.isoformat(),
                "quotaShares": [
                    {
                        "quotaShareName": share["quotaShareName"],
                        "capacityLimits": [
                            {
                                "capacityUnit": limit["capacityUnit"],
                                "maxCapacity": rng.randint(1, 4),
                            }
                            for limit in share["capacityLimits"]
                        ],
                    }
                    for share in shares
                ],
            }
        )
    raw["windows"] = windows
    return raw


def _windowed_simulation(core: ModuleType, workload_of: ModuleType, seed: int) -> Any:
    """A simulation through quota windows, with other phases, of a workload read back from the
    CSV it was written as."""
    raw = _windowed(seed)
    checked = validate_document(raw, WINDOW_START)
    assert checked.document is not None, checked
    rng = random.Random(seed)
    generated = workload_of.generate_workload(
        checked.document, rng.choice([100, 600]), seed=seed, horizon_s=3600.0
    )
    jobs = workload_of.read_workload(workload_of.write_workload(generated))
    windows = core.windowed_layout(raw, WINDOW_START, jobs)
    assert windows is not None
    phases = core.Phases(rng.choice([0.0, 2.5, 30.0]), rng.choice([0.0, 7.5, 60.0]))
    result = core.simulate(checked.document, jobs, phases=phases, timeline=True, windows=windows)
    return _plain([jobs, windows, result])


@pytest.mark.parametrize("seed", range(40))
def test_random_scenarios_decide_the_same_compiled_and_from_source(seed: int) -> None:
    scenario = random_scenario(seed)
    assert _replay(scheduling, scenario) == _replay(SOURCE["scheduling"], scenario)


@pytest.mark.parametrize("seed", range(3))
def test_overloaded_scenarios_decide_the_same_compiled_and_from_source(seed: int) -> None:
    scenario = overloaded_scenario(seed)
    assert _replay(scheduling, scenario) == _replay(SOURCE["scheduling"], scenario)


@pytest.mark.parametrize("seed", range(12))
def test_simulations_report_the_same_compiled_and_from_source(seed: int) -> None:
    installed = _simulation(simulate, workload, seed)
    assert installed == _simulation(SOURCE["simulate"], SOURCE["workload"], seed)
    assert installed["shares"], "the simulation reported on its shares"


@pytest.mark.parametrize("seed", range(8))
def test_windowed_simulations_report_the_same_compiled_and_from_source(seed: int) -> None:
    installed = _windowed_simulation(simulate, workload, seed)
    assert installed == _windowed_simulation(SOURCE["simulate"], SOURCE["workload"], seed)
    _, windows, result = installed
    assert windows["edges"], "the run went through quota windows"
    assert result["edges"], "the simulation passed an edge"


def _instances(core: dict[str, ModuleType]) -> list[Any]:
    """One of every public class of a core (`core`: its modules by name)."""
    sched, work, results = core["scheduling"], core["workload"], core["simulation_results"]
    share = sched.ShareConfig("a", {"u": 2}, sched.LEND_AND_BORROW, 50, True, False, {"R": 60.0})
    raw = _windowed(1)
    jobs = [work.WorkloadJob(0.0, "team-0", "ml.g5.xlarge", 1, 60.0, 3, "x", 2, "median")]
    report = results.ShareReport("a")
    report.waits.append(1.5)
    return [
        sched.Phases(2.5, 7.5),
        share,
        sched.PoolConfig({"u": 4}, (share,)),
        sched.JobSpec("j", "a", "u", 2, 60.0, 1, 3, 4, (("v", 1),)),
        sched.JobState("RUNNING", None, 1, 5.0, 2, True),
        sched.Transition("j", sched.Kind.PREEMPT, 1.0, "RUNNING", "RUNNABLE", "r", "k"),
        jobs[0],
        core["ledger"].ShareTime(),
        report,
        core["simulate"].windowed_layout(raw, WINDOW_START, jobs),
        core["simulate"].simulate(validate_document(raw, WINDOW_START).document, jobs),
    ]


@pytest.mark.parametrize("core", ["installed", "source"])
def test_every_public_class_copies_and_pickles(core: str) -> None:
    # A compiled frozen dataclass refuses the field-by-field copy that pickle and copy do.
    for value in _instances(INSTALLED if core == "installed" else SOURCE):
        for twin in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
            assert type(twin) is type(value)
            assert twin == value
            assert _plain(twin) == _plain(value)


def test_a_simulation_runs_in_another_process() -> None:
    # What a caller does to run simulations in parallel: the arguments and the result pickle.
    document = _document(3)
    jobs = workload.generate_workload(document, 300, seed=3, horizon_s=600.0)
    with ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        remote = pool.submit(simulate.simulate, document, jobs).result(timeout=120)
    assert _plain(remote) == _plain(simulate.simulate(document, jobs))


def _built_with_documented_types(core: dict[str, ModuleType]) -> Any:
    """Each public constructor and the scheduler's methods called with the types docs/emulator.md
    ("Scheduler") says they take, and what comes of it."""
    sched, work = core["scheduling"], core["workload"]
    share = sched.ShareConfig("a", {"u": 2}, sched.LEND_AND_BORROW, 1, False, True, {"R": 30.0}, "")
    other = sched.ShareConfig("b", {"u": 1}, sched.LEND)
    pool = sched.PoolConfig({"u": 3}, (share, other))
    phases = sched.Phases(2.0, 3.0)
    spec = sched.JobSpec("j", "a", "u", 2, 60.0, 1, None, None, ())
    row = work.WorkloadJob(0.0, "a", "u", 2, 60.0, 0, "", None, "")
    scheduler = sched.QuotaScheduler(pool, phases)
    reason = scheduler.submit(spec, 0.0)
    scheduler.submit(sched.JobSpec("k", "b", "u", 3, 10.0, 0, 2, 1, (("v", 1),)), 1.0)
    log = [*scheduler.advance(2.5), *scheduler.run(1e6)]
    return _plain([share, pool, phases, spec, row, reason, log, scheduler.usage()])


def test_the_documented_argument_types_build_the_same_on_both_cores() -> None:
    assert _built_with_documented_types(INSTALLED) == _built_with_documented_types(SOURCE)


def test_what_the_docs_say_a_compiled_core_refuses_it_refuses() -> None:
    sched, work = scheduling, workload
    wrong = {
        "JobSpec(count=2.0)": lambda: sched.JobSpec("j", "a", "u", 2.0),
        "JobSpec(extra_units=[])": lambda: sched.JobSpec("j", "a", "u", 1, extra_units=[]),
        "WorkloadJob(share=None)": lambda: work.WorkloadJob(0.0, None, "u", 1, 1.0),
        "ShareConfig(borrow_limit=50.0)": lambda: sched.ShareConfig("a", {}, borrow_limit=50.0),
        "PoolConfig(shares=[...])": lambda: sched.PoolConfig({}, [sched.ShareConfig("a", {})]),
        "run(None)": lambda: sched.QuotaScheduler(sched.PoolConfig({}), sched.Phases()).run(None),
    }
    refused = []
    for name, build in wrong.items():
        try:
            build()
        except TypeError:
            refused.append(name)
    # The Python source takes them all (which is why the docs name them).
    assert refused == (list(wrong) if compiled_core.compiled() else [])


def test_the_installed_core_is_what_version_says_and_pure_is_the_source() -> None:
    files = {name: Path(module.__file__ or "") for name, module in INSTALLED.items()}
    if compiled_core.compiled():
        assert compiled_core.describe() == "compiled"
        assert all(path.suffix != ".py" for path in files.values()), files
        assert not compiled_core.stale_modules()
    else:
        # The fallback: every core module runs from its source in the package.
        assert compiled_core.describe() == "pure"
        assert files == {name: PACKAGE / f"{name}.py" for name in CORE}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# A module of the domain the compiled simulator builds in types of.
COMPILED_AGAINST = "quota_controller/domain/config/model.py"


def _copy_sources(tmp_path: Path) -> Path:
    """The core's sources in a folder of their own, with the record of a build of them."""
    for name in CORE:
        shutil.copy(PACKAGE / f"{name}.py", tmp_path / f"{name}.py")
    sources = {f"quota_local/{name}.py": _digest(tmp_path / f"{name}.py") for name in CORE}
    sources[COMPILED_AGAINST] = _digest(CHECKOUT / "layers/core" / COMPILED_AGAINST)
    record = {"modules": list(CORE), "sources": sources}
    (tmp_path / compiled_core.MANIFEST.name).write_text(json.dumps(record))
    return tmp_path


CHECKOUT = PACKAGE.parent.parent  # an editable install's (make venv)


def test_a_build_of_the_sources_as_they_are_is_not_stale(tmp_path: Path) -> None:
    assert compiled_core.stale_modules(_copy_sources(tmp_path)) == []


def test_an_edited_source_makes_the_whole_build_stale(tmp_path: Path) -> None:
    package = _copy_sources(tmp_path)
    with (package / "ledger.py").open("a") as source:
        source.write("# edited\n")
    assert compiled_core.stale_modules(package) == list(CORE)


def test_a_changed_module_it_was_compiled_against_makes_the_build_stale(tmp_path: Path) -> None:
    # The domain's config model as it was when the core was compiled differs from the one now.
    package = _copy_sources(tmp_path)
    manifest = package / compiled_core.MANIFEST.name
    record = json.loads(manifest.read_text())
    record["sources"][COMPILED_AGAINST] = "0" * 64
    manifest.write_text(json.dumps(record))
    assert compiled_core.stale_modules(package) == list(CORE)


def test_a_record_that_does_not_say_what_it_was_compiled_against_is_stale(tmp_path: Path) -> None:
    package = _copy_sources(tmp_path)
    digests = {name: _digest(package / f"{name}.py") for name in CORE}
    (package / compiled_core.MANIFEST.name).write_text(json.dumps(digests))
    assert compiled_core.stale_modules(package) == list(CORE)


def test_what_the_core_is_compiled_against_is_found_from_its_imports() -> None:
    found = compiled_core.compiled_against(CHECKOUT)
    assert {f"quota_local/{name}.py" for name in CORE} <= set(found)
    config = "quota_controller/domain/config"
    assert {f"{config}/model.py", f"{config}/timeline.py", f"{config}/validation.py"} <= set(found)
    assert f"{config}/__init__.py" in found, "the packages on the way are read too"
    assert not [f for f in found if "/adapters/" in f or f.startswith("quotactl/")], found
    if compiled_core.compiled():
        record = json.loads(compiled_core.MANIFEST.read_text())
        assert sorted(record["sources"]) == found
        assert record["sources"][COMPILED_AGAINST] == _digest(
            CHECKOUT / "layers/core" / COMPILED_AGAINST
        )


def _run(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_a_stale_build_is_not_imported(tmp_path: Path) -> None:
    # The installed package, compiled modules (if any) included, with a record of a build from
    # other sources: its sources are imported, not the build.
    package = tmp_path / "quota_local"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("deployment", "__pycache__"))
    record = {
        "modules": list(CORE),
        "sources": {f"quota_local/{name}.py": "0" * 64 for name in CORE},
    }
    (package / compiled_core.MANIFEST.name).write_text(json.dumps(record))
    script = (
        "import quota_local.simulate, quota_local.compiled_core as core\n"
        "print(quota_local.simulate.__file__, core.describe())"
    )
    done = _run(script, tmp_path, {"PYTHONPATH": str(tmp_path)})
    assert done.stdout.split() == [str(package / "simulate.py"), "pure"]
    assert done.stderr == ""


def test_quota_pure_core_runs_the_sources_whatever_is_installed() -> None:
    script = (
        "import quota_local, quota_local.scheduling as s, quota_local.simulate as m\n"
        "from quota_local.compiled_core import describe\n"
        "print(s.__file__, m.__file__, describe())"
    )
    done = _run(script, CHECKOUT, {"QUOTA_PURE_CORE": "1"})
    assert done.stdout.split() == [
        str(PACKAGE / "scheduling.py"),
        str(PACKAGE / "simulate.py"),
        "pure",
    ]
    version = subprocess.run(
        [Path(sys.executable).parent / "quotactl", "--version"],
        env={**os.environ, "QUOTA_PURE_CORE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert version.stdout.strip().endswith("(scheduler core: pure)")


def test_without_a_build_nothing_is_stale(tmp_path: Path) -> None:
    package = _copy_sources(tmp_path)
    (package / compiled_core.MANIFEST.name).unlink()
    assert compiled_core.stale_modules(package) == []


def _make_venv(venv: Path, record: Path) -> subprocess.CompletedProcess[str]:
    """`make venv` on a virtualenv folder whose stamps say installed and compile attempted."""
    venv.mkdir(exist_ok=True)
    for stamp in (".installed", ".core-compiled"):
        (venv / stamp).touch()
    return subprocess.run(
        ["make", "--no-print-directory", "-s", "venv", f"VENV={venv}", f"CORE_RECORD={record}"],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_make_venv_says_at_every_run_that_the_core_did_not_compile(tmp_path: Path) -> None:
    # The compile was attempted and failed (no record of a build): make does not compile again
    # by itself, but says so each time.
    for _ in range(2):
        done = _make_venv(tmp_path / "venv", tmp_path / "missing.json")
        assert done.stdout == ""
        assert done.stderr.startswith("WARNING: the scheduler core did not compile")
        assert f"rm {tmp_path / 'venv'}/.core-compiled && make venv" in done.stderr
    record = tmp_path / "compiled_core.json"
    record.write_text('{"modules": [], "sources": {}}')
    assert _make_venv(tmp_path / "venv", record).stderr == ""
