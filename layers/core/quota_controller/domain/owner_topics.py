"""A share owner's own chat topic (`owners: [{chatTopic: <SNS topic ARN>}]`) (pure).

Amazon Q Developer in chat applications maps SNS topics to chat channels, and every channel of
a topic shares that topic's one subscription (SNS keeps one per topic, protocol and endpoint),
so a team's channel cannot take only its share's alerts from the alerts topic
(docs/alerts.md, "Amazon Q Developer and per-share chat channels"). A team names the standard
topic its channel configuration is mapped to instead, and the OwnerNotify function publishes
each alert about the share to it as an Amazon Q Developer custom notification. The function
may publish only to topics under a deploy-time name prefix (`OwnerChatTopicPrefix`) in the
stack's partition, Region and account: the document checks the ARN's shape, the reconcile
(status `ownerContacts`) and the function check the rest with `topic_problem`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from pydantic_core import PydanticCustomError

PROTOCOL: Final = "chatTopic"

# arn:<partition>:sns:<region>:<account>:<topic name>. Topic names: 1 to 256 letters, digits,
# hyphens and underscores; a FIFO topic's ends with `.fifo` (SNS CreateTopic).
# Compiled by `re` at its first match (and cached): most documents name no owner.
_TOPIC_ARN_PATTERN = (
    r"arn:(?P<partition>aws(?:-[a-z]+)*):sns:(?P<region>[a-z]{2,}(?:-[a-z]+)+-[0-9]+)"
    r":(?P<account>[0-9]{12}):(?P<name>[A-Za-z0-9_-]{1,256}(?P<fifo>\.fifo)?)"
)


def check_topic_arn(value: str) -> str:
    """The document's rule for a `chatTopic` (a pydantic AfterValidator)."""
    match = re.fullmatch(_TOPIC_ARN_PATTERN, value)
    if match is None:
        shown = repr(value if len(value) <= 60 else value[:60] + "\u2026")
        raise PydanticCustomError(
            "quota_rule",
            "must be an SNS topic ARN, arn:<partition>:sns:<region>:<12-digit account>:<topic "
            "name>, e.g. arn:aws:sns:eu-west-1:123456789012:team-a-chat (got {value})",
            {"value": shown},
        )
    if match["fifo"]:
        # A FIFO topic takes a publish only with a message group id (SNS Publish), and
        # Amazon Q Developer channels are mapped to standard topics.
        raise PydanticCustomError(
            "quota_rule",
            "names a FIFO topic; name the standard topic the team's Amazon Q Developer channel "
            "is mapped to",
        )
    return value


def allowed_prefix(partition: str, region: str, account: str, name_prefix: str) -> str | None:
    """The ARN prefix of the topics the OwnerNotify function may publish to (its role's
    resource, `arn:...:sns:<region>:<account>:<prefix>*`); None when the deployment has no
    prefix (no owner chat topics)."""
    if not name_prefix:
        return None
    return f"arn:{partition}:sns:{region}:{account}:{name_prefix}"


def topic_problem(
    arn: str, allowed: str | None, stack_topics: Collection[str] = frozenset()
) -> str | None:
    """Why the deployment cannot publish to this topic, or None when it can. The stack's own
    topics (alerts, alarms) never are, whatever the prefix matches: their subscribers take only
    the controller's alerts and CloudWatch's alarms (the role is denied them too)."""
    if allowed is None:
        return (
            "this deployment publishes to no owner chat topic (its OwnerChatTopicPrefix "
            "parameter is empty): ask the platform team, or name an email, sqs or "
            "webhookSecret contact"
        )
    match = re.fullmatch(_TOPIC_ARN_PATTERN, arn)
    if match is None or match["fifo"]:
        return "not the ARN of a standard SNS topic"
    if arn in stack_topics:
        return "one of the controller's own topics (alerts, alarms): name the team's own topic"
    if not arn.startswith(allowed):
        return (
            f"outside the topics this deployment may publish to ({allowed}*): the topic must "
            "be in the stack's account and Region and its name must start with the "
            "deployment's OwnerChatTopicPrefix"
        )
    return None


def topic_label(arn: str) -> str:
    """How logs and metrics name a topic: its name."""
    match = re.fullmatch(_TOPIC_ARN_PATTERN, arn)
    return match["name"] if match else "<not a topic ARN>"
