"""Alerts: the schema shared by the reconciler and the preemption pipeline, and its renderings."""

from quota_controller.domain.alerts.model import Alert, AlertCause, AlertJob, AlertKind, ChangeRef

__all__ = ["Alert", "AlertCause", "AlertJob", "AlertKind", "ChangeRef"]
