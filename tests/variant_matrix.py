"""Which end-to-end tests run again under which emulator variants (docs/reliability.md).

Every test named here runs under the default emulator and once more under each spec listed for
it: `pessimistic` (every alternative at once) or one `NAME=VALUE` alone, for the scenarios that
variant touches. The spec reaches every LocalStack the test starts through
$QUOTA_LOCAL_VARIANTS (tests/conftest.py). A file maps to specs for all its tests ("*") or for
tests whose names contain a key. Chosen so `make test` stays within a few minutes: a scenario
runs again only under the variants that can change its outcome (a variant alone where
`pessimistic`, every alternative at once, could mask it), and `make variants` runs the
end-to-end suites whole under `pessimistic`.
"""

from __future__ import annotations

import os

PESSIMISTIC = "pessimistic"
# `make soak` (QUOTA_SOAK_EXAMPLES set): the random sequences under every variant listed.
SOAK = bool(os.environ.get("QUOTA_SOAK_EXAMPLES"))

MATRIX: dict[str, dict[str, tuple[str, ...]]] = {
    # Convergence from nothing, one edit = one write, invalid config, removals.
    "integration/test_reconcile_flow.py": {
        "guide_layout_converges_from_an_empty_account": (
            PESSIMISTIC,
            "read_after_write_lag_seconds=5",
            "describe_unknown_arn=error",
        ),
        "one_share_edit_makes_exactly_one_update": (PESSIMISTIC, "read_after_write_lag_seconds=5"),
        "invalid_share_edit_changes_nothing": (PESSIMISTIC, "error_wording=terse"),
        "nothing_is_attached_before_it_is_valid": (PESSIMISTIC,),
    },
    # A conflict alerted once and warned by apply; a stuck job naming the type it lacks.
    "integration/test_quotactl_edges.py": {
        "one_conflict_said_everywhere": (PESSIMISTIC,),
        "environment_lacks_is_alerted": (PESSIMISTIC, "queued_capacity_usage=absent"),
    },
    # One alert per preemption with the right cause; the stuck-job alert.
    "integration/test_alerts_flow.py": {
        "reclaim_of_borrowed_capacity": (PESSIMISTIC, "snapshot_lag_seconds=60"),
        "quota_reduction_is_named": (
            PESSIMISTIC,
            "snapshot_lag_seconds=60",
            "preempted_attempts_order=newest_first",
        ),
        "redelivered_event_never_alerts_twice": ("preempted_attempts_order=newest_first",),
        "reduction_preempting_within_its_second": (PESSIMISTIC,),
        "job_the_layout_can_never_run": (PESSIMISTIC, "stuck_reason_delivery=state_change"),
        "failed_after_retries_is_critical": (PESSIMISTIC,),
    },
    # A preempted job ended by something else is not blamed on its preemption.
    "integration/test_alerts_true.py": {
        "ended_by_something_else": (PESSIMISTIC,),
        "retries_are_used_up": (PESSIMISTIC,),
    },
    # History from events that carry only the documented fields (RecordHistory describes).
    "integration/test_history_flow.py": {
        "events_become_one_record_per_job": ("event_detail_fields=documented_example",),
        "report_json_and_html": ("event_detail_fields=documented_example",),
        "backfill_adds_nothing_the_events_recorded": ("event_detail_fields=documented_example",),
    },
    # Not the demo: its story (apply, borrow, reclaim, reduce, an invalid edit) is the sum of
    # the scenarios above, each run under the variants that touch it, and it costs seconds of
    # CPU per play; `make variants` plays it under `pessimistic`.
    # Approvals once, environment safety.
    "integration/test_reconcile_safety.py": {
        "approval_left_on_the_queue": (PESSIMISTIC,),
        "removed_share_waiting_for_its_job": (PESSIMISTIC,),
        "second_queue_naming_the_first_queues_environment": (PESSIMISTIC,),
    },
    # Issue 14 items 1-5: every job a change can hurt is named first (environment renames
    # under both environment_reduction_preempts values: pessimistic has yes).
    "integration/test_guard_coverage.py": {
        "*": (PESSIMISTIC,),
        # A queued job's usage read from its training request when Batch lists none.
        "queued_job_to_a_terminate_rule": ("queued_capacity_usage=absent",),
    },
    # Ownership, isolation and tags (issue 14): what touches Batch.
    "integration/test_ownership.py": {
        "unmanaged_environment_is_left_alone_unless_adopted": (PESSIMISTIC,),
        "refused_tag_request_does_not_stop_the_rest": (PESSIMISTIC,),
        "share_item_naming_another_share": (PESSIMISTIC,),
    },
    # The random edit sequences: environment cuts preempting (issue 14, item 4) and the rest.
    # `make test` plays the same derandomized sequences per variant, and `pessimistic` has
    # environment_reduction_preempts=yes and scheduled_at_on_redispatch=first, so each alone
    # is left to `make soak`, whose many sequences are where it finds what the combination
    # hides.
    "property/test_sequences.py": {
        "random_edit_sequences": (
            PESSIMISTIC,
            *(
                ("environment_reduction_preempts=yes", "scheduled_at_on_redispatch=first")
                if SOAK
                else ()
            ),
        ),
    },
    # Faults on top of the variants.
    "faults/test_faults.py": {
        "stuck_in_a_transitional_status": (PESSIMISTIC,),
        "sns_down_while_config_is_rejected": (PESSIMISTIC,),
    },
}


def runs_for(nodeid: str) -> tuple[str, ...]:
    """The extra variant specs of one test (its node id, as pytest names it)."""
    path, _, name = nodeid.partition("::")
    entries = MATRIX.get(path.removeprefix("tests/"), {})
    specs: list[str] = []
    for key, extra in entries.items():
        if key == "*" or key in name:
            specs.extend(s for s in extra if s not in specs)
    return tuple(specs)
