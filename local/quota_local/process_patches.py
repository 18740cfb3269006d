"""Process-wide adjustments the local stack makes to Powertools and moto so that one
long-running process behaves as many short Lambda invocations would, and quickly."""

from __future__ import annotations


def _drop_unpublished_metrics() -> None:
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


def _cache_jsonpath_parsing() -> None:
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
