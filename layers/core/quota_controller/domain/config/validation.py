"""The one validation entry point: CLI, reconciler and local stack all call `validate_document`.

It reports every problem at once, each with the field path and a sentence a platform engineer
understands. Problems are scoped: a queue-wide error stops the whole queue, a share error only
that share, so the reconciler can still converge the valid shares of a queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field
from pydantic import ValidationError

from quota_controller.domain.config.layout_rules import (
    capacity_warnings,
    derived_name_problems,
    duplicate_names,
    environment_spec,
    partial_limit_problems,
    units_outside_environment,
)
from quota_controller.domain.config.model import (
    MAX_QUOTA_SHARES,
    TOP_LEVEL_FIELDS,
    QueueSettings,
    QuotaDocument,
    QuotaShareSpec,
)
from quota_controller.domain.config.problems import (
    Path,
    Problem,
    problems_from,
    scoped,
    unknown_field,
    value_kind,
)

# Quota windows (their models, the timeline) load with the first document that has some: a
# document without windows is validated without them (docs/performance.md, "Cold start").
if TYPE_CHECKING:
    from quota_controller.domain.config.windows import Window


class ValidationReport(Struct, eq=False):
    """The result of validating one quota document."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    settings: QueueSettings | None = None
    # Shares that passed validation, by their index in the document.
    valid_shares: dict[int, QuotaShareSpec] = field(default_factory=dict)
    # The document's windows (when they all passed), the names of those in force at the
    # moment validated (settings and shares are that moment's layout), and the next edge.
    windows: list[Window] = field(default_factory=list)
    in_force: tuple[str, ...] = ()
    next_edge: datetime | None = None

    @property
    def shares(self) -> list[QuotaShareSpec]:
        """The shares that passed validation, in document order."""
        return [self.valid_shares[i] for i in sorted(self.valid_shares)]

    @property
    def ok(self) -> bool:
        """True when the document has no errors (warnings allowed)."""
        return not self.errors

    @property
    def queue_wide_errors(self) -> list[Problem]:
        """Errors that concern the queue as a whole: nothing of the queue may change."""
        return [p for p in self.errors if p.share_index is None]

    @property
    def invalid_share_names(self) -> set[str]:
        """Names of the shares with errors (where the name could be read)."""
        return {p.share for p in self.errors if p.share is not None}

    @property
    def document(self) -> QuotaDocument | None:
        """The whole validated document, or None when anything is invalid."""
        if self.errors or self.settings is None:
            return None
        return QuotaDocument(**dict(self.settings), quotaShares=list(self.shares))

    @property
    def valid_part(self) -> QuotaDocument | None:
        """The queue settings with only the shares that passed validation (what the reconciler
        applies while other shares are invalid), or None when the settings themselves are."""
        if self.settings is None:
            return None
        return QuotaDocument(**dict(self.settings), quotaShares=list(self.shares))


def validate_document(
    raw: object, now: datetime | None = None, *, present: str = "now"
) -> ValidationReport:
    """Validate a parsed quota document (the mapping read from YAML, JSON or the config table).

    With `windows`, each window is checked alone and then every moment's layout from `now`
    for a year; the first moment a combination of windows makes invalid is reported. The
    report's settings and shares are then the layout in force at `now`
    (`quota_controller.domain.config.timeline`), and it says which windows are in force and
    when the layout next changes.

    `now` is the caller's clock (the reconcile's run, the CLI's now or `--at`, an event's
    time): the domain reads none, so a document with windows without `now` is a caller's bug
    (ValueError). Only a single layout, without windows, may leave it out (the recommend
    search and the simulator validate those). `present` is how a warning names `now`: a
    caller validating at a moment that is not the present (recommend's `--start`) names it."""
    if not isinstance(raw, Mapping) or "windows" not in raw:
        return _validate_layout(raw)
    if now is None:
        raise ValueError("a document with windows is validated at a moment: pass `now`")
    from quota_controller.domain.config.timeline import apply, in_force, next_edge

    report = _validate_layout(apply(raw, ()))
    windows = _check_windows(raw, report, now, present)
    if windows is None:
        return report
    report.windows = windows
    active = in_force(windows, now)
    report.in_force = tuple(w.name for w in active)
    report.next_edge = next_edge(windows, now)
    if active:
        effective = _validate_layout(apply(raw, active))
        invalid = {p.share_index for p in report.errors if p.share_index is not None}
        report.settings = effective.settings
        report.valid_shares = {
            i: share for i, share in effective.valid_shares.items() if i not in invalid
        }
    return report


def _validate_layout(raw: object) -> ValidationReport:
    """A document without windows: every rule of one layout."""
    report = ValidationReport()
    if raw is None:
        report.errors.append(Problem((), "the document is empty"))
        return report
    if not isinstance(raw, Mapping):
        report.errors.append(
            Problem(
                (),
                "the document must be a mapping with jobQueue, serviceEnvironment and "
                f"quotaShares (got {value_kind(raw)})",
            )
        )
        return report

    for key in raw:
        if key not in TOP_LEVEL_FIELDS:
            report.errors.append(Problem((str(key),), unknown_field(str(key), TOP_LEVEL_FIELDS)))

    settings_raw = {
        k: v
        for k, v in raw.items()
        if k in TOP_LEVEL_FIELDS and k not in ("quotaShares", "windows")
    }
    try:
        report.settings = QueueSettings.model_validate(settings_raw)
    except ValidationError as exc:
        report.errors.extend(problems_from(exc, QueueSettings, ()))
    if report.settings is not None:
        report.errors.extend(derived_name_problems(report.settings))

    shares_raw = raw.get("quotaShares", [])
    if shares_raw is None:
        shares_raw = []
    if not isinstance(shares_raw, list):
        report.errors.append(
            Problem(
                ("quotaShares",), f"must be a list of quota shares (got {value_kind(shares_raw)})"
            )
        )
        return report
    if len(shares_raw) > MAX_QUOTA_SHARES:
        report.errors.append(
            Problem(
                ("quotaShares",),
                f"has {len(shares_raw)} quota shares; a job queue allows at most "
                f"{MAX_QUOTA_SHARES}",
            )
        )

    parsed: list[tuple[int, QuotaShareSpec]] = []
    # Shares that failed still get each of their limits checked (against the environment, for
    # duplicates, and on their own when the list as a whole was refused), so that every
    # problem of a document is reported at once: (index, name, raw limits, problems reported).
    partial: list[tuple[int, str | None, object, list[Problem]]] = []
    for index, share_raw in enumerate(shares_raw):
        name = _share_name(share_raw)
        prefix: Path = ("quotaShares", index)
        if not isinstance(share_raw, Mapping):
            report.errors.append(
                Problem(
                    prefix, f"must be a mapping (got {value_kind(share_raw)})", share_index=index
                )
            )
            continue
        try:
            parsed.append((index, QuotaShareSpec.model_validate(share_raw)))
        except ValidationError as exc:
            found = [scoped(p, name, index) for p in problems_from(exc, QuotaShareSpec, prefix)]
            report.errors.extend(found)
            partial.append((index, name, share_raw.get("capacityLimits"), found))

    names = [(i, n) for i, s in enumerate(shares_raw) if (n := _share_name(s)) is not None]
    cross = list(duplicate_names(names))
    environment = environment_spec(report.settings, raw.get("serviceEnvironment"))
    if environment is not None:
        cross.extend(units_outside_environment(environment, parsed))
    for index, name, limits_raw, reported in partial:
        cross.extend(partial_limit_problems(environment, index, name, limits_raw, reported))
    report.errors.extend(cross)
    bad = {p.share_index for p in report.errors if p.share_index is not None}
    report.valid_shares = {index: share for index, share in parsed if index not in bad}
    if report.settings is not None:
        report.warnings.extend(capacity_warnings(report.settings, parsed))
    return report


def _check_windows(
    raw: Mapping[str, Any], report: ValidationReport, now: datetime, present: str = "now"
) -> list[Window] | None:
    """Each window alone, then every moment's layout from `now` on; the windows when all of
    them pass, else None. Window problems are queue-wide: a schedule that can make the layout
    invalid changes nothing until it is fixed."""
    from quota_controller.domain.config.windows import MAX_WINDOWS, Window

    entries = raw.get("windows")
    if entries is None:
        return []
    before = len(report.errors)
    if not isinstance(entries, list):
        report.errors.append(
            Problem(("windows",), f"must be a list of windows (got {value_kind(entries)})")
        )
        return None
    if len(entries) > MAX_WINDOWS:
        report.errors.append(
            Problem(("windows",), f"has {len(entries)} windows; at most {MAX_WINDOWS} are allowed")
        )
        return None
    parsed: list[tuple[int, Window]] = []
    for index, entry in enumerate(entries):
        try:
            parsed.append((index, Window.model_validate(entry)))
        except ValidationError as exc:
            report.errors.extend(problems_from(exc, Window, ("windows", index)))
    seen: set[str] = set()
    for i, window in parsed:
        if window.name in seen:
            report.errors.append(
                Problem(
                    ("windows", i, "name"), f"{window.name!r} is the name of an earlier window too"
                )
            )
        seen.add(window.name)
    shares = raw.get("quotaShares")
    known = {n for s in shares if (n := _share_name(s))} if isinstance(shares, list) else set()
    for index, window in parsed:
        for j, override in enumerate(window.quotaShares):
            if override.quotaShareName not in known:
                report.errors.append(
                    Problem(
                        ("windows", index, "quotaShares", j, "quotaShareName"),
                        f"names quota share {override.quotaShareName!r}, which the document "
                        "does not have (a window changes shares, it does not add them)",
                    )
                )
        _never_in_force(index, window, now, report)
    if len(report.errors) > before:
        return None
    windows = [w for _, w in parsed]
    _check_moments(raw, windows, {w.name: i for i, w in parsed}, now, report, present)
    _loans_overridden(windows, {w.name: i for i, w in parsed}, now, report)
    return None if len(report.errors) > before else windows


def _loans_overridden(
    windows: list[Window], index: Mapping[str, int], now: datetime, report: ValidationReport
) -> None:
    """A window of higher priority than a loan (`quotactl lend`) that sets one of its shares'
    capacityLimits while it lasts: the loan's units leave the lender and do not reach the
    borrower (or the other way round). `quotactl apply` and `lend` refuse it; an edit in the
    table is said here, in status and the plan (equal priorities are already an error)."""
    from quota_controller.domain.config.timeline import setting_limits
    from quota_controller.domain.config.windows import show_time

    for loan in windows:
        if not loan.lentBy or loan.until is None or loan.until <= now:
            continue
        shares = {o.quotaShareName for o in loan.quotaShares if o.capacityLimits is not None}
        start = max(now, loan.from_) if loan.from_ is not None else now
        # The loan is in force all through [start, until): the windows above it that set one of
        # its shares then override it.
        above = [w for w in windows if w.precedence > loan.precedence]
        for window, share, at in setting_limits(above, shares, start, loan.until):
            report.warnings.append(
                Problem(
                    ("windows", index[window.name]),
                    f"overrides loan {loan.name!r} on quota share {share} from {show_time(at)} "
                    f"(priority {window.precedence}, the loan's {loan.precedence}): the loan's "
                    "units leave one share and do not reach the other; give this window a "
                    "priority below the loan's, or end the loan first",
                    "warning",
                )
            )


def _never_in_force(index: int, window: Window, now: datetime, report: ValidationReport) -> None:
    from quota_controller.domain.config.windows import show_time

    if window.until is not None and window.until <= now:
        report.warnings.append(
            Problem(
                ("windows", index, "until"),
                f"ended at {show_time(window.until)}; it no longer changes anything and can be "
                "removed",
                severity="warning",
            )
        )
        return
    start = max(now, window.from_) if window.from_ is not None else now
    if window.recurring and window.next_occurrence(start) is None:
        report.errors.append(
            Problem(
                ("windows", index),
                "is never in force: none of its days falls between its from and until",
            )
        )


def _check_moments(
    raw: Mapping[str, Any],
    windows: list[Window],
    index: Mapping[str, int],
    now: datetime,
    report: ValidationReport,
    present: str = "now",
) -> None:
    """Every combination of windows in force from now on, at the first moment it occurs;
    `present` names `now` in the warnings."""
    from quota_controller.domain.config.timeline import (
        apply,
        check_until,
        equal_precedence_overlaps,
        moments,
    )
    from quota_controller.domain.config.windows import show_time

    before = len(report.errors)
    base_layout = _validate_layout(apply(raw, ()))
    base = {str(p) for p in base_layout.errors}
    # A warning a window's layout brings is said once, at the first moment it holds.
    warned = {str(p) for p in base_layout.warnings}
    seen: set[tuple[str, ...]] = set()
    for moment in moments(windows, now, check_until(windows, now)):
        if not moment.windows or moment.names in seen:
            continue
        seen.add(moment.names)
        when = show_time(moment.at)
        for one, two, target in equal_precedence_overlaps(moment):
            # Said on the later of the two in the document, naming the earlier.
            a, b = sorted((one, two), key=lambda w: index[w.name])
            what = (
                "the service environment"
                if target == "serviceEnvironment"
                else (f"quota share {target}")
            )
            report.errors.append(
                Problem(
                    ("windows", index[b.name]),
                    f"is in force together with window {a.name!r} at {when} with the same "
                    f"priority ({a.precedence}), and both set {what}: give one of them a "
                    "higher priority",
                )
            )
        if len(report.errors) > before:
            return
        effective = _validate_layout(apply(raw, moment.windows))
        # "now" rather than the moment validated: the Valid condition's message stays the same
        # from one run to the next while the window lasts.
        since = present if moment.at <= now else f"at {when}"
        for warning in effective.warnings:
            if str(warning) not in warned:
                warned.add(str(warning))
                report.warnings.append(
                    Problem(
                        ("windows", index[moment.windows[-1].name]),
                        f"{since} (windows in force: {', '.join(moment.names)}): {warning}",
                        "warning",
                        rule=warning.rule,
                    )
                )
        found = [p for p in effective.errors if str(p) not in base]
        if found:
            names = ", ".join(moment.names)
            last = index[moment.windows[-1].name]
            report.errors.extend(
                Problem(
                    ("windows", last),
                    f"at {when} (windows in force: {names}) the layout would be invalid: {p}",
                )
                for p in found
            )
            return


def _share_name(share_raw: object) -> str | None:
    if isinstance(share_raw, Mapping):
        name = share_raw.get("quotaShareName")
        if isinstance(name, str) and name:
            return name
    return None
