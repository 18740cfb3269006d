"""Thin moto glue: routes moto's Batch endpoints for quota management to the core emulator.

moto builds both its in-process routing (`BaseBackend.urls`) and its Flask server routing
(`BaseBackend.flask_paths`) from the `moto.batch.urls.url_paths` dict, so `install()` mutates
that dict in place and `uninstall()` restores it. The emulator of an (account, Region) is an
attribute of moto's BatchBackend, so moto's own reset (end of `mock_aws`, `/moto-api/reset`)
throws it away with the rest of the Batch state.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import moto
from moto.batch import urls as batch_urls
from moto.batch.models import BatchBackend, batch_backends
from moto.batch.responses import BatchResponse
from moto.core.exceptions import AWSError

from quota_local.emulator.core import TERSE_MESSAGE, BatchQuotaEmulator, EmulatorError
from quota_local.emulator.moto_versions import ALLOW_UNTESTED_MOTO_ENV, SUPPORTED_MOTO_VERSIONS

_BACKEND_ATTRIBUTE = "_quota_local_emulator"
_lock = threading.RLock()
_original_url_paths: dict[str, Any] | None = None

# URL path segment (after /v1/) → Batch operation served by the core emulator.
_CORE_OPERATIONS = {
    "createschedulingpolicy": "CreateSchedulingPolicy",
    "describeschedulingpolicies": "DescribeSchedulingPolicies",
    "listschedulingpolicies": "ListSchedulingPolicies",
    "updateschedulingpolicy": "UpdateSchedulingPolicy",
    "deleteschedulingpolicy": "DeleteSchedulingPolicy",
    "createserviceenvironment": "CreateServiceEnvironment",
    "updateserviceenvironment": "UpdateServiceEnvironment",
    "deleteserviceenvironment": "DeleteServiceEnvironment",
    "describeserviceenvironments": "DescribeServiceEnvironments",
    "describejobqueues": "DescribeJobQueues",
    "createquotashare": "CreateQuotaShare",
    "updatequotashare": "UpdateQuotaShare",
    "deletequotashare": "DeleteQuotaShare",
    "describequotashare": "DescribeQuotaShare",
    "listquotashares": "ListQuotaShares",
    "submitservicejob": "SubmitServiceJob",
    "describeservicejob": "DescribeServiceJob",
    "listservicejobs": "ListServiceJobs",
    "terminateservicejob": "TerminateServiceJob",
    "terminateservicejobs": "TerminateServiceJobs",
    "updateservicejob": "UpdateServiceJob",
    "getjobqueuesnapshot": "GetJobQueueSnapshot",
}
# Quota-share ARNs hold three slashes; moto's tag routes accept at most one.
_TAGS_PATH = "{0}/v1/tags/(?P<resource_arn>.+)$"


class _MotoJobQueues:
    """moto's container job queues, as the core's ExternalJobQueues port."""

    def __init__(self, backend: BatchBackend) -> None:
        self._backend = backend

    def describe_job_queues(self, identifiers: list[str] | None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._backend.describe_job_queues(identifiers)
        return result


def _check_moto_version() -> None:
    version = moto.__version__
    if version in SUPPORTED_MOTO_VERSIONS or os.environ.get(ALLOW_UNTESTED_MOTO_ENV) == "1":
        return
    raise RuntimeError(
        f"quota_local.emulator was tested with moto {', '.join(SUPPORTED_MOTO_VERSIONS)} and "
        f"relies on its internals; moto {version} is installed. Install a tested moto or set "
        f"{ALLOW_UNTESTED_MOTO_ENV}=1 to try it anyway."
    )


def emulator_for(account_id: str, region: str) -> BatchQuotaEmulator:
    """The emulator of an account and Region, created lazily on moto's BatchBackend."""
    backend = batch_backends[account_id][region]
    with _lock:
        emulator = backend.__dict__.get(_BACKEND_ATTRIBUTE)
        if emulator is None:
            emulator = BatchQuotaEmulator(
                account_id, region, external_job_queues=_MotoJobQueues(backend)
            )
            setattr(backend, _BACKEND_ATTRIBUTE, emulator)
        assert isinstance(emulator, BatchQuotaEmulator)
        return emulator


def _moto_error(err: EmulatorError) -> AWSError:
    # AWSError renders {"__type", "message"} with header X-Amzn-ErrorType, which botocore
    # turns into a ClientError with that code.
    return AWSError(err.message, err.code, err.status)


class QuotaBatchResponse(BatchResponse):
    """moto's BatchResponse with the quota-management operations served by the emulator."""

    def _emulator(self) -> BatchQuotaEmulator:
        return emulator_for(self.current_account, self.region)

    def _request(self) -> dict[str, Any]:
        body = self.body.decode("utf-8") if isinstance(self.body, bytes) else self.body
        request: dict[str, Any] = json.loads(body) if body else {}
        return request

    def _serve(self, operation: str, request: dict[str, Any] | None = None) -> str:
        try:
            result = self._emulator().handle(operation, request or self._request())
        except EmulatorError as err:  # already worded by the core
            raise _moto_error(err) from err
        return json.dumps(result)

    def _delegate(
        self,
        operation: str,
        request: dict[str, Any],
        call: Callable[[], str],
        check: Callable[[], None] | None = None,
    ) -> str:
        """Let moto serve `operation`, still recording it (the benchmark counts every call)."""
        emulator = self._emulator()
        try:
            if check is not None:
                check()
            result = call()
        except EmulatorError as err:
            emulator.record_call(operation, request, err.code)
            raise _moto_error(emulator.worded(err)) from err
        except Exception as err:
            code = getattr(err, "error_type", type(err).__name__)
            emulator.record_call(operation, request, code)
            if code == "ClientException" and emulator.variant("error_wording") == "terse":
                # moto's own refusals too: every ClientException the stack sends is terse.
                raise AWSError(TERSE_MESSAGE, code, getattr(err, "code", 400)) from err
            raise
        emulator.record_call(operation, request)
        return result

    def createjobqueue(self) -> str:
        request = self._request()
        if request.get("jobQueueType") == "SAGEMAKER_TRAINING" or request.get(
            "serviceEnvironmentOrder"
        ):
            return self._serve("CreateJobQueue", request)
        emulator = self._emulator()
        return self._delegate(
            "CreateJobQueue",
            request,
            super().createjobqueue,
            lambda: emulator.check_container_job_queue_request(request, creating=True),
        )

    def updatejobqueue(self) -> str:
        request = self._request()
        emulator = self._emulator()
        if emulator.owns_job_queue(str(request.get("jobQueue", ""))):
            return self._serve("UpdateJobQueue", request)
        return self._delegate(
            "UpdateJobQueue",
            request,
            super().updatejobqueue,
            lambda: emulator.check_container_job_queue_request(request, creating=False),
        )

    def deletejobqueue(self) -> str:
        request = self._request()
        if self._emulator().owns_job_queue(str(request.get("jobQueue", ""))):
            return self._serve("DeleteJobQueue", request)
        return self._delegate("DeleteJobQueue", request, super().deletejobqueue)

    def tags(self) -> str:
        arn = unquote(self.path).split("/v1/tags/")[-1]
        operation = {"POST": "TagResource", "DELETE": "UntagResource"}.get(
            self.method, "ListTagsForResource"
        )
        request: dict[str, Any] = {"resourceArn": arn}
        if self.method == "POST":
            request["tags"] = self._request().get("tags")
        elif self.method == "DELETE":
            request["tagKeys"] = self.querystring.get("tagKeys") or []
        if self._emulator().owns_arn(arn):
            return self._serve(operation, request)
        return self._delegate(operation, request, super().tags)


def _core_method(segment: str, operation: str) -> Callable[[QuotaBatchResponse], str]:
    def method(self: QuotaBatchResponse) -> str:
        return self._serve(operation)

    method.__name__ = segment
    method.__doc__ = f"{operation}, served by the core emulator."
    return method


# moto dispatches on the lower-case path segment, e.g. /v1/createquotashare → createquotashare().
for _segment, _operation in _CORE_OPERATIONS.items():
    setattr(QuotaBatchResponse, _segment, _core_method(_segment, _operation))


def is_installed() -> bool:
    """Whether moto's Batch routes currently point at the emulator."""
    return _original_url_paths is not None


def install() -> None:
    """Point moto's Batch routes at QuotaBatchResponse (idempotent; checks the moto version)."""
    global _original_url_paths
    _check_moto_version()
    with _lock:
        if _original_url_paths is not None:
            return
        paths = batch_urls.url_paths
        _original_url_paths = dict(paths)
        handler = QuotaBatchResponse.dispatch
        for key in paths:
            # Every Batch route goes through the subclass: it inherits moto's own actions.
            paths[key] = handler
        existing = {key.removeprefix("{0}/v1/").rstrip("$") for key in paths}
        for segment in _CORE_OPERATIONS:
            if segment not in existing:
                paths["{0}/v1/" + segment + "$"] = handler
        paths[_TAGS_PATH] = handler


def uninstall() -> None:
    """Give moto its original Batch routes back (idempotent)."""
    global _original_url_paths
    with _lock:
        if _original_url_paths is None:
            return
        batch_urls.url_paths.clear()
        batch_urls.url_paths.update(_original_url_paths)
        _original_url_paths = None
