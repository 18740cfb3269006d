"""The Slack incoming-webhook adapter: the URL from Secrets Manager, one POST per alert.

The webhook URL is a credential (whoever has it can post to the channel), so it lives in
Secrets Manager, is read with Powertools Parameters (cached for `max_age` seconds, so a warm
function reads it once every few minutes, not once per alert) and appears in no error message
and no log line. Only `https://hooks.slack.com/services/...` is accepted: a secret that points
anywhere else would send the alerts there.

What a failure means:

- 2xx: delivered.
- 429, 5xx, a timeout or a broken connection: `RetryableError`. The handler lets it fail the
  invocation; Lambda retries the asynchronous event (twice, about a minute apart), then hands it
  to the on-failure destination (the Slack DLQ), so the alert is kept for a redrive.
- Any other 4xx: `SlackRejected`, terminal. Slack answers the same request the same way, whether
  the payload is refused (400 `invalid_payload`) or the webhook is gone (403, 404 `no_service`,
  410 `channel_is_archived`); retrying only delays the log line that says so. The handler logs
  Slack's error code with the alert's key and counts it, and the alert still reached the topic's
  other subscribers (e-mail, SQS, Amazon Q Developer).
- A secret that is not a Slack webhook URL: `WebhookConfigError`; it fails the invocation like a
  retryable error, so the alert waits in the DLQ until the secret is fixed.
- An owner's webhook (`OwnerWebhooks`) is one of many: a secret that is gone, may not be read,
  cannot be decrypted or is not a Slack webhook URL is `WebhookSecretUnusable`, a refusal like
  Slack's 4xx (retrying would hold back the other shares' alerts for nothing); only a throttled,
  failed (5xx) or unreachable read of the secret is a `RetryableError`.
- A 3xx is not followed (it would take the alert to another host) and counts as rejected.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from msgspec import Struct, field

from quota_controller.domain.alerts.model import ReceivedAlert
from quota_controller.domain.alerts.slack import slack_message
from quota_controller.ports import DeliveryRefused, RetryableError
from quota_controller.services.log_safety import hide_bodies

SLACK_ORIGINS = ("https://hooks.slack.com",)
WEBHOOK_PATH = "/services/"
SECRET_MAX_AGE = 300
TIMEOUT_SECONDS = 5.0
_ERROR_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


class WebhookConfigError(Exception):
    """The secret does not hold a usable Slack webhook URL (the message never contains it)."""


class WebhookSecretUnusable(DeliveryRefused):
    """An owner's webhook secret cannot be used until its owner fixes it (gone, not ours to read,
    not decryptable, not a Slack webhook URL): the text says why, never the URL."""


# GetSecretValue's error codes that a retry will not change: the secret is gone (or scheduled
# for deletion: InvalidRequestException), the role may not read it, its KMS key will not
# decrypt it. Any other code (throttling, InternalServiceError) is worth a retry.
SECRET_UNUSABLE_CODES = frozenset(
    {
        "ResourceNotFoundException",
        "AccessDeniedException",
        "DecryptionFailure",
        "InvalidRequestException",
        "InvalidParameterException",
    }
)


def secret_read_failure(err: BaseException) -> DeliveryRefused | RetryableError:
    """What a failed read of an owner's webhook secret means, by Secrets Manager's error code
    (Powertools' GetParameterError keeps botocore's error only as its context)."""
    from botocore.exceptions import ClientError

    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, ClientError):
        cause = cause.__cause__ or cause.__context__
    if cause is None:  # a timeout or a broken connection (botocore retried it already)
        inner = err.__cause__ or err.__context__ or err
        return RetryableError(f"the webhook secret could not be read: {type(inner).__name__}")
    code = str(cause.response.get("Error", {}).get("Code", ""))
    if code in SECRET_UNUSABLE_CODES:
        return WebhookSecretUnusable(f"the webhook secret cannot be read: {code}")
    return RetryableError(f"the webhook secret could not be read: {code or 'no error code'}")


class SlackRejected(DeliveryRefused):
    """Slack refused the message with a 4xx other than 429: retrying will not change that."""

    def __init__(self, status: int, error: str):
        super().__init__(f"Slack refused the message: HTTP {status} ({error})")
        self.status = status
        self.error = error


def webhook_url(secret: str | bytes, allowed_origins: Sequence[str] = SLACK_ORIGINS) -> str:
    """The URL in a secret that is the bare URL or JSON `{"url": ...}`; refuses any other URL."""
    text = secret.decode("utf-8", "replace") if isinstance(secret, bytes) else secret
    text = text.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            raise WebhookConfigError("the webhook secret is neither a URL nor valid JSON") from None
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            raise WebhookConfigError('the webhook secret is JSON without a string "url"')
        text = data["url"].strip()
    parts = urlsplit(text)
    origin = f"{parts.scheme}://{parts.netloc}".lower()
    if (
        origin not in {o.lower() for o in allowed_origins}
        or not parts.path.startswith(WEBHOOK_PATH)
        or not text.isprintable()
        or " " in text
    ):
        allowed = ", ".join(f"{o}{WEBHOOK_PATH}..." for o in allowed_origins)
        raise WebhookConfigError(f"the webhook secret is not a Slack webhook URL ({allowed})")
    return text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Answer a 3xx with an HTTPError instead of following it."""

    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None


def _slack_error(body: bytes) -> str:
    """Slack's error code (`invalid_payload`, `no_service`); anything else only by its size."""
    text = body[:200].decode("utf-8", "replace").strip()
    if _ERROR_CODE.fullmatch(text):
        return text
    return f"unrecognised answer of {len(body)} bytes" if body else "empty answer"


def _describe(err: BaseException) -> str:
    """A connection failure by kind and errno only: some reasons quote the host or URL."""
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(reason, TimeoutError):
        return "timed out"
    errno = getattr(reason, "errno", None)
    return type(reason).__name__ + (f" (errno {errno})" if errno else "")


class SlackWebhook:
    """Posts messages to the incoming webhook whose URL is kept in a Secrets Manager secret."""

    def __init__(
        self,
        secret_id: str,
        *,
        allowed_origins: Sequence[str] = SLACK_ORIGINS,
        timeout: float = TIMEOUT_SECONDS,
        max_age: int = SECRET_MAX_AGE,
    ):
        self._secret_id = secret_id
        self._allowed_origins = tuple(allowed_origins)
        self._timeout = timeout
        self._max_age = max_age
        self._opener = urllib.request.build_opener(_NoRedirect)

    def url(self) -> str:
        """The webhook URL (Powertools caches the secret for `max_age` seconds)."""
        from aws_lambda_powertools.utilities import parameters

        if not self._secret_id:
            raise WebhookConfigError("SLACK_WEBHOOK_SECRET_ARN is not set")
        hide_bodies()  # Powertools builds its own client: GetSecretValue's answer holds the URL
        secret = parameters.get_secret(self._secret_id, max_age=self._max_age)
        return webhook_url(secret, self._allowed_origins)

    def post(self, message: dict[str, Any]) -> None:
        """POST one message; raises RetryableError, SlackRejected or WebhookConfigError."""
        request = urllib.request.Request(
            self.url(),
            data=json.dumps(message).encode("utf-8"),
            headers={"Content-Type": "application/json; charset=utf-8"},
            method="POST",
        )
        # Exceptions are re-raised `from None`: urllib's own ones carry the URL in attributes.
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                response.read(1024)
        except urllib.error.HTTPError as err:
            try:
                body = err.read()
            except OSError:
                body = b""
            finally:
                err.close()
            status, error = err.code, _slack_error(body)
            if status == 429 or status >= 500:
                raise RetryableError(f"Slack webhook answered HTTP {status} ({error})") from None
            raise SlackRejected(status, error) from None
        except (OSError, http.client.HTTPException) as err:
            # URLError, TimeoutError and connection resets are all OSErrors.
            raise RetryableError(f"Slack webhook unreachable: {_describe(err)}") from None


class Delivery(Struct):
    """What became of the alerts of one invocation."""

    posted: list[str] = field(default_factory=list)
    rejected: list[tuple[str, SlackRejected]] = field(default_factory=list)


def deliver(alerts: Sequence[ReceivedAlert], webhook: SlackWebhook) -> Delivery:
    """Post each alert; a rejection is recorded, anything retryable propagates.

    SNS invokes the function with one record, so a retry never posts an alert twice.
    """
    delivery = Delivery()
    for alert in alerts:
        try:
            webhook.post(slack_message(alert))
        except SlackRejected as err:
            delivery.rejected.append((alert.dedupKey, err))
        else:
            delivery.posted.append(alert.dedupKey)
    return delivery


class OwnerWebhooks:
    """`ports.WebhookPoster`: each owner's webhook by its secret, one `SlackWebhook` per secret
    (Powertools caches each secret for `SECRET_MAX_AGE` seconds in a warm function)."""

    def __init__(self, allowed_origins: Sequence[str] = SLACK_ORIGINS):
        self._allowed_origins = tuple(allowed_origins)
        self._hooks: dict[str, SlackWebhook] = {}

    def post(self, secret_arn: str, alert: ReceivedAlert) -> None:
        """Post the alert's Block Kit message; raises SlackRejected or WebhookSecretUnusable
        (refused for good) or RetryableError (none of them with the URL)."""
        from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

        hook = self._hooks.get(secret_arn)
        if hook is None:
            hook = self._hooks[secret_arn] = SlackWebhook(
                secret_arn, allowed_origins=self._allowed_origins
            )
        try:
            hook.post(slack_message(alert))
        except WebhookConfigError as err:
            raise WebhookSecretUnusable(str(err)) from None
        except GetParameterError as err:
            raise secret_read_failure(err) from None


_webhook_override: SlackWebhook | None = None
_owner_origins: tuple[str, ...] | None = None


def use_owner_origins(origins: Sequence[str] | None) -> None:
    """Let owner webhooks point at other origins (the local stack's server); None: Slack's."""
    global _owner_origins
    _owner_origins = tuple(origins) if origins is not None else None


def owner_webhooks() -> OwnerWebhooks:
    """The owner-webhook poster the OwnerNotify handler uses."""
    return OwnerWebhooks(_owner_origins or SLACK_ORIGINS)


def use_webhook(webhook: SlackWebhook | None) -> None:
    """Post through another webhook (tests point one at a local server); None: the default."""
    global _webhook_override
    _webhook_override = webhook


def webhook_for(secret_id: str) -> SlackWebhook:
    """The webhook the handler posts through: the one given to `use_webhook`, else the secret's."""
    return _webhook_override or SlackWebhook(secret_id)
