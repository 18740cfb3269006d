"""AWS Batch quota-management emulator (service environments, SAGEMAKER_TRAINING job queues,
quota shares, service jobs) as an extension of moto.

`install()` routes the Batch quota-management API of moto (in-process `mock_aws` and
`ThreadedMotoServer`) to the emulator; everything else stays moto's. The rules live in the
moto-free `core` module, so importing this package does not import moto: the moto adapter is
loaded only by `install`, `uninstall` and `emulator_for`.
"""

from __future__ import annotations

from quota_local.emulator.core import (
    TERSE_MESSAGE,
    BatchQuotaEmulator,
    CallRecord,
    EmulatorError,
    EmulatorSettings,
    Fault,
    JobHarm,
    configure,
    current_settings,
    server_error,
    slow,
    throttling,
)
from quota_local.emulator.moto_versions import ALLOW_UNTESTED_MOTO_ENV, SUPPORTED_MOTO_VERSIONS
from quota_local.emulator.scheduler import Scheduler, attach_scheduler
from quota_local.emulator.variants import (
    PROFILES,
    VARIANTS,
    VARIANTS_ENV,
    Variant,
    load_conformance,
    resolve_variants,
)

__all__ = [
    "ALLOW_UNTESTED_MOTO_ENV",
    "PROFILES",
    "SUPPORTED_MOTO_VERSIONS",
    "TERSE_MESSAGE",
    "VARIANTS",
    "VARIANTS_ENV",
    "BatchQuotaEmulator",
    "CallRecord",
    "EmulatorError",
    "EmulatorSettings",
    "Fault",
    "JobHarm",
    "Scheduler",
    "Variant",
    "attach_scheduler",
    "configure",
    "current_settings",
    "emulator_for",
    "install",
    "is_installed",
    "load_conformance",
    "resolve_variants",
    "server_error",
    "slow",
    "throttling",
    "uninstall",
]


def install() -> None:
    """Route moto's Batch endpoints for the quota-management API to the emulator (idempotent).

    Call it before a ThreadedMotoServer serves its first Batch request: the server builds its
    routing table once. Raises RuntimeError on an untested moto version.
    """
    from quota_local.emulator import moto_adapter

    moto_adapter.install()


def uninstall() -> None:
    """Restore moto's own Batch routes (idempotent)."""
    from quota_local.emulator import moto_adapter

    moto_adapter.uninstall()


def is_installed() -> bool:
    """Whether `install()` is in effect."""
    from quota_local.emulator import moto_adapter

    return moto_adapter.is_installed()


def emulator_for(account_id: str, region: str) -> BatchQuotaEmulator:
    """The emulator of an account and Region (lives on moto's Batch backend; reset with it)."""
    from quota_local.emulator import moto_adapter

    return moto_adapter.emulator_for(account_id, region)
