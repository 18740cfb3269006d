"""Starting and stopping a local stack: moto (in-process, or a server on 127.0.0.1), the Batch
quota emulator and its scheduler, the resources and handlers, and the process environment.

Functions of a `quota_local.stack.LocalStack` (moved out of it, as `stack_resources` is). The
stack is typed Any: naming LocalStack here would make an import cycle with quota_local.stack.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from quota_local.loopback import free_port, port_taken
from quota_local.process_patches import (
    cache_jsonpath_parsing,
    deliver_to_each_subscription_apart,
    serialize_attribute_values_as_they_are,
    share_botocore_loaders,
)
from quota_local.stack_resources import ACCOUNT, create_resources, function_env, wire

_FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def start(stack: Any) -> None:
    """Start moto, install the emulator, create the resources and wire the handlers."""
    import moto

    from quota_local import emulator

    set_env(stack, _FAKE_CREDENTIALS | {"AWS_DEFAULT_REGION": stack.region})
    cache_jsonpath_parsing()
    serialize_attribute_values_as_they_are()
    share_botocore_loaders()
    deliver_to_each_subscription_apart()
    # The emulator's routes must be in place before a server serves its first request.
    if not emulator.is_installed():
        emulator.install()
        stack._installed_emulator = True
    if stack.server:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        port = stack.port or free_port()
        if stack.port and port_taken(port):
            # moto's server thread would fail to bind and its start() wait forever.
            raise OSError(f"port {port} on 127.0.0.1 is in use")
        stack._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        stack._server.start()
        stack.port = port
        stack.endpoint_url = f"http://127.0.0.1:{port}"
        set_env(stack, {"AWS_ENDPOINT_URL": stack.endpoint_url})
    else:
        stack._mock = moto.mock_aws()
        stack._mock.start()
    # A slow Batch call (Fault delay_seconds) moves the virtual clock, not the wall clock.
    emulator.configure(
        clock=stack.clock.time,
        settle_seconds=stack.settle_seconds,
        sleep=stack.clock.advance,
        variants=stack.variants,
    )
    create_resources(stack)
    if stack.run_jobs:
        from quota_local.emulator.scheduler import attach_scheduler

        # Batch's scheduler: jobs run, lend, borrow and get preempted; its events are put
        # on the local EventBridge bus (buffered: never from inside a Batch call).
        stack.scheduler = attach_scheduler(
            emulator.emulator_for(ACCOUNT, stack.region), on_event=stack._on_batch_event
        )
    set_env(stack, function_env(stack))
    from quota_controller import composition

    composition.reset()
    composition.use_clock(stack.clock)
    wire(stack)
    stack._next_resync = stack.clock.time() + stack.shape.resync_seconds


def stop(stack: Any) -> None:
    """Stop moto and restore the environment."""
    stack._events_client = None
    import time

    from quota_controller import composition
    from quota_local import emulator

    composition.reset()
    if stack.scheduler is not None:
        stack.scheduler.detach()
        stack.scheduler = None
    emulator.configure(clock=time.time, settle_seconds=0.0, sleep=time.sleep, variants="default")
    if stack._installed_emulator:
        emulator.uninstall()
        stack._installed_emulator = False
    stack._batch_client = None
    stack._tables.clear()
    if stack._chat is not None:
        stack._chat.close()
        stack._chat = None
    if stack._mock is not None:
        stack._mock.stop()
        stack._mock = None
    if stack._server is not None:
        # A server's AWS state outlives it in this process (moto's backends are global);
        # a mock's is reset when it stops. Reset it through moto's own API.
        import urllib.request

        reset = urllib.request.Request(f"{stack.endpoint_url}/moto-api/reset", method="POST")
        try:
            with urllib.request.urlopen(reset, timeout=30):
                pass
        finally:
            stack._server.stop()
        stack._server = None
    for key, value in stack._saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    stack._saved_env.clear()


def set_env(stack: Any, values: Mapping[str, str]) -> None:
    """Set environment variables, remembering the values `stop` puts back."""
    for key, value in values.items():
        stack._saved_env.setdefault(key, os.environ.get(key))
        os.environ[key] = value
