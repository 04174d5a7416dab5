"""`perfsuite env`: the environment fingerprint."""

from __future__ import annotations

import json

from perfsuite.measuring.fingerprint import fingerprint

NAME = "env"


def add_arguments(sub) -> None:
    sub.add_parser(NAME, help="print this machine's environment fingerprint (JSON)")


def command(args, console, recorder) -> int:
    print(json.dumps(fingerprint(), indent=1))
    return 0
