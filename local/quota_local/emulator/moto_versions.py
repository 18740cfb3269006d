"""The moto releases the emulator's moto adapter was tested with.

Its own module: the package re-exports it and the adapter checks it, and neither imports the
other for it (the package loads the adapter, and so moto, only when asked to).
"""

from __future__ import annotations

# moto versions the adapter was tested against; others are refused by `install` unless
# QUOTA_LOCAL_ALLOW_UNTESTED_MOTO=1, because the adapter relies on moto internals.
SUPPORTED_MOTO_VERSIONS: tuple[str, ...] = ("5.2.5",)
ALLOW_UNTESTED_MOTO_ENV = "QUOTA_LOCAL_ALLOW_UNTESTED_MOTO"
