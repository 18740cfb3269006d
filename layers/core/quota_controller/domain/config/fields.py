"""The quota document's field types: names, instance types, tags, and the strict base model.

Every part of the document (`model`, `owners`, `windows`) builds on these: a Batch resource
name, a SageMaker Training instance type, a resource's tags (which must leave room for the
controller's ownership tag), and `StrictModel`, the base that forbids unknown fields.
"""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
import re
import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictStr
from pydantic_core import PydanticCustomError

from quota_controller.domain.instance_types import TRAINING_INSTANCE_TYPES

# Batch allows 50 tags on a resource; the controller adds its ownership tag to each.
MAX_TAGS = 49
OWNER_TAG = "batch-quota-controller:queue"
NAME_MAX = 128
INT32_MAX = 2**31 - 1
_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")

State = Literal["ENABLED", "DISABLED"]


def check_name(value: str) -> str:
    """A Batch resource name: 1 to 128 letters, digits, hyphens and underscores."""
    if not value:
        raise PydanticCustomError("quota_rule", "must not be empty (1 to 128 characters)")
    if len(value) > NAME_MAX:
        raise PydanticCustomError(
            "quota_rule",
            "is {n} characters long; at most 128 are allowed",
            {"n": len(value)},
        )
    if not _NAME_RE.fullmatch(value):
        bad = sorted({c for c in value if not _NAME_RE.fullmatch(c)})
        shown = ", ".join(repr(c) for c in bad[:5])
        raise PydanticCustomError(
            "quota_rule",
            "may contain only letters, digits, hyphens and underscores (found {bad})",
            {"bad": shown},
        )
    return value


def _check_instance_type(value: str) -> str:
    if value == "NUM_INSTANCES":
        raise PydanticCustomError(
            "quota_rule",
            "NUM_INSTANCES is not allowed with quota management; name a SageMaker Training "
            "instance type such as ml.g5.xlarge",
        )
    if value not in TRAINING_INSTANCE_TYPES:
        hint = closest_instance_type(value)
        raise PydanticCustomError(
            "quota_rule",
            "{value} is not a SageMaker Training instance type{hint}",
            {"value": repr(value), "hint": f" (did you mean {hint!r}?)" if hint else ""},
        )
    return value


def closest_instance_type(value: str) -> str | None:
    """The SageMaker Training instance type `value` most likely means (a typo, another case,
    `ml.` left out), or None."""
    import difflib

    lowered = value.strip().lower()
    if not lowered.startswith("ml."):
        lowered = "ml." + lowered
    if lowered in TRAINING_INSTANCE_TYPES:
        return lowered
    close = difflib.get_close_matches(lowered, sorted(TRAINING_INSTANCE_TYPES), n=1, cutoff=0.85)
    return close[0] if close else None


# AWS Batch user guide, "Tag restrictions" (batch/latest/userguide/tag-restrictions.html):
# letters, numbers, spaces representable in UTF-8 and + - = . _ : / @; neither keys nor values
# may start with aws: (any case). The pattern AWS publishes for tags is
# ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$: Unicode letters, separators (spaces) and numbers.
_TAG_SYMBOLS = frozenset("+-=._:/@")
_TAG_CHARACTERS = (
    "may contain only letters, numbers, spaces and + - = . _ : / @ (AWS tag restrictions)"
)


def _bad_tag_characters(text: str) -> str:
    """The characters of a tag key or value that AWS tagging refuses, shown escaped."""
    bad = sorted(
        {c for c in text if c not in _TAG_SYMBOLS and unicodedata.category(c)[0] not in "LNZ"}
    )
    return ", ".join(ascii(c) for c in bad[:5])


def _check_tags(value: dict[str, str]) -> dict[str, str]:
    problems: list[str] = []
    if len(value) > MAX_TAGS:
        problems.append(
            f"has {len(value)} tags; at most {MAX_TAGS} are allowed (Batch allows 50, and the "
            f"controller adds its own tag {OWNER_TAG})"
        )
    if OWNER_TAG in value:
        problems.append(f"tag key {OWNER_TAG!r} is set by the controller; leave it out")
    for key, tag_value in value.items():
        if not 1 <= len(key) <= 128:
            problems.append(f"tag key {key[:40]!r} must be 1 to 128 characters (is {len(key)})")
        if key.lower().startswith("aws:"):
            problems.append(f"tag key {key[:40]!r} uses the reserved prefix 'aws:'")
        if bad := _bad_tag_characters(key):
            problems.append(f"tag key {key[:40]!r} {_TAG_CHARACTERS} (found {bad})")
        if len(tag_value) > 256:
            problems.append(
                f"the value of tag {key[:40]!r} is {len(tag_value)} characters; at most 256"
            )
        if tag_value.lower().startswith("aws:"):
            problems.append(f"the value of tag {key[:40]!r} uses the reserved prefix 'aws:'")
        if bad := _bad_tag_characters(tag_value):
            problems.append(f"the value of tag {key[:40]!r} {_TAG_CHARACTERS} (found {bad})")
    if problems:
        raise PydanticCustomError("quota_rule", "{msg}", {"msg": "; ".join(problems)})
    return value


Name = Annotated[StrictStr, AfterValidator(check_name)]
InstanceType = Annotated[StrictStr, AfterValidator(_check_instance_type)]
Tags = Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_tags)]


class StrictModel(BaseModel):
    """The base of user-written config models: unknown fields refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
