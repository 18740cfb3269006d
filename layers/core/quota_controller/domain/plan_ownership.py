"""Whose a resource is, by its owner tag: the conflicts of a resource another queue's document
manages or the controller did not create, and the requests that set a resource's tags."""

from __future__ import annotations

from collections.abc import Mapping

from quota_controller.domain.config.fields import OWNER_TAG
from quota_controller.domain.plan_records import Action, Plan


def owned_elsewhere(
    tags: Mapping[str, str], queue: str, resource: str, rename_at: str, out: Plan
) -> bool:
    """A resource another queue's document manages (its owner tag names that queue) is never
    changed, retagged or attached here: two documents would undo each other's limits on every
    reconcile, and removing this one would tear down what the other still uses. An untagged
    resource is `not_adopted`'s case."""
    owner = tags.get(OWNER_TAG)
    if owner is None or owner == queue:
        return False
    out.conflicts.append(
        f"{resource} is managed by job queue {owner}'s document (tag {OWNER_TAG}); each queue "
        f"needs its own: name another in {rename_at}"
    )
    return True


def not_adopted(
    tags: Mapping[str, str], queue: str, adopt: bool, resource: str, part: str, out: Plan
) -> bool:
    """An existing resource without the owner tag was not created by the controller (or was
    created by hand before it): it is never changed, tagged or torn down unless the document
    says `adopt: true` on it, since other jobs may run on it. Adopted, it gets the owner tag and
    is managed (and torn down with the document) like one the controller created."""
    if tags.get(OWNER_TAG) == queue or adopt:
        return False
    out.conflicts.append(
        f"{resource} exists and was not created by this controller (no tag {OWNER_TAG}); it "
        f"is left untouched: set {part}.adopt: true to manage it (its limits, state and tags "
        "become the document's), or name another"
    )
    return True


def owned_tags(user: Mapping[str, str], queue: str) -> dict[str, str]:
    """The document's tags plus the controller's ownership tag for the queue."""
    return {**user, OWNER_TAG: queue}


def retag(
    arn: str,
    have: Mapping[str, str],
    want: Mapping[str, str],
    resource: str,
    out: Plan,
    share: str | None = None,
) -> None:
    """The TagResource and UntagResource requests that turn `have` into `want`."""
    # `share` lets status record the share's applied tags (ListQuotaShares returns none).
    # Untag first: Batch counts the tags a TagResource adds against the 50 a resource may hold
    # before any are removed, so replacing many keys the other way round never converges.
    # The owner tag is always wanted, so it is never among the keys removed.
    add = {k: v for k, v in want.items() if have.get(k) != v}
    remove = sorted(k for k in have if k not in want and not k.startswith("aws:"))
    if remove:
        out.actions.append(
            Action(
                "UntagResource",
                {"resourceArn": arn, "tagKeys": remove},
                resource,
                "remove tags " + ", ".join(remove),
                share=share,
            )
        )
    if add:
        out.actions.append(
            Action(
                "TagResource", {"resourceArn": arn, "tags": add}, resource, "set tags", share=share
            )
        )
