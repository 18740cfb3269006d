"""The pure core loads no AWS library: each module of quota_controller.domain, imported alone in
a fresh interpreter, leaves boto3, botocore and Powertools out of sys.modules (the import
contract in `make lint` checks the direct imports; this checks what importing really loads)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import quota_controller.domain

AWS_LIBRARIES = ("boto3", "botocore", "aws_lambda_powertools")
DOMAIN = sorted(
    m.name
    for m in pkgutil.walk_packages(quota_controller.domain.__path__, "quota_controller.domain.")
)

CHILD = """
import importlib, json, sys
importlib.import_module({module!r})
print(json.dumps(sorted(n for n in sys.modules if n.split(".")[0] in {libraries!r})))
"""


def test_the_domain_holds_the_modules_the_architecture_calls_pure() -> None:
    named = {"config", "planner", "impact", "alerts.classify", "desired", "status", "capacity"}
    assert {f"quota_controller.domain.{n}" for n in named} <= set(DOMAIN)


@pytest.mark.parametrize("module", DOMAIN)
def test_a_domain_module_loads_no_aws_library(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(module=module, libraries=AWS_LIBRARIES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [], f"importing {module} loads them"
