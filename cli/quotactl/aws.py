"""Where the operator commands talk to: session, config table, stack outputs, the caller.

Credentials and Region come from boto3's standard chain (environment, profile, SSO, instance
role), overridden by `--profile` and `--region`; `--endpoint-url` sends every client to one
endpoint (a moto server, LocalStack). The config table is named by `--table`, else found in
the outputs of the stack `--stack-name`, else read from `QUOTACTL_TABLE`.

boto3 is imported only when a command needs it, so `quotactl validate` starts fast.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from quota_controller.domain.plan_records import Scope
from quota_controller.ports import ActionFailed, ReadRefused, RetryableError

TABLE_ENV = "QUOTACTL_TABLE"
TABLE_OUTPUT = "ConfigTableName"
TOPIC_OUTPUT = "AlertsTopicArn"
# As the deployed reconciler (composition): adaptive retries for Batch, standard for the rest.
BATCH_MAX_ATTEMPTS = 8


class UsageError(Exception):
    """The command line does not say enough to know where to talk to (exit 2)."""


class AwsError(Exception):
    """An AWS request failed; the message names what was being done (exit 1)."""


# What botocore accepts as a Region name (its own check raises a ValueError on anything else).
_REGION_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")


def _region(value: str) -> str:
    if not _REGION_RE.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a Region name (letters, digits and hyphens, e.g. us-east-1)"
        )
    return value


def _endpoint_url(value: str) -> str:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an endpoint URL: give the scheme and host, "
            "e.g. http://127.0.0.1:4566"
        )
    return value


def add_options(parser: argparse.ArgumentParser, *, topic: bool = False) -> None:
    """The options every operator command takes to find its AWS account and config table."""
    group = parser.add_argument_group("where to talk to")
    group.add_argument("--table", metavar="NAME", help=f"the config table (default: ${TABLE_ENV})")
    group.add_argument(
        "--stack-name",
        metavar="STACK",
        help=f"read the table (and alerts topic) from this stack's outputs "
        f"({TABLE_OUTPUT}, {TOPIC_OUTPUT})",
    )
    group.add_argument(
        "--region", metavar="REGION", type=_region, help="AWS Region (default: boto3's)"
    )
    group.add_argument("--profile", metavar="PROFILE", help="AWS profile (default: boto3's)")
    group.add_argument(
        "--endpoint-url",
        metavar="URL",
        type=_endpoint_url,
        help="send every AWS request to this endpoint (a local moto server or emulator)",
    )
    group.add_argument(
        "--local",
        action="store_true",
        help="talk to the local stack started by `quotactl local up` (no AWS account needed)",
    )
    if topic:
        group.add_argument(
            "--topic-arn",
            metavar="ARN",
            help=f"publish alerts to this SNS topic (default: the stack's {TOPIC_OUTPUT}; "
            "without either, alerts are printed to stderr)",
        )


# The options of add_options that say where to talk to, as a next-step hint repeats them.
_WHERE_OPTIONS = ("table", "stack_name", "region", "profile", "endpoint_url")


def where_options(args: argparse.Namespace) -> list[str]:
    """The where-to options given on this command line, to repeat in a printed next step."""
    if getattr(args, "local", False):
        return ["--local", *(["--table", args.table] if getattr(args, "table", None) else [])]
    out: list[str] = []
    for name in _WHERE_OPTIONS:
        value = getattr(args, name, None)
        if value:
            out += [f"--{name.replace('_', '-')}", str(value)]
    return out


@dataclass(frozen=True)
class Caller:
    """Who the credentials belong to (STS GetCallerIdentity)."""

    account: str
    arn: str

    @property
    def partition(self) -> str:
        """`aws`, `aws-cn`, `aws-us-gov`, ... from the caller's ARN."""
        parts = self.arn.split(":")
        return parts[1] if len(parts) > 1 and parts[1] else "aws"


@dataclass
class Target:
    """A resolved AWS session, Region, endpoint and config table (and topic, when known)."""

    session: Any
    region: str
    table_name: str
    endpoint_url: str | None = None
    topic_arn: str | None = None
    stack_name: str | None = None
    _clients: dict[str, Any] = field(default_factory=dict)
    _stacks: dict[str, dict[str, Any]] = field(default_factory=dict)  # DescribeStacks answers

    def client(self, service: str, *, mode: str = "standard", max_attempts: int = 5) -> Any:
        """A client of the session with the retry mode set (one per service)."""
        if service not in self._clients:
            self._clients[service] = self.session.client(
                service,
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                config=_config(mode, max_attempts),
            )
        return self._clients[service]

    def batch_client(self) -> Any:
        """The Batch client: adaptive retries (client-side rate limiting on top of retries)."""
        return self.client("batch", mode="adaptive", max_attempts=BATCH_MAX_ATTEMPTS)

    @functools.cached_property
    def table(self) -> Any:
        """The config table (a boto3 DynamoDB Table resource)."""
        with failure(f"open table {self.table_name}"):
            resource = self.session.resource(
                "dynamodb",
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                config=_config("standard", 5),
            )
        return resource.Table(self.table_name)

    @functools.cached_property
    def caller(self) -> Caller:
        """The caller's account and ARN (one STS request)."""
        with failure("identify the caller (STS GetCallerIdentity)"):
            identity = self.client("sts").get_caller_identity()
        return Caller(str(identity["Account"]), str(identity["Arn"]))

    def scope(self) -> Scope:
        """Where the Batch resources live, for their ARNs."""
        caller = self.caller
        return Scope(caller.account, self.region, caller.partition)

    def where(self) -> str:
        """`table NAME in REGION`, for messages."""
        return f"table {self.table_name} in {self.region}"


def _config(mode: str, max_attempts: int) -> Any:
    from botocore.config import Config

    return Config(
        retries={"mode": mode, "max_attempts": max_attempts},
        connect_timeout=5,
        read_timeout=20,
    )


def connect(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Target:
    """Resolve session, Region and table from the options; UsageError when one is missing."""
    environ = os.environ if env is None else env
    if getattr(args, "local", False):
        return _local_target(args)
    # AWS_REGION as the AWS CLI reads it (before AWS_DEFAULT_REGION); boto3 alone reads only
    # AWS_DEFAULT_REGION and the profile.
    wanted = getattr(args, "region", None) or environ.get("AWS_REGION") or None
    session = _session(getattr(args, "profile", None), wanted)
    region = session.region_name
    if not region:
        raise UsageError("no AWS Region: pass --region, set AWS_REGION, or set one in the profile")
    target = Target(
        session=session,
        region=region,
        table_name="",
        endpoint_url=getattr(args, "endpoint_url", None),
        topic_arn=getattr(args, "topic_arn", None),
        stack_name=getattr(args, "stack_name", None),
    )
    table = getattr(args, "table", None)
    if target.stack_name:
        outputs = stack_outputs(target, target.stack_name)
        if not table:
            table = outputs.get(TABLE_OUTPUT)
            if not table:
                raise AwsError(
                    f"stack {target.stack_name} has no output {TABLE_OUTPUT}; is it a "
                    "batch-quota-controller stack? Pass --table instead"
                )
        target.topic_arn = target.topic_arn or outputs.get(TOPIC_OUTPUT)
    table = table or environ.get(TABLE_ENV)
    if not table:
        raise UsageError(
            f"no config table: pass --table NAME or --stack-name STACK, or set {TABLE_ENV}"
        )
    target.table_name = table
    return target


# For commands that take these options without the config table (quotactl conformance).
region_name = _region
endpoint_url = _endpoint_url


def session_target(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Target:
    """Session, Region and endpoint from the options, for commands that need no config table."""
    environ = os.environ if env is None else env
    wanted = getattr(args, "region", None) or environ.get("AWS_REGION") or None
    session = _session(getattr(args, "profile", None), wanted)
    if not session.region_name:
        raise UsageError("no AWS Region: pass --region, set AWS_REGION, or set one in the profile")
    return Target(
        session=session,
        region=session.region_name,
        table_name="",
        endpoint_url=getattr(args, "endpoint_url", None),
    )


def local_target(args: argparse.Namespace) -> Target:
    """The local stack of `quotactl local up` (UsageError when none is running)."""
    return _local_target(args)


def _local_target(args: argparse.Namespace) -> Target:
    import boto3

    from quotactl.local_state import read_state, state_path

    state = read_state()
    if state is None:
        raise UsageError(
            f"no local stack is running (no state in {state_path()}): start one with "
            "`quotactl local up` in another shell"
        )
    session = boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name=str(state["region"]),
    )
    return Target(
        session=session,
        region=str(state["region"]),
        table_name=getattr(args, "table", None) or str(state["table"]),
        endpoint_url=str(state["endpoint"]),
        topic_arn=getattr(args, "topic_arn", None) or state.get("topic"),
    )


def _session(profile: str | None, region: str | None) -> Any:
    import boto3
    from botocore.exceptions import ProfileNotFound

    try:
        return boto3.session.Session(profile_name=profile, region_name=region)
    except ProfileNotFound as err:
        raise UsageError(f"AWS profile {profile!r} not found ({err})") from err


def stack_outputs(target: Target, stack_name: str) -> dict[str, str]:
    """The outputs of a CloudFormation stack, by key."""
    outputs = _stack(target, stack_name).get("Outputs", [])
    return {str(o["OutputKey"]): str(o["OutputValue"]) for o in outputs}


def stack_parameters(target: Target, stack_name: str) -> dict[str, str]:
    """The parameter values a CloudFormation stack was deployed with, by key."""
    parameters = _stack(target, stack_name).get("Parameters", [])
    return {str(p["ParameterKey"]): str(p.get("ParameterValue", "")) for p in parameters}


def _stack(target: Target, stack_name: str) -> dict[str, Any]:
    """The DescribeStacks answer of one stack, read once per command."""
    if stack_name not in target._stacks:
        with failure(f"read the outputs of stack {stack_name} in {target.region}"):
            client = target.client("cloudformation")
            stacks = client.describe_stacks(StackName=stack_name)["Stacks"]
        target._stacks[stack_name] = dict(stacks[0]) if stacks else {}
    return target._stacks[stack_name]


@contextmanager
def failure(what: str) -> Iterator[None]:
    """Turn whatever boto3 raises inside into one AwsError line naming `what` failed."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (ClientError, BotoCoreError, RetryableError, ReadRefused, ActionFailed) as err:
        raise AwsError(f"cannot {what}: {explain(err)}") from err


def explain(err: BaseException) -> str:
    """One line for a botocore error, also when an adapter wrapped it (RetryableError,
    ReadRefused, ActionFailed)."""
    from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

    cause = err.__cause__ if isinstance(err, RetryableError | ReadRefused | ActionFailed) else err
    if isinstance(cause, ClientError):
        return describe_client_error(cause)
    if isinstance(cause, NoCredentialsError | PartialCredentialsError):
        return (
            f"no usable AWS credentials ({cause}); configure them as for the AWS CLI "
            "(environment, profile, SSO) or pass --profile"
        )
    return str(cause if cause is not None else err)


def describe_client_error(err: Any) -> str:
    """`Code: message` of a botocore ClientError."""
    error = err.response.get("Error", {})
    code = error.get("Code") or "Error"
    message = error.get("Message") or str(err)
    return f"{code}: {message}"
