"""The local stack of batch-quota-controller: an emulator of the AWS Batch quota-management API
on top of moto, and (later) the whole controller wired on one machine."""

from quota_local.compiled_core import guard_stale_build

guard_stale_build()
