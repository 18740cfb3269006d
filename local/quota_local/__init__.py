"""The local stack of batch-quota-controller: an emulator of the AWS Batch quota-management API
on top of moto, and (later) the whole controller wired on one machine."""
