"""What no log line may carry: the body of an AWS request or response, or a rejected input.

At DEBUG, botocore logs each request's parameters, body included, and each response body:
DescribeServiceJob answers with the job's serviceRequestPayload (the training job request, with
hyperparameters and environment variables), GetSecretValue with the Slack webhook URL.
`hide_bodies` drops those lines; composition installs it before it builds the first client, so
every function has it. pydantic's error text quotes the input it rejected (the end of it too,
where a Batch event's payload sits), so exceptions are logged through `loggable`.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

# botocore's DEBUG lines that quote a body or a credential (the messages are botocore's own).
_BODY_LINES = {
    # the request dict (url, headers, body), then the prepared request (headers: the session
    # token of the function's role)
    "botocore.endpoint": ("Making request for", "Sending http request"),
    "botocore.parsers": ("Response body",),
    # the canonical request signs the x-amz-security-token header with its value
    "botocore.auth": ("CanonicalRequest",),
}


class _NoBodies(logging.Filter):
    """Drops the lines of one botocore logger that start with one of `prefixes`."""

    def __init__(self, prefixes: tuple[str, ...]):
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


def hide_bodies() -> None:
    """Keep request and response bodies and credentials out of botocore's DEBUG log
    (idempotent)."""
    for name, prefixes in _BODY_LINES.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoBodies) for f in logger.filters):
            logger.addFilter(_NoBodies(prefixes))


def loggable(exc: Exception, limit: int = 500) -> str:
    """The exception's message for a log line, at most `limit` characters; a ValidationError by
    where and what failed only (`detail.id: Field required`), without the input."""
    if not isinstance(exc, ValidationError):
        return str(exc)[:limit]
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    text = "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or '(input)'}: {e['msg']}" for e in errors
    )
    return f"{exc.error_count()} validation error(s) for {exc.title}: {text}"[:limit]
