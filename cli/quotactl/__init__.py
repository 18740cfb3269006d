"""quotactl: the operator CLI of batch-quota-controller."""

import sys


def run() -> None:
    """The console script: `main()`, also when Ctrl-C comes while its modules import (boto3
    and pydantic take about a second), which would otherwise print a traceback."""
    try:
        from quotactl.main import main

        code = main()
    except KeyboardInterrupt:
        print("quotactl: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)
