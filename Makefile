# The commands the README names. Each sets up what it needs by itself.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench venv clean instance-types

demo: $(STAMP)
	$(VENV)/bin/quotactl demo

test: $(STAMP) lint typecheck
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m bench

venv: $(STAMP)

# (Re)build the virtualenv when the project's requirements change.
$(STAMP): pyproject.toml constraints.txt scripts/find-python313
	@py=$$(scripts/find-python313) || exit 1; \
	if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then \
	  rm -rf $(VENV); "$$py" -m venv $(VENV); fi
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

# Regenerates the SageMaker Training instance-type list from the installed botocore model.
instance-types: $(STAMP)
	$(PY) scripts/gen_instance_types.py > layers/core/quota_controller/instance_types.py
	$(VENV)/bin/ruff format layers/core/quota_controller/instance_types.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .aws-sam
