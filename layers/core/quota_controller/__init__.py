"""Core library of batch-quota-controller: config model, validation, planning, alerts.

Pure by design: nothing here imports boto3, reads the environment or makes calls, except the
adapter modules named for the service they talk to.
"""
