"""A share's owner contacts (`owners`): who gets the alerts about a share besides the platform.

Each contact is an e-mail address, an SQS queue, a Slack webhook's secret or a chat topic,
checked for its shape here; the reconcile makes one subscription of the alerts topic for each
address and queue (`domain/owner_contacts.py`), and OwnerNotify posts to each webhook
(`domain/owner_webhooks.py`) and publishes to each chat topic (`domain/owner_topics.py`).
"""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictStr, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from quota_controller.domain.config.fields import StrictModel
from quota_controller.domain.owner_topics import check_topic_arn
from quota_controller.domain.owner_webhooks import check_secret_arn

# A share's owner contacts (`owners`): SNS subscriptions on the alerts topic, one each.
MAX_OWNERS = 10
# An address SNS can send to: ASCII, a local part of at most 64 and at most 254 in all
# (RFC 5321's limits); the domain has at least one dot. Deliberately not every form RFC 5322
# allows (quoted local parts, IP literals): a shape check, confirmation does the rest.
# Compiled by `re` at its first match (and cached): most documents name no owner.
_EMAIL_PATTERN = (
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}"
)
# arn:<partition>:sqs:<region>:<account>:<queue name> (names: 1 to 80 letters, digits, hyphens
# and underscores, `.fifo` for FIFO queues). The partition must also be the stack's: the
# reconcile checks that (`domain/owner_contacts.py`; the document does not know where it is
# deployed).
# Compiled by `re` at its first match (and cached): most documents name no owner.
_SQS_ARN_PATTERN = (
    r"arn:(?P<partition>aws(?:-[a-z]+)*):sqs:(?P<region>[a-z]{2,}(?:-[a-z]+)+-[0-9]+)"
    r":(?P<account>[0-9]{12}):(?P<name>[A-Za-z0-9_-]{1,80}(?P<fifo>\.fifo)?)"
)


def _check_email(value: str) -> str:
    if len(value) > 254 or not re.fullmatch(_EMAIL_PATTERN, value) or ".." in value:
        raise PydanticCustomError(
            "quota_rule",
            "must be an e-mail address such as team-a@example.com (got {value})",
            {"value": _quoted(value)},
        )
    return value


def _check_sqs_arn(value: str) -> str:
    match = re.fullmatch(_SQS_ARN_PATTERN, value)
    if match is None:
        raise PydanticCustomError(
            "quota_rule",
            "must be an SQS queue ARN, arn:<partition>:sqs:<region>:<12-digit account>:<queue "
            "name>, e.g. arn:aws:sqs:eu-west-1:123456789012:team-a-alerts (got {value})",
            {"value": _quoted(value)},
        )
    if match["fifo"]:
        raise PydanticCustomError(
            "quota_rule",
            "names a FIFO queue; the alerts topic is a standard topic, and SNS delivers a "
            "standard topic's messages to standard queues only",
        )
    return value


def _quoted(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:60] + "\u2026")


class OwnerContact(StrictModel):
    """One contact of a share's owners: an e-mail address, an SQS queue, a Slack webhook's
    secret or an SNS topic an Amazon Q Developer channel is mapped to (exactly one; the
    webhook's rules: `domain/owner_webhooks.py`, the topic's: `domain/owner_topics.py`)."""

    email: Annotated[StrictStr, AfterValidator(_check_email)] | None = None
    sqs: Annotated[StrictStr, AfterValidator(_check_sqs_arn)] | None = None
    webhookSecret: Annotated[StrictStr, AfterValidator(check_secret_arn)] | None = None
    chatTopic: Annotated[StrictStr, AfterValidator(check_topic_arn)] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "OwnerContact":
        given = sum(
            v is not None for v in (self.email, self.sqs, self.webhookSecret, self.chatTopic)
        )
        if given != 1:
            raise PydanticCustomError(
                "quota_rule",
                "give exactly one of email (an address), sqs (a queue ARN), webhookSecret "
                "(a secret ARN) or chatTopic (a topic ARN)" + (", not more" if given else ""),
            )
        return self

    @property
    def protocol(self) -> Literal["email", "sqs", "webhookSecret", "chatTopic"]:
        """The SNS subscription protocol (`webhookSecret`, `chatTopic`: no subscription of
        their own)."""
        if self.webhookSecret is not None:
            return "webhookSecret"
        if self.chatTopic is not None:
            return "chatTopic"
        return "email" if self.email is not None else "sqs"

    @property
    def endpoint(self) -> str:
        """The SNS subscription endpoint (the address or the queue ARN; a secret's or a
        topic's ARN)."""
        if self.email is not None:
            return self.email
        return str(self.sqs or self.webhookSecret or self.chatTopic)

    @property
    def label(self) -> str:
        """How status and messages name it: `email:<address>`, `sqs:<arn>`, ..."""
        return f"{self.protocol}:{self.endpoint}"


def _unique_contacts(contacts: list[OwnerContact]) -> list[OwnerContact]:
    # E-mail addresses compare without case (what a reader means); queue ARNs exactly. Every
    # repeat is reported, each at its own index: a ValidationError raised here is merged into
    # the model's, its locations under `owners` (pydantic-core does so; a test pins it).
    seen: dict[tuple[str, str], int] = {}
    repeats: list[InitErrorDetails] = []
    for index, contact in enumerate(contacts):
        endpoint = contact.endpoint.lower() if contact.email else contact.endpoint
        first = seen.setdefault((contact.protocol, endpoint), index)
        if first != index:
            repeats.append(
                InitErrorDetails(
                    type=PydanticCustomError(
                        "quota_rule",
                        "is the same contact as owners[{first}] ({contact}); "
                        "list each contact once",
                        {"first": first, "contact": contact.label},
                    ),
                    loc=(index,),
                    input=contact.label,
                )
            )
    if repeats:
        raise ValidationError.from_exception_data("owners", repeats)
    return contacts


Owners = Annotated[
    list[OwnerContact], Field(max_length=MAX_OWNERS), AfterValidator(_unique_contacts)
]
