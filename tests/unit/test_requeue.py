"""The requeue message: what the requeuer writes is what the handler reads, in the stored keys."""

from __future__ import annotations

import json

import pytest

from quota_controller.domain.requeue import MalformedMessage, RequeueMessage


def test_a_message_reads_back_as_written() -> None:
    message = RequeueMessage("q", 1700000000.5, "waiting", ("team-b", "team-a"), "c1", 1699.0)
    again = RequeueMessage.parse(message.body(), "m-1")
    assert again == RequeueMessage("q", 1700000000.5, "waiting", ("team-a", "team-b"), "c1", 1699.0)


def test_the_body_has_the_stored_keys_and_the_optional_ones_only_when_set() -> None:
    assert json.loads(RequeueMessage("q", 5.0, "resync").body()) == {
        "queue": "q",
        "reason": "resync",
        "notBefore": 5.0,
    }
    full = json.loads(RequeueMessage("q", 5.0, "waiting", ("a",), "c", 3.0).body())
    assert set(full) == {"queue", "reason", "notBefore", "readShareTags", "chain", "lockedSince"}


def test_a_message_in_flight_from_an_older_controller_is_read() -> None:
    """Messages are in flight during a deploy: a body with only the first keys still reads."""
    assert RequeueMessage.parse('{"queue": "q", "notBefore": 12}', "m-2") == RequeueMessage(
        "q", 12.0
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("not json", "message m-3 is not JSON"),
        ('["q"]', "message m-3 names no queue"),
        ('{"queue": ""}', "message m-3 names no queue"),
        ('{"queue": "q", "notBefore": "soon"}', "message m-3 has a non-numeric notBefore"),
        ('{"queue": "q", "chain": 3}', "message m-3: chain is not text"),
        ('{"queue": "q", "readShareTags": [""]}', "readShareTags is not a list of names"),
    ],
)
def test_a_body_the_controller_did_not_write_is_refused_by_name(body: str, says: str) -> None:
    with pytest.raises(MalformedMessage, match=says):
        RequeueMessage.parse(body, "m-3")


def test_a_lock_time_not_written_by_the_controller_starts_the_count_again() -> None:
    for value in ("true", '"x"', "1e999"):
        body = f'{{"queue": "q", "lockedSince": {value}}}'
        assert RequeueMessage.parse(body, "m-4").locked_since is None
