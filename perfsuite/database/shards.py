"""Splitting a suite across machines: `perfsuite run --suite gpu --shard 2/4`.

A case belongs to the shard its stable hash names (sha256 of the entry's name and the case's
parameters, never Python's salted hash()), so every case is in exactly one shard and in the same
one every run, on every machine. The shards of one suite run share a batch id (the suite file's
hash, the -p overrides, the commit and N), which the store keeps on each shard's run row: `perfsuite
store runs --batch ID` shows which shards are in and which are missing, and `store:batch=ID` reads
them as one run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, Protocol


class Suite(Protocol):
    """What a batch id needs of a suite (perfsuite.suite.file.Suite, a layer above the database)."""

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...


def shard_of(entry: str, params: Mapping[str, Any], shards: int) -> int:
    """The shard (1..shards) of one case."""
    key = json.dumps([entry, sorted((str(k), repr(v)) for k, v in params.items())], separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % shards + 1


def in_shard(entry: str, params: Mapping[str, Any], shard: int, shards: int) -> bool:
    return shard_of(entry, params, shards) == shard


BATCH_ENV = "PERFSUITE_BATCH"


def batch_of(suite: Suite, overrides: list[str], commit: str | None, shard: tuple[int, int]) -> str:
    """The id every shard of one suite run at one commit shares. Set PERFSUITE_BATCH (a CI
    pipeline's id) to keep two runs of one suite at one commit (two nights) apart."""
    key = json.dumps([suite.name, suite.sha256, sorted(overrides), commit, shard[1], os.environ.get(BATCH_ENV)])
    return hashlib.sha256(key.encode()).hexdigest()[:16]
