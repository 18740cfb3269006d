"""Who changed something, for people: the name in a caller's ARN.

`updatedBy` holds what `quotactl apply` was given or found (`--by`, the caller's ARN from STS
GetCallerIdentity, `$USER`). Data keeps it whole; text for people shows the name: the role
session of an assumed role (`arn:aws:sts::123456789012:assumed-role/Platform/alice` is
alice), the user of an IAM user (`arn:aws:iam::123456789012:user/ops/bob` is bob).
"""

from __future__ import annotations


def display_name(by: str) -> str:
    """The person (or role session) behind `by`; `by` itself when it is not an IAM/STS ARN."""
    parts = by.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] not in ("iam", "sts"):
        return by
    resource = parts[5]
    if resource == "root":
        return f"root ({parts[4]})"
    return resource.rsplit("/", 1)[-1] or by
