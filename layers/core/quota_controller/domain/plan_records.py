"""The planner's records: the desired state of a queue (Desired), where its resources live
(Scope), one Batch request (Action) with the reductions it makes (Reduction), and a plan (Plan)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from msgspec import Struct, field

from quota_controller.domain.config.model import QueueSettings, QuotaShareSpec
from quota_controller.domain.reductions import Reduction as Reduction
from quota_controller.domain.reductions import ReductionKind as ReductionKind
from quota_controller.domain.reductions import pct as pct
from quota_controller.domain.status_records import HeldChange


class Scope(Struct, frozen=True, eq=False):
    """Where the resources live: the ARN prefix is derived from it."""

    account: str
    region: str
    partition: str = "aws"

    def arn(self, resource: str) -> str:
        """`arn:<partition>:batch:<region>:<account>:<resource>`."""
        return f"arn:{self.partition}:batch:{self.region}:{self.account}:{resource}"


def share_resource(name: str) -> str:
    """The resource a request on quota share `name` names (`Action.resource`; the key of
    status `unsettled` for its create)."""
    return f"quota share {name}"


class Action(Struct, frozen=True):
    """One Batch request: `operation` with `params`, as botocore takes them."""

    operation: str
    params: Mapping[str, Any]
    resource: str
    summary: str
    share: str | None = None
    reductions: tuple[Reduction, ...] = ()
    # Deleting a share terminates its jobs: only when it has no active job, unless forced.
    deletes_share: bool = False
    # DeleteJobQueue terminates the queue's jobs too (API_DeleteJobQueue).
    deletes_queue: bool = False

    @property
    def is_reduction(self) -> bool:
        """True when applying it can make jobs preemptible."""
        return bool(self.reductions)


# Why a resource waits: its status is transitional (`transition`); its create is made and
# reads do not show it yet (`creation`); it must be disabled (`disable`) or deleted first, or
# wait for another resource's deletion (`deletion`); it needs another resource first
# (`dependency`); a request of its own must come after another of this plan, lowered limits
# before raised ones, reductions before loosening (`order`); a write Batch refused or made
# recently that reads do not show yet (`settling`).
WaitKind = Literal[
    "transition", "creation", "disable", "deletion", "dependency", "order", "settling"
]


class Wait(Struct, frozen=True):
    """Something the plan cannot do yet (a later reconcile goes on from there): why it waits
    (`kind`), the resource that waits, as actions name it ("quota share team-a", "job queue
    q"), the line status and the CLI show, and the share it concerns (None: a queue-level
    resource)."""

    kind: WaitKind
    resource: str
    text: str
    share: str | None = None

    def __str__(self) -> str:
        return self.text


class Plan(Struct):
    """The requests to make now, what must wait, and conflicts no request can fix."""

    actions: list[Action] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    def wait_for(self, kind: WaitKind, resource: str, why: str, share: str | None = None) -> None:
        """Add the wait "<resource> <why>"."""
        self.waits.append(Wait(kind, resource, f"{resource} {why}", share))

    @property
    def wait_texts(self) -> list[str]:
        """The waits as status, results and the CLI show them."""
        return [w.text for w in self.waits]

    @property
    def converged(self) -> bool:
        """Nothing to do, nothing to wait for."""
        return not self.actions and not self.waits and not self.conflicts


class Desired(Struct, frozen=True, eq=False):
    """The desired state of one queue, as far as the config is valid.

    `settings` None means the queue has no config any more and is torn down. Shares named in
    `frozen_shares` are invalid in the config: they are left exactly as they are in Batch.
    `managed` names the policy and environment the controller last applied (from status), so a
    renamed or removed resource can still be found and cleaned up.
    """

    queue: str
    settings: QueueSettings | None
    shares: Mapping[str, QuotaShareSpec] = field(default_factory=dict)
    frozen_shares: frozenset[str] = frozenset()
    force: bool = False
    managed_policy: str | None = None
    managed_environment: str | None = None
    # Replaced resources not yet confirmed gone: read until they are retired.
    retiring_policies: tuple[str, ...] = ()
    retiring_environments: tuple[str, ...] = ()
    # Tags last applied to each share (ListQuotaShares does not return tags).
    applied_share_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The id of the last approved change applied (status): a change id is never reused.
    last_approved_change: str | None = None
    # The change the last reconcile held (status heldChange: its digest and since date it).
    held_change: HeldChange | None = None
