"""The alerts topic's subscriptions on a boto3 SNS client (the owners' contacts).

ListSubscriptionsByTopic shows a subscription nobody confirmed yet with the ARN
"PendingConfirmation"; Subscribe with ReturnSubscriptionArn returns its real ARN, which the
reconcile remembers and reads back with GetSubscriptionAttributes (`PendingConfirmation` tells
whether it still waits). https://docs.aws.amazon.com/sns/latest/api/API_Subscribe.html
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.adapters.batch_reader import error_message, is_retryable
from quota_controller.ports import RetryableError, SubscriptionRefused

# Owner contacts load with the first one to look up (a queue without owners has none).
if TYPE_CHECKING:
    from quota_controller.domain.owner_contacts import TopicSubscription

_PENDING = "PendingConfirmation"
# SNS's own throttling and server codes (its API reference: ThrottledException is "Throttled",
# HTTP 429; InternalError, HTTP 500), on top of the ones every AWS service shares.
_SNS_RETRYABLE = frozenset({"Throttled", "InternalError", "KMSThrottling"})


class SnsSubscriptions:
    """Subscriptions of one topic."""

    def __init__(self, client: Any, topic_arn: str):
        self._client = client
        self._topic_arn = topic_arn

    @property
    def partition(self) -> str:
        """The topic's partition (arn:<partition>:sns:...)."""
        return self._topic_arn.split(":")[1]

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        try:
            return getattr(self._client, operation)(**params)  # type: ignore[no-any-return]
        except ClientError as err:
            if is_retryable(err) or err.response.get("Error", {}).get("Code") in _SNS_RETRYABLE:
                raise RetryableError(f"{operation}: {error_message(err)}") from err
            code = err.response.get("Error", {}).get("Code", "")
            raise SubscriptionRefused(f"{code}: {error_message(err)}") from err
        except BotoCoreError as err:
            raise RetryableError(f"{operation}: {err}") from err

    def find(
        self, endpoints: Collection[tuple[str, str]], known_arns: Collection[str] = ()
    ) -> list[TopicSubscription]:
        """The subscriptions of these endpoints (e-mail addresses compared without case)."""
        if not endpoints:
            return []
        from quota_controller.domain.owner_contacts import TopicSubscription, endpoint_key

        wanted = {endpoint_key(p, e) for p, e in endpoints}
        listed: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._call(
                "list_subscriptions_by_topic",
                TopicArn=self._topic_arn,
                **({"NextToken": token} if token else {}),
            )
            listed += page.get("Subscriptions") or []
            token = page.get("NextToken")
            if not token:
                break
        found: dict[tuple[str, str], TopicSubscription] = {}
        arns = set(known_arns)
        for entry in listed:
            protocol, endpoint = str(entry.get("Protocol")), str(entry.get("Endpoint"))
            key = endpoint_key(protocol, endpoint)
            if key not in wanted:
                continue
            arn = str(entry.get("SubscriptionArn") or "")
            if arn == _PENDING or not arn.startswith("arn:"):
                found.setdefault(key, TopicSubscription(protocol, endpoint, None, pending=True))
                continue
            arns.discard(arn)
            found[key] = self._read(arn, protocol, endpoint)
        for arn in sorted(arns):  # pending ones the listing names without their ARN
            try:
                attrs = self._call("get_subscription_attributes", SubscriptionArn=arn)
            except SubscriptionRefused:
                continue  # gone (SNS deletes an unconfirmed subscription after 48 hours)
            values = attrs.get("Attributes") or {}
            if values.get("TopicArn") != self._topic_arn:
                continue
            protocol, endpoint = str(values.get("Protocol")), str(values.get("Endpoint"))
            key = endpoint_key(protocol, endpoint)
            if key in wanted:
                found[key] = _subscription(arn, protocol, endpoint, values)
        return list(found.values())

    def _read(self, arn: str, protocol: str, endpoint: str) -> TopicSubscription:
        attrs = self._call("get_subscription_attributes", SubscriptionArn=arn)
        return _subscription(arn, protocol, endpoint, attrs.get("Attributes") or {})

    def subscribe(self, protocol: str, endpoint: str, policy: str) -> tuple[str | None, bool]:
        """Subscribe with the filter on message attributes; (ARN, pending confirmation)."""
        answer = self._call(
            "subscribe",
            TopicArn=self._topic_arn,
            Protocol=protocol,
            Endpoint=endpoint,
            Attributes={"FilterPolicy": policy, "FilterPolicyScope": "MessageAttributes"},
            ReturnSubscriptionArn=True,
        )
        arn = answer.get("SubscriptionArn")
        if not isinstance(arn, str) or not arn.startswith("arn:"):
            return None, True
        try:
            attrs = self._call("get_subscription_attributes", SubscriptionArn=arn)
        except (RetryableError, SubscriptionRefused):
            # Subscribed: keep its ARN (status remembers it) and say what SNS does: an e-mail
            # or another account's queue waits for its owner's confirmation (Subscribe, SNS
            # API reference: "If the endpoint type is HTTP/S or email, or if the endpoint and
            # the topic are not in the same AWS account, the endpoint owner must run the
            # ConfirmSubscription action").
            account = self._topic_arn.split(":")[4]
            return arn, protocol == "email" or endpoint.split(":")[4:5] != [account]
        pending = str((attrs.get("Attributes") or {}).get(_PENDING, "false")).lower() == "true"
        return arn, pending

    def set_policy(self, arn: str, policy: str) -> None:
        """Replace the filter policy."""
        self._call(
            "set_subscription_attributes",
            SubscriptionArn=arn,
            AttributeName="FilterPolicy",
            AttributeValue=policy,
        )

    def unsubscribe(self, arn: str) -> None:
        """Delete the subscription."""
        self._call("unsubscribe", SubscriptionArn=arn)


def _subscription(
    arn: str, protocol: str, endpoint: str, values: dict[str, Any]
) -> TopicSubscription:
    from quota_controller.domain.owner_contacts import TopicSubscription

    return TopicSubscription(
        protocol,
        endpoint,
        arn,
        pending=str(values.get(_PENDING, "false")).lower() == "true",
        policy=values.get("FilterPolicy") or None,
        scope=values.get("FilterPolicyScope") or None,
    )
