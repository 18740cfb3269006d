"""Each EventBridge rule of template.yaml against the sample events it must and must not match,
and every alert sample parses (or is refused) as the alert function will see it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from moto.events.models import EventPattern
from pydantic import ValidationError

from quota_controller.domain.alerts.events import BatchEvent
from quota_local.template import load_template, parameter_defaults, resolve, stack_shape

EVENTS = Path(__file__).resolve().parents[2] / "events" / "alert"
ALL = sorted(p.name for p in EVENTS.glob("*.json"))


def sample(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def patterns(prefix: str = "*") -> dict[str, EventPattern]:
    template = load_template()
    refs = {
        **parameter_defaults(template),
        "ManagedNamePrefix": prefix,
        "AWS::Partition": "aws",
        "AWS::Region": "us-east-1",
        "AWS::AccountId": "123456789012",
    }
    conditions = {"ManagesAnyQueue": prefix == "*"}
    return {
        name: EventPattern.load(json.dumps(resolve(p, refs, conditions)))
        for name, p in stack_shape(template).alert_rules.items()
    }


# sample -> the rules that must match it (every other rule must not)
EXPECTED = {
    "preemption-started.json": {"PreemptionEventsRule"},
    "preemption-completed.json": {"PreemptionEventsRule"},
    "preemption-completed-failed.json": {"PreemptionEventsRule"},
    "preemption-completed-seconds-unknown-fields.json": {"PreemptionEventsRule"},
    "malformed-preemption-without-job.json": {"PreemptionEventsRule"},
    "state-change-preempted-runnable.json": {"PreemptedJobsRule"},
    "state-change-preempted-failed.json": {"PreemptedJobsRule"},
    "state-change-cancelled-after-preemption.json": {"PreemptedJobsRule"},
    "state-change-foreign-queue.json": {"PreemptedJobsRule"},
    "state-change-stuck.json": {"StuckJobsRule"},
    "queue-blocked-stuck.json": {"StuckJobsRule"},
    "queue-blocked-capacity.json": {"StuckJobsRule"},
    "queue-blocked-other-reason.json": set(),  # the documented example's placeholder reason
    "state-change-succeeded.json": set(),
    "state-change-runnable-not-preempted.json": set(),
}


def test_every_sample_has_an_expectation() -> None:
    assert sorted(EXPECTED) == ALL


@pytest.mark.parametrize("name", ALL)
def test_rules_match_exactly_the_expected_samples(name: str) -> None:
    matched = {rule for rule, p in patterns().items() if p.matches_event(sample(name))}
    assert matched == EXPECTED[name]


def test_a_name_prefix_narrows_the_state_change_rules_to_managed_queues() -> None:
    rules = patterns(prefix="ml-")
    assert rules["PreemptedJobsRule"].matches_event(sample("state-change-preempted-runnable.json"))
    assert not rules["PreemptedJobsRule"].matches_event(sample("state-change-foreign-queue.json"))
    # Preemption events carry no queue: the function filters them.
    assert rules["PreemptionEventsRule"].matches_event(sample("preemption-started.json"))


@pytest.mark.parametrize("name", [n for n in ALL if not n.startswith("malformed")])
def test_samples_parse_into_the_event_model(name: str) -> None:
    event = BatchEvent.model_validate(sample(name))
    assert event.job_id()


def test_the_malformed_sample_is_refused() -> None:
    event = BatchEvent.model_validate(sample("malformed-preemption-without-job.json"))
    with pytest.raises(ValidationError):
        event.job_id()


def test_timestamps_in_seconds_become_milliseconds() -> None:
    event = BatchEvent.model_validate(sample("preemption-completed-seconds-unknown-fields.json"))
    summary = event.preemption_detail().preemptionSummary
    assert summary is not None
    assert summary.recentPreemptedAttempts[0].startedAt == 1773690923000
