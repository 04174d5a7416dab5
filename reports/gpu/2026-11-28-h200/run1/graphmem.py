import gc, sys, torch
from perfsuite.core import registry

BUILDS, MiB, dev = 4, 2**20, "cuda:0"
created = {"streams": 0}
try:  # count the streams the builds create (each may get its own cuBLAS workspace, which lives on)
    Base = torch.cuda.Stream
    class CountingStream(Base):
        def __new__(cls, *args, **kwargs):
            created["streams"] += 1
            return super().__new__(cls, *args, **kwargs)
    torch.cuda.Stream = CountingStream
except Exception as exc:  # noqa: BLE001 - a diagnostic: say so and go on without the count
    print(f"streams not counted: {exc}")

def mem(tag):
    torch.cuda.synchronize(dev)
    s = torch.cuda.memory_stats(dev)
    a = torch.cuda.memory_allocated(dev)
    print(f"{tag:<36} allocated {a / MiB:9.1f} MiB  reserved {torch.cuda.memory_reserved(dev) / MiB:9.1f} MiB  "
          f"segments {s.get('segment.all.current', 0):4d}  streams made {created['streams']}", flush=True)
    return a

w = registry.get("resnet")
params = {"size": "gpu", "model": "resnet18", "batch_size": 128}
base = mem("before any build")
after = []
for i in range(1, BUILDS + 1):
    b = w.build({**params, "cuda_graph": True}, dev)
    for _ in range(3):
        b.fn()
    mem(f"graphed build {i}: 3 replays")
    if b.teardown is not None:
        b.teardown()
    del b
    gc.collect()
    torch.cuda.empty_cache()
    after.append(mem(f"graphed build {i}: torn down"))
clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
if clear is not None:
    clear()
    torch.cuda.empty_cache()
    mem("cuBLAS workspaces cleared")
b = w.build({**params, "cuda_graph": False}, dev)
b.fn()
mem("eager build, 1 step")
growth = (after[-1] - after[0]) / (BUILDS - 1)
print(f"left allocated after each graphed build: {(after[0] - base) / MiB:.1f} MiB after the first, "
      f"then {growth / MiB:+.1f} MiB a build; {created['streams']} stream(s) made in {BUILDS} builds")
# A build's teardown must give back what it took: growth of more than 8 MiB a build is the defect.
sys.exit(1 if growth > 8 * MiB else 0)
