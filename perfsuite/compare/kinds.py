"""The result class of each document kind perfsuite.compare defines, passed by whoever reads such a
document (core.documents and storage, below this package, cannot import them): `load_result` for
one file, RESULTS for a reader of any kind (store import, the report, TensorBoard)."""

from __future__ import annotations

import os
from typing import Any

from perfsuite.compare.amp import AmpComparison
from perfsuite.compare.bisection import Bisection
from perfsuite.compare.count_walk import CountHistory
from perfsuite.compare.pair import PairResult
from perfsuite.compare.paired_gate import GATE_ENTRY
from perfsuite.compare.paired_history import History
from perfsuite.compare.variant_study import VariantStudy
from perfsuite.compare.why import WhyResult
from perfsuite.storage.files import load_document

RESULTS: dict[str, Any] = {
    "amp": AmpComparison,
    "bisect": Bisection,
    "gate": GATE_ENTRY,
    "history": History,
    "pair": PairResult,
    "why": WhyResult,
    "variants": VariantStudy,
    "count-history": CountHistory,
}


def load_result(path: str | os.PathLike[str], kind: str) -> Any:
    """The results of a document of `kind`, read into its class where it has one (else its data)."""
    return load_document(path, kind, RESULTS.get(kind))
