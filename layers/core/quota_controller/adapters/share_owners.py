"""The `owners` attribute of a share's config item, read with GetItem (`ports.ShareOwners`).

The OwnerNotify function's role may GetItem on the config table only with a projection of
`owners` (IAM `dynamodb:Attributes`, `dynamodb:Select` = SPECIFIC_ATTRIBUTES): it can read who
owns a share, never the rest of the document, status or change records.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.domain.table_keys import PARTITION_KEY, SORT_KEY, share_key
from quota_controller.ports import RetryableError

OWNERS = "owners"


class DynamoShareOwners:
    """Reads a share item's owners from the config table (a boto3 DynamoDB Table)."""

    def __init__(self, table: Any):
        self._table = table

    def owners(self, queue: str, share: str) -> Any:
        """The raw `owners` list of the share's item; None when there is none."""
        try:
            answer = self._table.get_item(
                Key={PARTITION_KEY: queue, SORT_KEY: share_key(share)},
                ProjectionExpression="#o",
                ExpressionAttributeNames={"#o": OWNERS},
            )
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            raise RetryableError(f"GetItem of the share's owners: {code}") from err
        except BotoCoreError as err:
            raise RetryableError(f"GetItem of the share's owners: {err}") from err
        return (answer.get("Item") or {}).get(OWNERS)
