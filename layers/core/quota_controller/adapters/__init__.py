"""The outside world behind the ports: AWS Batch (the reconciler's gateway and the reads of the
alert and resync functions), the DynamoDB config and history tables, SNS, SQS, the Slack
webhook, the idempotency claims, and the environment (settings).

Only modules here (and composition, which builds them once per cold start) touch boto3 and
botocore; each turns what AWS raises into the ports' errors.
"""
