"""Built-in workloads, one module per family, declared with the public `@perfsuite.workload`.

perfsuite finds them as it finds an installed package's workloads: through the
`perfsuite.workloads` entry point (pyproject.toml), whose target is this package. Importing it
imports every workload module in it, by the rule a user's workload folder is read with.
"""

from __future__ import annotations

import importlib
import pkgutil

from perfsuite.core.registry import is_workload_module

for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if is_workload_module(_module.name):
        importlib.import_module(f"{__name__}.{_module.name}")
