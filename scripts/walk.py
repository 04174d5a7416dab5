"""The walk of one `perfsuite run noop` through perfsuite's modules, traced after a first run has
imported everything: how many of perfsuite's modules it enters (call events in perfsuite frames).

    python scripts/walk.py

(The count of returns to a module already left is printed too, but it is dominated by the timing
loop calling the step and the clock block after block: a figure of the run's length, not of the
structure.)"""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
seq = []
def tracer(frame, event, arg):
    if event == "call":
        mod = frame.f_globals.get("__name__", "")
        if mod.startswith("perfsuite") and (not seq or seq[-1] != mod):
            seq.append(mod)
    return None
from perfsuite.cli import app
d = tempfile.mkdtemp()
app.main(["run", "noop", "--max-time", "0.3", "--device", "cpu", "--out", f"{d}/warm.json"])  # imports done
sys.settrace(tracer)
try:
    app.main(["run", "noop", "--max-time", "0.3", "--device", "cpu", "--out", f"{d}/r.json"])
finally:
    sys.settrace(None)
seen, left, returns = set(), set(), 0
prev = None
for m in seq:
    if m in left:
        returns += 1
    if prev is not None and prev != m:
        left.add(prev)
    seen.add(m)
    prev = m
print(f"modules visited {len(seen)}, returns to a module already left {returns}")
