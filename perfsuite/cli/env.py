"""`perfsuite env`: the environment fingerprint."""

from __future__ import annotations

import json


def cmd_env(args, console) -> int:
    from perfsuite.measure.env import fingerprint

    print(json.dumps(fingerprint(), indent=1))
    return 0
