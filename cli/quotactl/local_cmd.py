"""`quotactl local up`: the whole controller on this machine, for other processes to use.

It starts the local stack with moto listening on 127.0.0.1, writes where it listens to a state
file, and runs in real time until Ctrl-C. Other quotactl commands take `--local` to talk to it.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from quotactl.local_state import STATE_ENV, read_state, state_file, state_path

EXIT_INTERRUPTED = 130


def refusal(port: int, apply: str | None, err: TextIO) -> int | None:
    """Why `local up` must not start (an exit code, the reason printed), or None to go on:
    nothing is started, and no state file written, for a reason found here."""
    path = state_path()
    if path.is_dir():
        print(
            f"quotactl local up: {path} is a directory; {STATE_ENV} names the state file", file=err
        )
        return 2
    running = read_state()
    if running is not None:
        pid = running["pid"]
        print(
            f"quotactl local up: a local stack is already running (pid {pid}, "
            f"{running['endpoint']}); stop it first (Ctrl-C in its shell, or `kill {pid}`), or "
            f"give a second one its own state file with {STATE_ENV}=PATH",
            file=err,
        )
        return 2
    from quota_local.loopback import port_taken

    if port and port_taken(port):
        print(
            f"quotactl local up: port {port} on 127.0.0.1 is in use; pick another --port, or "
            "leave it out for a free one",
            file=err,
        )
        return 2
    if apply:
        from quotactl.documents import load_and_validate
        from quotactl.validate_cmd import print_result

        result = load_and_validate(apply)
        if not result.ok:
            print_result(result, quiet=False, out=err)
            print("quotactl local up: --apply: fix the document; nothing was started", file=err)
            return 1
    return None


def up_variants(assignments: Sequence[str], conformance: str | None) -> dict[str, Any] | None:
    """The emulator variants `local up` was asked for: a conformance file's, then each
    NAME=VALUE over them; None when neither is given (the stack then reads
    $QUOTA_LOCAL_VARIANTS). ValueError names what is wrong and what is allowed."""
    from quota_local.emulator.variants import defaults, load_conformance, parse_assignment

    if not assignments and not conformance:
        return None
    values = load_conformance(conformance) if conformance else defaults()
    given: set[str] = set()
    for text in assignments:
        name, value = parse_assignment(text)
        if name in given:
            raise ValueError(f"--variant {name} is given twice")
        given.add(name)
        values[name] = value
    return values


def _checked_variants(
    assignments: Sequence[str], conformance: str | None, err: TextIO
) -> dict[str, Any] | int:
    """Every variant's value for the stack, or exit code 2 after saying what is wrong."""
    from quota_local.emulator.variants import VARIANTS_ENV, resolve_variants

    try:
        chosen = up_variants(assignments, conformance)
    except ValueError as exc:
        print(f"quotactl local up: {exc}; nothing was started", file=err)
        return 2
    if chosen is not None:
        return chosen
    try:
        return resolve_variants(os.environ.get(VARIANTS_ENV) or None)
    except ValueError as exc:
        print(f"quotactl local up: ${VARIANTS_ENV}: {exc}; nothing was started", file=err)
        return 2


def _not_default(variants: dict[str, Any]) -> str:
    from quota_local.emulator.variants import VARIANTS

    changed = [
        f"{name}={f'{value:g}' if isinstance(value, float) else value}"
        for name, value in variants.items()
        if value != VARIANTS[name].default
    ]
    return ", ".join(changed)


def run_up(
    port: int,
    apply: str | None,
    out: TextIO,
    speed: float = 1.0,
    variants: Sequence[str] = (),
    conformance: str | None = None,
) -> int:
    """Start the local stack server and serve until interrupted."""
    chosen = _checked_variants(variants, conformance, sys.stderr)
    if isinstance(chosen, int):
        return chosen
    refused = refusal(port, apply, sys.stderr)
    if refused is not None:
        return refused
    from quota_local.stack import LocalStack

    path = state_path()
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    # The stack's clock starts now (a LocalStack in tests starts at a fixed time instead).
    start = datetime.now(UTC).replace(microsecond=0)
    with LocalStack(server=True, port=port, variants=chosen, start=start) as stack:
        state = {
            **stack.quotactl_state(),
            # The stack's clock runs `speed` times the wall clock from here: commands that
            # need "now" (quotactl report --local) read it from this.
            "clock": {"virtual": stack.clock.time(), "wall": time.time(), "speed": speed},
            "pid": os.getpid(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        try:
            if apply:
                stack.apply(apply, by="quotactl local up")
            changed = _not_default(stack.variants)
            if changed:
                print(f"emulator variants not at their default: {changed}", file=out, flush=True)
            clock = f"clock from {start.isoformat().replace('+00:00', 'Z')}" + (
                f", {speed:g} times real time" if speed != 1 else ""
            )
            print(
                f"local stack listening on {stack.endpoint_url} (table {stack.table_name}, "
                f"{clock}); state in {path}. In another shell, add --local to a command: "
                "`quotactl status --local`. Ctrl-C stops it.",
                file=out,
                flush=True,
            )
            stack.serve(
                tick=min(1.0, 1.0 / speed) if speed > 1 else 1.0, stop=lambda: stopping, speed=speed
            )
        except KeyboardInterrupt:
            pass
        finally:
            if state_file(path).get("pid") == os.getpid():  # not a file another stack wrote since
                path.unlink(missing_ok=True)
    print("local stack stopped", file=sys.stderr)
    # Finalising the interpreter would collect moto's object graph for over a second after
    # "stopped"; nothing of it needs a finaliser, so leave it out of the last collection.
    gc.freeze()
    return EXIT_INTERRUPTED  # stopped by Ctrl-C or SIGTERM, as docs/cli.md's exit codes say


ALERT_COLUMNS = ("occurredAt", "severity", "kind", "cause", "jobQueue", "quotaShareName", "summary")


def _running(command: str) -> dict[str, Any] | None:
    """The running stack's state, or None after saying there is none."""
    state = read_state()
    if state is None or not state.get("alertsQueue"):
        print(
            f"quotactl local {command}: no local stack is running (no live one in "
            f"{state_path()}); start one with `quotactl local up`",
            file=sys.stderr,
        )
        return None
    return state


def _client(state: dict[str, Any], service: str) -> Any:
    import boto3

    return boto3.client(
        service,
        region_name=str(state["region"]),
        endpoint_url=str(state["endpoint"]),
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def run_submit(
    queue: str,
    share: str,
    instance_type: str,
    count: int,
    priority: int,
    run_time: int,
    name: str | None,
    out: TextIO,
) -> int:
    """Submit a SageMaker training job to the running local stack; prints its job ID."""
    state = _running("submit")
    if state is None:
        return 2
    from botocore.exceptions import BotoCoreError, ClientError

    from quota_local.service_jobs import service_job_request, submit_service_job

    request = service_job_request(
        queue, share, instance_type, count, priority=priority, runtime_s=run_time, name=name
    )
    try:
        job_id = submit_service_job(_client(state, "batch"), request)["jobId"]
    except ClientError as err:
        message = err.response.get("Error", {}).get("Message") or str(err)
        # Batch's wording is not documented: say what was asked, whatever the message says.
        print(
            f"quotactl local submit: Batch refused the job (queue {queue}, share {share}, "
            f"{count} x {instance_type}): {message}",
            file=sys.stderr,
        )
        return 1
    except BotoCoreError as err:
        print(f"quotactl local submit: cannot reach {state['endpoint']}: {err}", file=sys.stderr)
        return 1
    print(job_id, file=out)
    return 0


def run_alerts(fmt: str, out: TextIO) -> int:
    """Print (and take) the alerts the running local stack published since the last call."""
    state = _running("alerts")
    if state is None:
        return 2
    from botocore.exceptions import BotoCoreError, ClientError

    from quota_local.alerts_inbox import drain_alerts

    sqs = _client(state, "sqs")
    others: list[str] = []
    try:
        alerts = drain_alerts(sqs, str(state["alertsQueue"]), others.append)
    except (BotoCoreError, ClientError) as err:
        print(
            f"quotactl local alerts: cannot read the alerts at {state['endpoint']}: {err}",
            file=sys.stderr,
        )
        return 1
    if others:
        print(
            f"quotactl local alerts: {len(others)} message(s) in the inbox were no alert "
            "(something else sent them to it); taken out",
            file=sys.stderr,
        )
    if fmt != "table":
        from quotactl import render

        render.data(alerts, fmt, out)
        return 0
    if not alerts:
        print("no new alerts", file=out)
        return 0
    from quota_controller.domain.alerts.render import one_line
    from quotactl import render

    rows = [{c: one_line(str(a.get(c) or "-"), limit=None) for c in ALERT_COLUMNS} for a in alerts]
    render.table(rows, ALERT_COLUMNS, out)
    return 0
