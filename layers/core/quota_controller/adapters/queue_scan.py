"""The config table scanned across queues (DynamoDB): which queues the controller manages, and
the tags each share's status says were applied (the resync's `ResyncSource`; `quotactl status`
and `lend` list the queues with it).

A queue is managed while it has any item the controller did not write (a QUEUE item, share
items, or an item with a mistyped sort key, which the reconcile then rejects) or a queue status
item (a removed queue still tears down); change records and leases alone do not count.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

from boto3.dynamodb.conditions import Attr
from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.adapters.config_store import guard
from quota_controller.domain.status import AppliedShareTags, ResyncView
from quota_controller.domain.status_records import ShareStatus
from quota_controller.domain.table_keys import (
    CONTROLLER_PREFIXES,
    PARTITION_KEY,
    QUEUE_STATUS,
    SHARE_STATUS_PREFIX,
    SORT_KEY,
    plain,
)


class DynamoQueueScan:
    """ResyncSource on a boto3 DynamoDB Table resource: one scan, paged."""

    def __init__(self, table: Any):
        self._table = table

    def list_queues(self) -> list[str]:
        """Every queue the controller manages (see the module's doc), sorted."""
        return self.resync_view().queues

    def resync_view(self) -> ResyncView:
        """What the resync needs, in one scan: the queues to reconcile (see `list_queues`) and
        the tags each share's status says were applied, with the share's ARN."""
        view = ResyncView()
        queues: set[str] = set()
        share_status = SHARE_STATUS_PREFIX
        kwargs: dict[str, Any] = {
            "ProjectionExpression": "#q, #i, quotaShareArn, appliedTags",
            "ExpressionAttributeNames": {"#q": PARTITION_KEY, "#i": SORT_KEY},
            "FilterExpression": Attr(SORT_KEY).eq(QUEUE_STATUS)
            | Attr(SORT_KEY).begins_with(share_status)
            | ~functools.reduce(
                operator.or_, (Attr(SORT_KEY).begins_with(p) for p in CONTROLLER_PREFIXES)
            ),
        }
        try:
            while True:
                page = self._table.scan(**kwargs)
                for item in page.get("Items", []):
                    queue, key = str(item[PARTITION_KEY]), str(item.get(SORT_KEY, ""))
                    if not key.startswith(share_status):
                        queues.add(queue)
                        continue
                    # A status item edited by hand into another shape is not compared (read as
                    # the reconcile reads it).
                    status = ShareStatus.parse(key, plain(item))
                    if status.quotaShareArn and status.appliedTags is not None:
                        view.applied_share_tags.append(
                            AppliedShareTags(
                                queue,
                                key[len(share_status) :],
                                str(status.quotaShareArn),
                                dict(status.appliedTags),
                            )
                        )
                if "LastEvaluatedKey" not in page:
                    view.queues = sorted(queues)
                    return view
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except (ClientError, BotoCoreError) as err:
            guard("list queues", err)
            raise
