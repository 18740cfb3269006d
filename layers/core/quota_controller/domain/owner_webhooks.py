"""A share owner's own Slack webhook (`owners: [{webhookSecret: <secret ARN>}]`) (pure).

A Slack incoming webhook cannot confirm an SNS https subscription and does not take SNS's
body, so it is not a subscription of the alerts topic: the OwnerNotify function is (one
subscription, filter `{"quotaShare": [{"exists": true}]}`), and for each alert about a share it
posts to the webhooks that the share's config item names, each on its own (docs/alerts.md,
"Owners"). The webhook URL is a credential, so the document names the Secrets Manager secret
holding it, and the function may read only the secrets under a deploy-time name prefix
(`OwnerWebhookSecretPrefix`): the document's ARN must be in the stack's partition, Region and
account and its name must start with that prefix. The document alone cannot know where it is
deployed: its validation checks the ARN's shape, the reconcile (status `ownerContacts`) and
the function check the rest with `webhook_problem`.
"""

from __future__ import annotations

import re
from typing import Final

from pydantic_core import PydanticCustomError

PROTOCOL: Final = "webhookSecret"

# arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 characters>. Secret names:
# 1 to 512 of letters, digits and /_+=.@- (Secrets Manager's CreateSecret); the full ARN ends
# with the hyphen and six random characters Secrets Manager adds, which a partial ARN (the
# name alone) lacks: IAM's `secret:<prefix>*` matches either, GetSecretValue needs the full one
# to be unambiguous.
# Compiled by `re` at its first match (and cached): most documents name no owner.
_SECRET_ARN_PATTERN = (
    r"arn:(?P<partition>aws(?:-[a-z]+)*):secretsmanager:(?P<region>[a-z]{2,}(?:-[a-z]+)+-[0-9]+)"
    r":(?P<account>[0-9]{12}):secret:(?P<name>[A-Za-z0-9/_+=.@-]{1,512})-[A-Za-z0-9]{6}"
)


def check_secret_arn(value: str) -> str:
    """The document's rule for a `webhookSecret` (a pydantic AfterValidator)."""
    if not re.fullmatch(_SECRET_ARN_PATTERN, value):
        shown = repr(value if len(value) <= 60 else value[:60] + "\u2026")
        raise PydanticCustomError(
            "quota_rule",
            "must be the full ARN of a Secrets Manager secret, arn:<partition>:secretsmanager:"
            "<region>:<12-digit account>:secret:<name>-<6 characters>, e.g. arn:aws:"
            "secretsmanager:eu-west-1:123456789012:secret:bqc/owners/team-a-AbCdEf (got {value})",
            {"value": shown},
        )
    return value


def allowed_prefix(partition: str, region: str, account: str, name_prefix: str) -> str | None:
    """The ARN prefix of the secrets the OwnerNotify function may read (its role's resource,
    `arn:...:secret:<prefix>*`); None when the deployment has no prefix (no owner webhooks)."""
    if not name_prefix:
        return None
    return f"arn:{partition}:secretsmanager:{region}:{account}:secret:{name_prefix}"


def webhook_problem(arn: str, allowed: str | None) -> str | None:
    """Why the deployment cannot post to this secret's webhook, or None when it can."""
    if allowed is None:
        return (
            "this deployment posts to no owner webhook (its OwnerWebhookSecretPrefix parameter "
            "is empty): ask the platform team, or name an email or sqs contact"
        )
    if not re.fullmatch(_SECRET_ARN_PATTERN, arn):
        return "not the full ARN of a Secrets Manager secret"
    if not arn.startswith(allowed):
        return (
            f"outside the secrets this deployment may read ({allowed}*): the secret must be in "
            "the stack's account and Region and its name must start with the deployment's "
            "OwnerWebhookSecretPrefix"
        )
    return None


def secret_label(arn: str) -> str:
    """How logs and metrics name a secret: its name without the random suffix (not a URL)."""
    match = re.fullmatch(_SECRET_ARN_PATTERN, arn)
    return match["name"] if match else "<not a secret ARN>"
