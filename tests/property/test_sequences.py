"""Random edit sequences through the real handlers on the local stack (issue 14, "Done when").

Each example plays a random `sequences.Scenario` (a starting layout and up to 16 moves: edits,
approvals, invalid edits, job submissions, cancellations, waits) on a fresh LocalStack and
checks the three invariants of `sequences`: Batch equals the last valid document, no job is
hurt by a controller write without being named first, and each preemption has one true alert.

`make test` runs a few seeded sequences (deterministic: the same ones every run); `make soak`
runs many more. Settings, all optional:

    QUOTA_SOAK_EXAMPLES   sequences per run and variant (default 2; `make soak` 200)
    QUOTA_SOAK_SEED       a seed: other sequences, still reproducible (default: derandomized)
    QUOTA_SOAK_MOVES      move kinds to draw, comma-separated (default: all of sequences.MOVES);
                          a leading "-" drops kinds instead: "-rename,-invalid"
    QUOTA_SOAK_MAX_MOVES  moves per sequence at most (default 16)
    QUOTA_SOAK_SHRINK     seconds hypothesis may spend shrinking a failure (default 60;
                          0: report the first failing sequence unshrunk)

A failure prints the shrunk sequence as numbered steps, with the preemptions, terminations and
alerts it produced; `sequences.run_scenario(<Scenario printed by hypothesis>)` replays it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.internal.conjecture import engine
from sequences import MOVES, Scenario, run_scenario, scenarios

EXAMPLES = int(os.environ.get("QUOTA_SOAK_EXAMPLES", "2"))
SEED = os.environ.get("QUOTA_SOAK_SEED")
MAX_MOVES = int(os.environ.get("QUOTA_SOAK_MAX_MOVES", "16"))
SHRINK_SECONDS = int(os.environ.get("QUOTA_SOAK_SHRINK", "60"))
SHRINK = SHRINK_SECONDS > 0
# Each sequence takes seconds, so hypothesis's own shrinking budget (300 s) would make one
# failure cost five minutes per variant in `make test`. It has no setting for it; this is the
# engine's module constant (read when shrinking starts).
engine.MAX_SHRINKING_SECONDS = SHRINK_SECONDS


def move_kinds(spec: str | None) -> list[str]:
    """The move kinds a QUOTA_SOAK_MOVES value selects."""
    if not spec or not spec.strip():
        return list(MOVES)
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if all(p.startswith("-") for p in parts):
        dropped = {p[1:] for p in parts}
        unknown = dropped - set(MOVES)
        if unknown:
            raise ValueError(
                f"QUOTA_SOAK_MOVES: unknown kinds {sorted(unknown)}; "
                f"the kinds are {', '.join(MOVES)}"
            )
        return [k for k in MOVES if k not in dropped]
    return parts


SOAK = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=SEED is None,
    database=None,
    phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if SHRINK else [])],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=False,
)


def _seeded(test):  # type: ignore[no-untyped-def]
    return seed(int(SEED))(test) if SEED is not None else test


@_seeded
@SOAK
@given(scenarios(move_kinds(os.environ.get("QUOTA_SOAK_MOVES")), max_moves=MAX_MOVES))
def test_random_edit_sequences_keep_batch_converged_and_no_job_hurt_unannounced(
    scenario: Scenario,
) -> None:
    run_scenario(scenario)


def test_the_move_kinds_can_be_chosen_and_dropped() -> None:
    assert move_kinds(None) == list(MOVES)
    assert move_kinds("submit,limit") == ["submit", "limit"]
    assert "rename" not in move_kinds("-rename,-invalid")
    assert "invalid" not in move_kinds("-rename,-invalid")
