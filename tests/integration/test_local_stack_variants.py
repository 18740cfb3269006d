"""LocalStack takes the emulator's variants: given to it, or from $QUOTA_LOCAL_VARIANTS."""

from __future__ import annotations

from typing import Any

import pytest

from quota_local.stack import LocalStack


def visible_policies(stack: LocalStack) -> list[str]:
    listed = stack.batch.list_scheduling_policies()["schedulingPolicies"]
    return [p["arn"].rsplit("/", 1)[-1] for p in listed]


def test_variants_given_to_the_stack_reach_its_emulator() -> None:
    with LocalStack(run_jobs=False, variants={"read_after_write_lag_seconds": 5}) as stack:
        stack.batch.create_scheduling_policy(name="fresh")
        before = visible_policies(stack)
        stack.clock.advance(5)
        after = visible_policies(stack)
        value = stack.emulator.variant("read_after_write_lag_seconds")

    assert (before, after, value) == ([], ["fresh"], 5.0)


def test_the_stack_reads_the_environment_when_given_none(monkeypatch: Any) -> None:
    monkeypatch.setenv("QUOTA_LOCAL_VARIANTS", "read_after_write_lag_seconds=5")
    with LocalStack(run_jobs=False) as stack:
        stack.batch.create_scheduling_policy(name="fresh")
        from_env = visible_policies(stack)
    with LocalStack(run_jobs=False, variants="default") as stack:
        stack.batch.create_scheduling_policy(name="fresh")
        given = visible_policies(stack)

    assert (from_env, given) == ([], ["fresh"])


def test_a_bad_environment_value_fails_before_anything_starts(monkeypatch: Any) -> None:
    monkeypatch.setenv("QUOTA_LOCAL_VARIANTS", "snapshot_lag_seconds=soon")
    with pytest.raises(ValueError, match="snapshot_lag_seconds: 'soon' is not allowed"):
        LocalStack(run_jobs=False)
