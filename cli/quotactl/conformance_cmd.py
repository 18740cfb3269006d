"""`quotactl conformance`: run the probe (conformance_checks) and write conformance.json."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from quotactl import aws, render
from quotactl.conformance_checks import Probe, cost_bound
from quotactl.conformance_session import Clock

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def run_conformance(args: argparse.Namespace, out: TextIO, stdin: TextIO | None = None) -> int:
    """Probe, clean up, write the file; 0 when every probe ran and nothing was left behind."""
    request = None
    if args.training_request and not args.with_jobs:
        print("quotactl: --training-request is only read with --with-jobs", file=sys.stderr)
        return EXIT_USAGE
    if args.with_jobs:
        if not args.training_request:
            print("quotactl: --with-jobs needs --training-request FILE", file=sys.stderr)
            return EXIT_USAGE
        try:
            request = _read_request(args.training_request)
            unit, count, hours = cost_bound(request, args.attempt_seconds)
        except ValueError as exc:
            print(f"quotactl: {args.training_request}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"The job probes submit your training request 6 times ({count} x {unit}; one with "
            f"{count + 2} instances, which never runs, and two with 1) and end every attempt "
            f"within {args.attempt_seconds} s: at most {hours:.2f} instance-hours of {unit}.",
            file=out,
        )
        if not args.yes and not _confirm(stdin or sys.stdin, out):
            print("quotactl: nothing was created", file=sys.stderr)
            return EXIT_FAILED
    try:
        target = _target(args)
        batch = target.batch_client()
        events, sqs = target.client("events"), target.client("sqs")
        probe = Probe(
            batch,
            region=target.region,
            prefix=args.prefix,
            clock=Clock(),
            events=events,
            sqs=sqs,
            say=lambda text: print(text, file=out),
            poll_seconds=2.0,
            wait_seconds=float(args.wait_seconds),
            attempt_seconds=args.attempt_seconds,
        )
    except (aws.UsageError, ValueError) as exc:
        print(f"quotactl: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from botocore.exceptions import BotoCoreError, ClientError

    interrupted = False
    try:
        report = probe.run(request)
    except KeyboardInterrupt:
        interrupted = True
        report = probe.report
    except aws.AwsError as exc:
        print(f"quotactl: {exc}", file=sys.stderr)
        report = probe.report
        report.failure = str(exc)
    except (BotoCoreError, ClientError) as exc:
        # No credentials, no endpoint, an API the endpoint lacks: one line, and still the file.
        failure = f"cannot call Batch in {target.region}: {aws.explain(exc)}"
        print(f"quotactl: {failure}", file=sys.stderr)
        report = probe.report
        report.failure = failure
    data = report.as_json()
    try:
        Path(args.output_file).write_text(json.dumps(data, indent=2, default=str) + "\n")
    except OSError as exc:
        print(f"quotactl: cannot write {args.output_file}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED
    _summary(data, args.output_file, out)
    if interrupted:
        print("quotactl: interrupted; what it created was removed (see cleanup)", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if report.failure is None and not report.left else EXIT_FAILED


def _target(args: argparse.Namespace) -> aws.Target:
    if args.local:
        return aws.local_target(args)
    return aws.session_target(args)


def _read_request(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(exc.strerror or str(exc)) from None
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object (a CreateTrainingJob request)")
    return data


def _confirm(stdin: TextIO, out: TextIO) -> bool:
    print("Submit these jobs? Type yes to go on: ", end="", file=out, flush=True)
    try:
        answer = stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() == "yes"


def _summary(data: dict[str, Any], path: str, out: TextIO) -> None:
    rows = [
        {"variant": name, "observed": entry["value"]}
        for name, entry in sorted(data["variants"].items())
    ]
    rows += [
        {"variant": name, "observed": f"not probed: {why}"}
        for name, why in sorted(data["notProbed"].items())
    ]
    if rows:
        render.table(rows, ["variant", "observed"], out)
    left = data["cleanup"]["left"]
    for item in left:
        print(f"left behind: {item['kind']} {item['arn']} ({item['why']})", file=out)
        print(f"  remove it with: {item['remove']}", file=out)
    if data.get("failure"):
        print(f"the probe stopped early: {data['failure']}", file=out)
    print(f"wrote {path} (use it with `quotactl local up --conformance {path}`)", file=out)
