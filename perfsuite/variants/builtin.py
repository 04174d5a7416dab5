"""The built-in variants' transformations (perfsuite.variants.catalog names them): each turns the workload's model into something called as the model is, on
the workload's inputs. Built outside the timed region (perfsuite.variants.apply times the build and
the first call apart). Their libraries are imported here, when a variant is made, never at import.

- eager: the model as it is (the baseline);
- bf16 / fp16: autocast to that precision (fp16 on CUDA only: the CPU's fp16 kernels are not a
  deployment anyone ships);
- int8-dynamic: torch's dynamic quantization of Linear and LSTM layers (CPU kernels);
- int8-weight: torchao's int8 weight-only quantization;
- compile[:mode]: torch.compile with Inductor (mode: default, reduce-overhead, max-autotune, ...);
- onnxruntime: exported with torch.onnx (dynamo), run by an ONNX Runtime session (CPU provider;
  CUDA's on a GPU);
- openvino[:precision]: converted by OpenVINO and compiled for its CPU plugin (f32 unless asked);
- tensorrt: Torch-TensorRT (CUDA only).
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

from perfsuite.core.errors import Unsupported


def split(inputs: Any) -> tuple[tuple, dict]:
    """The workload's inputs as (positional, keyword) arguments of the model: a dict is keywords,
    a tuple or list positionals, anything else one positional."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def _threads() -> int:
    import torch

    return max(1, torch.get_num_threads())


class Runtime:
    """A model run by another runtime, called as the torch model is: tensors in, tensors out.
    `size_bytes` is what the runtime's model takes on disk; `folder` holds its files while it lives."""

    def __init__(self, run, size_bytes: int | None, folder: Any = None) -> None:
        self._run, self.size_bytes, self._folder = run, size_bytes, folder

    def __call__(self, *args, **kwargs):
        return self._run(args, kwargs)


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def tensor_out(model, names: tuple[str, ...] = ()):
    """The model returning its main output only (a model output's logits, a tuple's first): an
    exporter cannot follow what else a model returns (a Hugging Face model's key-value cache).
    `names`: the keyword inputs it takes positionally, in that order (a tracer passes positionals)."""
    import torch

    class TensorOut(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args, **kwargs):
            if names:
                kwargs, args = {**dict(zip(names, args)), **kwargs}, ()
            out = self.inner(*args, **kwargs)
            if hasattr(out, "logits"):
                return out.logits
            if isinstance(out, (tuple, list)):
                return out[0]
            if isinstance(out, dict):
                return next(iter(out.values()))
            return out

    return TensorOut().eval()


def eager(model, inputs, device: str, option: str | None):
    return model


def autocast(dtype_name: str):
    def make(model, inputs, device: str, option: str | None):
        import torch

        dtype = getattr(torch, dtype_name)
        kind = device.partition(":")[0]
        if kind == "cuda" and dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
            raise Unsupported(f"{device} has no bf16 support")

        class Autocast(torch.nn.Module):
            """The model under autocast to one precision (its weights stay as they are)."""

            def __init__(self) -> None:
                super().__init__()
                self.inner = model

            def forward(self, *args, **kwargs):
                with torch.autocast(device_type=kind, dtype=dtype):
                    return self.inner(*args, **kwargs)

        return Autocast()

    return make


def int8_dynamic(model, inputs, device: str, option: str | None):
    import warnings

    import torch

    layers = {torch.nn.Linear, torch.nn.LSTM}
    if not any(type(m) in layers for m in model.modules()):
        raise Unsupported("int8-dynamic quantizes Linear and LSTM layers, and this model has none")
    with warnings.catch_warnings():  # torch.ao's deprecation notice, once per process
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), layers, dtype=torch.qint8)


def int8_weight(model, inputs, device: str, option: str | None):
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    quantized = copy.deepcopy(model)
    quantize_(quantized, Int8WeightOnlyConfig())
    return quantized


def compiled(model, inputs, device: str, option: str | None):
    import torch

    return torch.compile(model, mode=option or None)


def onnxruntime(model, inputs, device: str, option: str | None):
    import onnxruntime as ort
    import torch

    args, kwargs = split(inputs)
    folder = tempfile.TemporaryDirectory(prefix="perfsuite-onnx-")
    path = Path(folder.name) / "model.onnx"
    torch.onnx.export(tensor_out(model), args, str(path), kwargs=kwargs or None, dynamo=True, verbose=False)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = _threads()
    opts.inter_op_num_threads = 1
    providers: list = ["CPUExecutionProvider"]
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        providers = [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
    session = ort.InferenceSession(str(path), sess_options=opts, providers=providers)
    names = [i.name for i in session.get_inputs()]

    def run(args, kwargs):
        if kwargs and set(names) <= set(kwargs):
            feed = {n: kwargs[n] for n in names}
        else:
            feed = dict(zip(names, [*args, *kwargs.values()]))
        outs = session.run(None, {n: t.detach().cpu().numpy() for n, t in feed.items()})
        tensors = [torch.from_numpy(o).to(device) for o in outs]
        return tensors[0] if len(tensors) == 1 else tuple(tensors)

    return Runtime(run, _folder_bytes(Path(folder.name)), folder)


def openvino(model, inputs, device: str, option: str | None):
    import openvino as ov
    import torch

    args, kwargs = split(inputs)
    names = tuple(kwargs)  # keyword inputs go in positionally, in their order
    given = tuple(kwargs.values()) if kwargs else args
    converted = ov.convert_model(tensor_out(model, names), example_input=given[0] if len(given) == 1 else given)
    # f32 unless asked (openvino:bf16): on a CPU with AMX, OpenVINO's default is bf16, another
    # precision than eager's, which the bf16 variant measures apart.
    # Its own CPU pinning off: with it on, OpenVINO set the calling thread's affinity to every core
    # at each inference, so a gate side pinned to the timing core ran on both cores (its speed-up
    # read 1.8-2.1x against eager where one core gives 1.5x; reports/variants/).
    config = {"INFERENCE_NUM_THREADS": _threads(), "INFERENCE_PRECISION_HINT": option or "f32",
              "ENABLE_CPU_PINNING": False}  # fmt: skip
    compiled_model = ov.Core().compile_model(converted, "CPU", config)
    folder = tempfile.TemporaryDirectory(prefix="perfsuite-openvino-")
    ov.save_model(converted, os.path.join(folder.name, "model.xml"))
    size = _folder_bytes(Path(folder.name))
    folder.cleanup()

    def run(args, kwargs):
        tensors = [kwargs[n] for n in names] if names else list(args)
        result = compiled_model([t.detach().cpu().numpy() for t in tensors])
        outs = [torch.from_numpy(result[o]) for o in compiled_model.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    return Runtime(run, size)


def tensorrt(model, inputs, device: str, option: str | None):
    import torch_tensorrt

    args, kwargs = split(inputs)
    if kwargs:
        raise Unsupported("tensorrt: the model's inputs must be positional tensors")
    return torch_tensorrt.compile(model, ir="dynamo", inputs=list(args))
