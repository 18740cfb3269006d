"""What `quotactl conformance` writes: the report of one probe (`Report`, whose `as_json()` is
conformance.json, account IDs in ARNs redacted) and each call's answer, kept as evidence
(`Answer`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from quota_local.emulator.variants import CONFORMANCE_FORMAT, VARIANTS

_ACCOUNT_RE = re.compile(r"(?<=:)\d{12}(?=:)")


@dataclass
class Report:
    """What the probe found; `as_json()` is the conformance file."""

    region: str
    prefix: str
    started_at: float
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_probed: dict[str, str] = field(default_factory=dict)
    # What a probe saw when it could not settle its variant (kept for the project to read).
    observations: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    left: list[dict[str, str]] = field(default_factory=list)
    failure: str | None = None
    finished_at: float | None = None

    def set(self, name: str, value: Any, evidence: Any) -> None:
        """Record one variant, checked against the variants table."""
        self.variants[name] = {"value": VARIANTS[name].check(value), "evidence": evidence}

    def as_json(self) -> dict[str, Any]:
        """The file's content; account IDs in ARNs are replaced by <account>."""
        data = {
            "format": CONFORMANCE_FORMAT,
            "tool": "quotactl conformance",
            "region": self.region,
            "prefix": self.prefix,
            "startedAt": _iso(self.started_at),
            "finishedAt": None if self.finished_at is None else _iso(self.finished_at),
            "variants": self.variants,
            "notProbed": self.not_probed,
            "observations": self.observations,
            "timingsSeconds": self.timings,
            "cleanup": {"removed": self.removed, "left": self.left},
            "failure": self.failure,
        }
        redacted: dict[str, Any] = _redact(data)
        return redacted


@dataclass
class Answer:
    """One call's outcome, kept as evidence: the response, or the error code and message."""

    operation: str
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    code: str | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        """The call succeeded."""
        return self.code is None

    def evidence(self) -> dict[str, Any]:
        """The raw answer for the report."""
        out: dict[str, Any] = {"operation": self.operation, "request": self.request}
        if self.ok:
            out["response"] = self.response
        else:
            out["error"] = {"code": self.code, "message": self.message}
        return out


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return _ACCOUNT_RE.sub("<account>", value)
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value
