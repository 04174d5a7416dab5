"""What a variant is, which exist, and which of them can run here.

A variant is a named transformation of a workload's model (model -> something called as the model
is) or of its step (step -> step), built outside the timed region. The built-ins are in
perfsuite.variants.builtin; a user declares one in the workload file with the public decorator:

    @perfsuite.variant("fused-bn")            # model -> model
    def fuse(model):
        return torch.ao.quantization.fuse_modules(model, [["conv", "bn"]])

    @perfsuite.variant("no-grad-sync", level="step")   # step -> step
    def step_only(step):
        return step

Declarations live in this module's table for the process that loaded the file (a side process
loads the workload file, so it finds the user's variants there too).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass

from perfsuite.core.errors import ConfigError
from perfsuite.variants import builtin

LEVELS = ("model", "step")
# What a variant may be called: a name on the command line, in file names and in the store.
VARIANT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:+-]{0,63}")
# The extra that installs the built-ins' libraries (pyproject.toml).
EXTRA = "perfsuite[variants]"
BASELINE = "eager"


@dataclass(frozen=True)
class Variant:
    """One variant: `make(thing, inputs, device, option)` returns the transformed model (called as
    the model is, on the workload's inputs) or, at level "step", the transformed step."""

    name: str
    make: Callable
    level: str = "model"
    # Modules that must import for it to run (the 'variants' extra names them all).
    needs: tuple[str, ...] = ()
    # Device kinds it runs on ("cpu", "cuda").
    devices: tuple[str, ...] = ("cpu", "cuda")
    # The runtime computes on threads of its own (ONNX Runtime, OpenVINO): timed by the wall clock,
    # never by the CPU time of the thread that calls it.
    own_threads: bool = False
    description: str = ""
    option: str | None = None  # the part after ':' (compile:max-autotune)
    # The options it takes after ':' (empty: none is checked here, a declared variant's own).
    options: tuple[str, ...] = ()
    source: str = "perfsuite"


BUILTINS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("eager", builtin.eager, description="the model as it is: the baseline"),
        Variant("bf16", builtin.autocast("bfloat16"), description="autocast to bfloat16"),
        Variant("fp16", builtin.autocast("float16"), devices=("cuda",), description="autocast to float16"),
        Variant(
            "int8-dynamic",
            builtin.int8_dynamic,
            devices=("cpu",),
            description="dynamic int8 quantization of Linear/LSTM",
        ),
        Variant(
            "int8-weight", builtin.int8_weight, needs=("torchao",), description="torchao int8 weight-only quantization"
        ),
        Variant(
            "compile",
            builtin.compiled,
            option="",
            options=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
            description="torch.compile (Inductor); compile:MODE picks its mode",
        ),
        Variant(
            "onnxruntime",
            builtin.onnxruntime,
            needs=("onnx", "onnxscript", "onnxruntime"),
            own_threads=True,
            description="torch.onnx export, run by ONNX Runtime",
        ),
        Variant(
            "openvino",
            builtin.openvino,
            needs=("openvino",),
            devices=("cpu",),
            own_threads=True,
            option="",
            options=("bf16", "f32"),
            description="OpenVINO, compiled for its CPU plugin in f32 (openvino:bf16: its bf16 precision hint)",
        ),
        Variant(
            "tensorrt",
            builtin.tensorrt,
            needs=("torch_tensorrt",),
            devices=("cuda",),
            description="Torch-TensorRT (dynamo)",
        ),
    )
}

_DECLARED: dict[str, Variant] = {}


def variant(name: str, *, level: str = "model", description: str = "") -> Callable[[Callable], Callable]:
    """Declares a variant of the workloads in this file: `fn(model) -> model` (level "model"), or
    `fn(step) -> step` (level "step"). The name must not be a built-in's."""
    if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
        raise ConfigError(
            f"perfsuite.variant: name {str(name)[:70]!r}: use letters, digits and '_', '.', ':', '+', '-' "
            "(at most 64, starting with a letter, digit or '_')"
        )
    if name.partition(":")[0] in BUILTINS:
        raise ConfigError(f"perfsuite.variant: {name!r} is a built-in variant's name; choose another")
    if level not in LEVELS:
        raise ConfigError(f"perfsuite.variant {name!r}: level must be one of {', '.join(LEVELS)}, got {level!r}")

    def wrap(fn: Callable) -> Callable:
        if not callable(fn):
            raise ConfigError(f"perfsuite.variant {name!r}: decorates a function, got {type(fn).__name__}")
        code = getattr(fn, "__code__", None)
        where = f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)
        before = _DECLARED.get(name)
        if before is not None and before.source != where:
            raise ConfigError(f"perfsuite.variant {name!r} is declared twice: {before.source} and {where}")
        _DECLARED[name] = Variant(
            name,
            _UserMade(fn),
            level=level,
            description=description or (fn.__doc__ or "").strip().split("\n")[0],
            source=where,
        )
        return fn

    return wrap


@dataclass(frozen=True)
class _UserMade:
    """A user's declared function as a variant's `make` (the inputs and device are perfsuite's)."""

    fn: Callable

    def __call__(self, thing, inputs, device: str, option: str | None):
        return self.fn(thing)


def names() -> list[str]:
    """Every variant this process knows: the built-ins, then the declared ones."""
    return [*BUILTINS, *sorted(_DECLARED)]


def named(name: str) -> Variant:
    """The variant called `name` ("compile:max-autotune": the built-in with its option); a name
    nobody declared is refused, naming the known ones."""
    from dataclasses import replace

    if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
        raise ConfigError(
            f"variant {str(name)[:70]!r}: not a variant's name (letters, digits, '_', '.', ':', '+', '-')"
        )
    if name in _DECLARED:
        return _DECLARED[name]
    base, colon, option = name.partition(":")
    found = BUILTINS.get(base)
    if found is None:
        raise ConfigError(f"unknown variant {name!r}; known: {', '.join(names())}")
    if colon and found.option is None:
        raise ConfigError(f"variant {base!r} takes no option (got {name!r})")
    if colon and found.options and option not in found.options:
        # torch's "Unrecognized mode" or OpenVINO's precision error would come from a side process,
        # as a failed row after its build; a typo is bad input, refused before anything runs
        raise ConfigError(f"variant {base!r} takes one of {', '.join(found.options)} after ':' (got {name!r})")
    return replace(found, name=name, option=option) if colon else found


def runnable(name: str, device: str, flag: str = "--variant") -> Variant:
    """The variant called `name`, refused as bad input (ConfigError naming `flag`) when it is
    unknown or cannot run on `device`: gate, bisect, history and why check it before any checkout
    or side process starts."""
    v = named(name)
    why = refusal(v, device)
    if why:
        raise ConfigError(f"{flag}: {why}")
    return v


def refusal(v: Variant, device: str) -> str | None:
    """Why `v` cannot run on `device` here (None: it can): a device it does not run on, or a
    library that is not installed (naming the extra that installs it)."""
    kind = device.partition(":")[0]
    if kind not in v.devices:
        return f"variant {v.name!r} runs on {' and '.join(v.devices)} only, not {device}"
    missing = [m for m in v.needs if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"variant {v.name!r} needs {', '.join(missing)}, which is not installed "
            f"(pip install '{EXTRA}' installs the variants' libraries)"
        )
    return None
