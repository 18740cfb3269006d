"""The emulator's variants: names, values, profiles and conformance files, and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quota_local.emulator import PROFILES, VARIANTS, BatchQuotaEmulator, resolve_variants
from quota_local.emulator.core import TERSE_MESSAGE, EmulatorError, server_error
from quota_local.emulator.variants import load_conformance, parse_assignment

# Tests outside this repository select these names: they must not change.
# Variants whose documented reading is already the hardest on a client: the pessimistic profile
# keeps it, and the other value is there for services that behave more leniently.
DOCUMENTED_AND_HARDEST = {"client_token_reuse"}
PUBLIC_NAMES = {
    "preempted_attempts_order",
    "snapshot_lag_seconds",
    "stuck_reason_delivery",
    "read_after_write_lag_seconds",
    "describe_unknown_arn",
    "error_wording",
    "disabled_share_dispatch",
}


def test_the_public_names_exist_with_a_source_and_a_pessimistic_alternative() -> None:
    assert set(VARIANTS) >= PUBLIC_NAMES
    for variant in VARIANTS.values():
        assert variant.source, variant.name
        assert variant.check(variant.default) == variant.default
        if variant.name in DOCUMENTED_AND_HARDEST:
            assert variant.pessimistic == variant.default, variant.name
        else:
            assert variant.check(variant.pessimistic) != variant.default, variant.name


def test_the_documented_stuck_reason_delivery_is_the_default() -> None:
    assert VARIANTS["stuck_reason_delivery"].default == "queue_blocked_event"


def test_a_repeated_client_token_is_rejected_by_default_as_the_model_says() -> None:
    assert VARIANTS["client_token_reuse"].default == "rejected"
    assert PROFILES["pessimistic"]["client_token_reuse"] == "rejected"


def test_profiles_and_mappings_resolve_to_every_variant() -> None:
    assert resolve_variants(None) == dict(PROFILES["default"])
    assert resolve_variants("pessimistic")["describe_unknown_arn"] == "error"
    values = resolve_variants({"snapshot_lag_seconds": "30", "error_wording": "terse"})
    assert values["snapshot_lag_seconds"] == 30.0
    assert values["error_wording"] == "terse"
    assert values["describe_unknown_arn"] == "omit"
    assert resolve_variants("error_wording=terse, snapshot_lag_seconds=5") == (
        resolve_variants({"error_wording": "terse", "snapshot_lag_seconds": 5})
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"no_such": "x"}, "unknown variant 'no_such'; the variants are: preempted_attempts_order"),
        ({"describe_unknown_arn": "maybe"}, "variant describe_unknown_arn: 'maybe' is not allowed;"
         " it takes omit | error"),
        ({"snapshot_lag_seconds": -1}, "it takes a number of seconds >= 0"),
        ({"snapshot_lag_seconds": True}, "it takes a number of seconds >= 0"),
        ("optimistic", "neither a profile (default, pessimistic)"),
        ("error_wording=terse,error_wording=emulator", "given twice"),
    ],
)  # fmt: skip
def test_unknown_names_and_values_are_refused_with_what_is_allowed(
    spec: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_variants(spec)  # type: ignore[arg-type]


def test_assignments_as_the_cli_takes_them() -> None:
    assert parse_assignment("error_wording=terse") == ("error_wording", "terse")
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        parse_assignment("error_wording")


def test_a_conformance_file_sets_what_it_probed(tmp_path: Path) -> None:
    path = tmp_path / "conformance.json"
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "variants": {
                    "describe_unknown_arn": {"value": "error", "evidence": {"message": "x"}}
                },
            }
        )
    )
    assert load_conformance(path)["describe_unknown_arn"] == "error"
    assert resolve_variants(path)["error_wording"] == "emulator"
    assert resolve_variants(str(path))["describe_unknown_arn"] == "error"
    path.write_text(json.dumps({"format": 1, "variants": {"describe_unknown_arn": {"value": 1}}}))
    with pytest.raises(ValueError, match=r"conformance file .*describe_unknown_arn: 1"):
        load_conformance(path)
    path.write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        load_conformance(path)
    with pytest.raises(ValueError, match=r"conformance file .*missing\.json"):
        load_conformance(tmp_path / "missing.json")


def test_an_emulator_takes_its_own_variants_or_the_shared_ones() -> None:
    own = BatchQuotaEmulator("123456789012", "us-east-1", variants={"error_wording": "terse"})
    shared = BatchQuotaEmulator("123456789012", "us-east-1")
    assert own.variant("error_wording") == "terse"
    assert shared.variant("error_wording") == "emulator"


def _quota_stack(emu: BatchQuotaEmulator) -> str:
    policy = emu.create_scheduling_policy(
        {"name": "p", "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}
    )["arn"]
    emu.create_service_environment(
        {
            "serviceEnvironmentName": "env",
            "serviceEnvironmentType": "SAGEMAKER_TRAINING",
            "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}],
        }
    )
    emu.create_job_queue(
        {
            "jobQueueName": "q",
            "jobQueueType": "SAGEMAKER_TRAINING",
            "priority": 1,
            "schedulingPolicyArn": policy,
            "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "env"}],
        }
    )
    return str(policy)


@pytest.mark.parametrize("value", ["omit", "error"])
def test_describe_unknown_arn_omits_or_refuses_what_does_not_exist(value: str) -> None:
    emu = BatchQuotaEmulator("123456789012", "us-east-1", variants={"describe_unknown_arn": value})
    policy = _quota_stack(emu)
    missing = emu.arn("scheduling-policy/nope")
    reads = [
        (emu.describe_scheduling_policies, {"arns": [policy, missing]}, "schedulingPolicies"),
        (
            emu.describe_service_environments,
            {"serviceEnvironments": ["env", "nope"]},
            "serviceEnvironments",
        ),
        (emu.describe_job_queues, {"jobQueues": ["q", emu.arn("job-queue/nope")]}, "jobQueues"),
    ]
    for read, request, key in reads:
        if value == "omit":
            assert len(read(request)[key]) == 1
        else:
            with pytest.raises(EmulatorError, match="does not exist") as caught:
                read(request)
            assert caught.value.code == "ClientException"
        # What exists is always described.
        first = {k: v[:1] for k, v in request.items()}
        assert len(read(first)[key]) == 1


def test_error_wording_terse_replaces_every_client_exception_message() -> None:
    emu = BatchQuotaEmulator("123456789012", "us-east-1", variants={"error_wording": "terse"})
    policy = _quota_stack(emu)
    refused = [
        lambda: emu.create_scheduling_policy(  # already exists
            {"name": "p", "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}
        ),
        lambda: emu.describe_quota_share({"quotaShareArn": emu.arn("job-queue/q/quota-share/x")}),
        lambda: emu.delete_scheduling_policy({"arn": policy}),  # still used by the queue
        lambda: emu.create_quota_share({"quotaShareName": "s"}),  # fails the model check
        lambda: emu.handle("NoSuchOperation", {}),
    ]
    for request in refused:
        with pytest.raises(EmulatorError) as caught:
            request()
        assert (caught.value.code, caught.value.message) == ("ClientException", TERSE_MESSAGE)
    emu.inject(server_error("DescribeJobQueues"))
    with pytest.raises(EmulatorError) as caught:
        emu.describe_job_queues({})
    assert caught.value.code == "ServerException"
    assert caught.value.message != TERSE_MESSAGE  # only ClientException texts are replaced
