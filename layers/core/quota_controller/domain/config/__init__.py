"""The quota configuration document: model, validation, sources (YAML/JSON text, table items)."""

from quota_controller.domain.config.model import (
    CapacityLimit,
    QueueSettings,
    QuotaDocument,
    QuotaShareSpec,
)
from quota_controller.domain.config.problems import Problem, format_path
from quota_controller.domain.config.validation import ValidationReport, validate_document

__all__ = [
    "CapacityLimit",
    "Problem",
    "QueueSettings",
    "QuotaDocument",
    "QuotaShareSpec",
    "ValidationReport",
    "format_path",
    "validate_document",
]
