"""A status item edited by hand is read as far as it is well formed (the run is not stopped by
it), and the next run that writes it writes it whole: the mangled attribute does not stay."""

from __future__ import annotations

from builders import DocBuilder, ShareBuilder, g5
from golden.harness import QUEUE, Harness


def _converged() -> Harness:
    h = Harness()
    h.apply(
        DocBuilder(QUEUE).env(**g5(4)).add(ShareBuilder("team-a", g5(2))).build(),
    )
    h.converge()
    return h


def test_a_mangled_status_attribute_is_written_over_by_the_next_run() -> None:
    h = _converged()
    share = h.store.item(QUEUE, "STATUS#SHARE#team-a")
    assert share is not None
    assert isinstance(share.get("appliedTags"), dict)
    queue = h.store.item(QUEUE, "STATUS#QUEUE")
    assert queue is not None
    assert isinstance(queue.get("conditions"), list)
    # A console edit: tags as text, conditions as a number.
    h.store.put({**share, "appliedTags": "team=a"})
    h.store.put({**queue, "conditions": 7})

    result = h.run("after the edit")

    assert result is not None
    assert result.outcome == "converged"
    repaired = h.store.status(QUEUE)
    # Read as missing (the tags last applied are unknown now), and written so.
    assert repaired["STATUS#SHARE#team-a"].get("appliedTags") != "team=a"
    assert isinstance(repaired["STATUS#QUEUE"]["conditions"], list)
    assert not h.batch.requests  # nothing was wrong in Batch: only status is written


def test_a_run_writes_no_status_when_nothing_changed() -> None:
    h = _converged()
    h.run("again")
    assert not [w for w in h.store.writes if w.operation == "write_status"]
