"""`perfsuite env`: the environment fingerprint."""

from __future__ import annotations

import json

from perfsuite.measuring.env import fingerprint


def cmd_env(args, console) -> int:
    print(json.dumps(fingerprint(), indent=1))
    return 0
