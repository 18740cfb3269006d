# The commands the README names. Each sets up what it needs by itself.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The scheduler core and the simulator, compiled with mypyc in place (setup.py compiles these
# modules; docs/local.md, "What-if simulation"). When the compile cannot run (no C compiler, no
# Python headers), setup.py warns and the sources run: `quotactl --version` says which core runs.
# A build is rebuilt when setup.py, a core source, or a project module it was compiled against
# changes: its record (CORE_RECORD) lists those, derived from the imports at build time.
CORE_RECORD := local/quota_local/compiled_core.json
CORE_SOURCES := setup.py $(addprefix local/quota_local/,scheduling.py ledger.py simulate.py \
	workload.py simulation_results.py) \
	$(foreach f,$(shell grep -o '"[a-z_]*/[^"]*\.py"' $(CORE_RECORD) 2>/dev/null | tr -d '"'), \
	  $(wildcard layers/core/$(f) cli/$(f) local/$(f)))
CORE_STAMP := $(VENV)/.core-compiled

# SAM CLI lives in its own virtualenv: its pins (pydantic, boto3) differ from the project's.
SAM_CLI_VERSION := 1.170.0
SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam
SAM_STAMP := $(SAM_VENV)/.installed-$(SAM_CLI_VERSION)
# Everything here runs offline: fake credentials, a Region, no instance metadata, no telemetry.
OFFLINE := -u AWS_PROFILE -u AWS_SESSION_TOKEN AWS_ACCESS_KEY_ID=offline \
	AWS_SECRET_ACCESS_KEY=offline AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 \
	AWS_EC2_METADATA_DISABLED=true SAM_CLI_TELEMETRY=0
BUILD := .aws-sam/build
BUILT := $(BUILD)/.precompiled
# The layer's compiled wheels (pydantic_core, msgspec, PyYAML, wrapt) for this machine, same
# versions as the arm64 ones in the build: the import test and the cold-start bench load them
# instead.
HOST_NATIVE := .aws-sam/host-native
HOST_STAMP := $(HOST_NATIVE)/.installed
BUILD_SOURCES := template.yaml samconfig.toml $(shell find layers/core functions -type f -not -path '*/__pycache__/*' 2>/dev/null)

.PHONY: demo test lint typecheck unit bench venv core clean instance-types template-check build sam-venv \
	package-check soak browser variants

demo: $(STAMP)
	$(VENV)/bin/quotactl demo

test: $(STAMP) core lint typecheck template-check package-check browser
	$(PY) -m pytest -q -n auto --dist loadfile

# Headless Chromium renders the HTML report in tests/integration/test_report_browser.py. As
# root with apt-get (CI runs as root on Debian) Debian's package is installed when missing;
# anywhere else a missing one stops make test here, saying what to install.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "make test needs Chromium (chromium or chromium-browser on PATH) for the HTML" \
	      "report's browser test: install it (Debian/Ubuntu: sudo apt-get install chromium;" \
	      "Fedora: sudo dnf install chromium; macOS: brew install --cask chromium) and run" \
	      "make test again" >&2; \
	    exit 1; \
	  fi

# ruff, and the import contract (pyproject.toml [tool.importlinter], docs/ARCHITECTURE.md).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The template as written and as SAM deploys it (tests/contract/test_template_security.py lints
# both with the pinned cfn-lint and checks the IAM; `sam validate --lint` lints it with SAM's),
# and a build for python3.13/arm64.
template-check: $(STAMP) $(SAM_STAMP) build
	env $(OFFLINE) $(SAM) validate
	env $(OFFLINE) $(SAM) validate --lint

# The wheel as a user gets it: built (sdist, then the wheel from it), installed with [local] into
# a fresh virtualenv outside the checkout, and used from an empty directory there: quotactl
# --version, validate, demo --json, and docs/local.md's pytest file on the plugin's fixture.
package-check: $(STAMP)
	env $(OFFLINE) scripts/package-check $(PY)

# The random edit sequences of tests/property/test_sequences.py, many more than `make test` plays
# (under the default emulator and the variants tests/variant_matrix.py names). SOAK_MOVES picks
# or drops move kinds ("-rename,-invalid"); docs/reliability.md, "Random edit sequences".
SOAK_EXAMPLES ?= 200
SOAK_SEED ?= 1
SOAK_MOVES ?=
soak: $(STAMP)
	QUOTA_SOAK_EXAMPLES=$(SOAK_EXAMPLES) QUOTA_SOAK_SEED=$(SOAK_SEED) QUOTA_SOAK_MOVES='$(SOAK_MOVES)' \
	  QUOTA_SOAK_SHRINK=300 $(PY) -m pytest -q tests/property/test_sequences.py -k random_edit

# The end-to-end suites whole under the pessimistic profile (every behaviour AWS leaves open at
# its hardest for a client); `make test` runs the scenarios tests/variant_matrix.py picks.
E2E := tests/faults tests/integration/test_reconcile_flow.py tests/integration/test_reconcile_safety.py \
	tests/integration/test_alerts_flow.py tests/integration/test_alert_safety.py \
	tests/integration/test_alerts_true.py tests/integration/test_guard_coverage.py \
	tests/integration/test_ownership.py tests/integration/test_demo.py \
	tests/integration/test_quotactl_operate.py tests/integration/test_quotactl_local.py \
	tests/integration/test_reconcile_variants.py tests/integration/test_history_flow.py
variants: $(STAMP)
	QUOTA_LOCAL_VARIANTS=$(or $(PROFILE),pessimistic) QUOTA_TEST_MATRIX=0 \
	  $(PY) -m pytest -q -n auto --dist loadfile $(E2E)

bench: $(STAMP) core build
	$(PY) -m bench

venv: $(STAMP) core

sam-venv: $(SAM_STAMP)

# sam build (the layer's wheels for arm64 come from PyPI; no AWS account, no Docker), then
# precompile: Lambda's /opt and /var/task are read-only, so without shipped bytecode every cold
# start compiles boto3 and the rest again. unchecked-hash because sam's zips reset file times.
build: $(BUILT) $(HOST_STAMP)

$(BUILT): $(SAM_STAMP) $(STAMP) $(BUILD_SOURCES)
	@py=$$(scripts/find-python313) || exit 1; \
	env $(OFFLINE) PATH="$$(dirname "$$py"):$$PATH" $(SAM) build --build-dir $(BUILD)
	$(PY) -m compileall -q -j 0 --invalidation-mode unchecked-hash $(BUILD)
	@touch $@

$(HOST_STAMP): $(BUILT)
	rm -rf $(HOST_NATIVE) && mkdir -p $(HOST_NATIVE)
	$(PY) -c 'import pathlib, sys; print("\n".join(d.name.removesuffix(".dist-info").replace("-", "==", 1) for d in sorted(pathlib.Path(sys.argv[1]).glob("*.dist-info")) if ".so," in (d / "RECORD").read_text()))' \
	  $(BUILD)/CoreLayer/python > $(HOST_NATIVE)/requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
	  --target $(HOST_NATIVE) -r $(HOST_NATIVE)/requirements.txt
	@touch $@

# (Re)build the virtualenv when the project's requirements change.
$(STAMP): pyproject.toml constraints.txt scripts/find-python313
	@py=$$(scripts/find-python313) || exit 1; \
	if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then \
	  rm -rf $(VENV); "$$py" -m venv $(VENV); fi
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

# Editable like the rest; --no-build-isolation: the build needs the venv's mypy (mypyc). The
# stamp marks the attempt, compiled or not: a machine without a C compiler does not spend a
# minute on it at every make. `core` says so at every make while the core runs as Python.
$(CORE_STAMP): $(STAMP) $(CORE_SOURCES)
	QUOTA_COMPILE_CORE=1 $(PY) -m pip install --quiet --disable-pip-version-check --no-deps \
	  --no-build-isolation -e .
	@$(VENV)/bin/quotactl --version
	@touch $@

core: $(CORE_STAMP)
	@[ -f $(CORE_RECORD) ] || echo "WARNING: the scheduler core did not compile and runs as" \
	  "Python; why: QUOTA_COMPILE_CORE=1 $(PY) -m pip install -v --no-deps --no-build-isolation" \
	  "-e . ; to try again: rm $(CORE_STAMP) && make venv" >&2

$(SAM_STAMP): scripts/find-python313
	@py=$$(scripts/find-python313) || exit 1; rm -rf $(SAM_VENV) && "$$py" -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check aws-sam-cli==$(SAM_CLI_VERSION)
	@touch $@

# Regenerates the SageMaker Training instance-type list from the installed botocore model.
instance-types: $(STAMP)
	$(PY) scripts/gen_instance_types.py > layers/core/quota_controller/domain/instance_types.py
	$(VENV)/bin/ruff format layers/core/quota_controller/domain/instance_types.py

clean:
	rm -rf $(VENV) $(SAM_VENV) .mypy_cache .ruff_cache .pytest_cache .aws-sam build
	rm -f local/quota_local/*.so local/quota_local/compiled_core.json
