"""Process-wide adjustments the local stack makes to Powertools and moto so that one
long-running process behaves as many short Lambda invocations would, and quickly."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple


def drop_unpublished_metrics() -> None:
    """Empty Powertools' metric set after an invocation when metrics are off (as locally).

    Powertools clears its (process-wide) metric set only when it publishes; with
    POWERTOOLS_METRICS_DISABLED it keeps every value, so a long-running local stack would grow
    and a test that turns metrics on would see values of earlier invocations. A publish would
    have emptied it, so this does what the publish would.
    """
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if is_metrics_disabled():
        Metrics().clear_metrics()


def cache_jsonpath_parsing() -> None:
    """moto's EventBridge builds a JSONPath parser (a PLY grammar) anew for every input path of
    every target of every event it delivers (`EventTemplateParser.parse` imports and calls
    `jsonpath_ng.ext.parse`): a tenth of a local run's time. The same few paths are parsed
    each time and a parsed path is not changed by `find`, so the parse is cached, once per
    process."""
    import functools

    try:
        import jsonpath_ng.ext
    except ImportError:  # moto's EventBridge would need it too: nothing to speed up
        return
    parse = getattr(jsonpath_ng.ext, "parse", None)
    if parse is not None and not hasattr(parse, "cache_info"):
        setattr(jsonpath_ng.ext, "parse", functools.lru_cache(maxsize=512)(parse))  # noqa: B010


def share_botocore_loaders() -> None:
    """botocore caches the service models it reads (JSON files of megabytes) per session, and a
    local run makes sessions by the hundred: each start replaces boto3's default session and the
    handlers' composition makes its own, so every client of a new session read and decoded its
    models again (a fifth of an alert test's time). The files are the same for every session
    with the same data path, and botocore already hands one loaded model to all the clients of
    a session without copying it, so sessions share one loader per data path, once per
    process."""
    import functools

    import botocore.loaders
    import botocore.session

    if not hasattr(botocore.session.create_loader, "cache_info"):
        botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


# The members of DynamoDB's AttributeValue whose wire form is the value itself (B and BS are
# base64 on the wire, so a value holding them takes moto's own path).
_TEXT_MEMBERS = frozenset({"S", "N"})
_FLAG_MEMBERS = frozenset({"BOOL", "NULL"})
_TEXT_SET_MEMBERS = frozenset({"SS", "NS"})


def _wire_form(value: object) -> bool:
    """Whether moto's JSON serializer would write this DynamoDB AttributeValue unchanged: one
    member of the model's, each of its own type all the way down (no blob, no None, no key
    the model lacks)."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((member, inner),) = value.items()
    if member in _TEXT_MEMBERS:
        return type(inner) is str
    if member in _FLAG_MEMBERS:
        return type(inner) is bool
    if member in _TEXT_SET_MEMBERS:
        return type(inner) is list and all(type(v) is str for v in inner)
    if member == "L":
        return type(inner) is list and all(_wire_form(v) for v in inner)
    if member == "M":
        # An empty attribute name: moto's own path writes such a map differently (it takes
        # the member for the structure itself), and the shortcut must not differ from it.
        return type(inner) is dict and all(
            type(k) is str and k != "" and _wire_form(v) for k, v in inner.items()
        )
    return False


def serialize_attribute_values_as_they_are() -> None:
    """moto 5.2 serializes every response through the botocore model, attribute by
    attribute, with several alias lookups per member: a DynamoDB item of a status record (a
    few hundred nested AttributeValues) costs tens of milliseconds, and a local reconcile
    spent most of its time there. An AttributeValue moto holds is already its wire form (a
    one-member dict of strings, flags, lists and maps), so it is written as it is, exactly what
    the model-driven path yields for it (`_wire_form` says when; anything else, and any
    response transformer moto registered, takes moto's path). tests/unit/test_process_patches.py
    compares both paths."""
    from moto.core import serialize

    serializer = serialize.JSONSerializer
    if getattr(serializer._serialize, "_attribute_values_as_they_are", False):
        return
    model_driven = serializer._serialize

    def _serialize(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if (
            shape.name == "AttributeValue"
            and key != ""  # moto's path treats a member without a name as the structure itself
            and not getattr(self._value_picker, "response_transformers", True)
            and _wire_form(value)
        ):
            serialized[shape.serialization.get("name", key)] = value
            return
        model_driven(self, serialized, value, shape, key)

    _serialize._attribute_values_as_they_are = True  # type: ignore[attr-defined]
    _serialize.model_driven = model_driven  # type: ignore[attr-defined]
    serializer._serialize = _serialize  # type: ignore[method-assign]


class SnsDeliveryFailure(NamedTuple):
    """A delivery of an SNS message to one subscription that failed (on AWS a client-side error
    such as a deleted queue is not retried: the message is dropped, or sent to the
    subscription's dead-letter queue; server-side errors are retried first)."""

    subscription_arn: str
    endpoint: str
    error: str


def sns_delivery_failures(account_id: str, region: str) -> list[SnsDeliveryFailure]:
    """The failed deliveries of SNS messages in that account and Region, oldest first (since
    moto's last reset: they are kept on moto's SNS backend)."""
    from moto.sns.models import sns_backends

    return list(vars(sns_backends[account_id][region]).get("delivery_failures", []))


def _error_code(exc: Exception) -> str:
    """The AWS error code of one of moto's errors (its newer ServiceException carries it as
    `code`, its older RESTError as `error_type`), else the exception's class name."""
    from moto.core.exceptions import ServiceException

    if isinstance(exc, ServiceException):
        return str(exc.code)
    return str(getattr(exc, "error_type", "") or type(exc).__name__)


def deliver_to_each_subscription_apart() -> None:
    """moto's SNS delivers a Publish to every subscription in turn, inside the Publish call, and
    lets the first failed delivery (an SQS subscription whose queue was deleted, an https
    endpoint that does not answer) fail the whole Publish, after the subscriptions before it
    have got the message. On AWS the topic accepts the message and delivers to each
    subscription asynchronously and independently: one subscription's failure neither fails
    the Publish nor touches the other subscriptions. So a failed delivery is kept on moto's
    SNS backend (`sns_delivery_failures`) and logged, and the Publish goes on. A message
    structure moto refuses (no `default` key) is still the Publish's error, as on AWS."""
    from moto.sns.models import Subscription

    if getattr(Subscription.publish, "_each_subscription_apart", False):
        return
    deliver = Subscription.publish

    def publish(self: Any, message: str, message_id: str, **kwargs: Any) -> None:
        if kwargs.get("message_structure") == "json":
            # A malformed structure is the request's error, not a delivery's: raised as moto does.
            self._parse_message_structure(message, self.protocol)
        try:
            deliver(self, message, message_id, **kwargs)
        except Exception as exc:  # any delivery failure is that subscription's alone
            failure = SnsDeliveryFailure(self.arn, self.endpoint, _error_code(exc))
            vars(self.topic.sns_backend).setdefault("delivery_failures", []).append(failure)
            logging.getLogger(__name__).warning(
                "SNS delivery of %s to %s failed: %s", message_id, self.arn, exc
            )

    publish._each_subscription_apart = True  # type: ignore[attr-defined]
    Subscription.publish = publish  # type: ignore[method-assign,assignment]
