"""Short kernel names: a chart label and the key that groups launches into kernel families.

A demangled CUDA name is often hundreds of characters of template arguments and parameter
lists. The short name keeps the kernel's own identifier (namespaces, `void`, template
arguments and parameters dropped); PyTorch's and CUTLASS's generic launchers
(`elementwise_kernel`, `Kernel2`, ...) say nothing alone, so the functor or operation found
in their template arguments is kept in brackets. Long cuDNN/cuBLAS names are cut before
their first tile/data-type field, so `sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_…_tilesize128x64x32…`
and its other tilings form one family, `sm90_xmma_dgrad_implicit_gemm`.
"""

from __future__ import annotations

import re

MAX_LEN = 48
_GENERIC = {
    "elementwise_kernel",
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "multi_tensor_apply_kernel",
    "reduce_kernel",
    "Kernel",
    "Kernel2",
    "kernel",
    "globalKernel",
    "device_kernel",
}
# Most telling first: an ATen op's name, then its functor, then any other identifier.
_HINTS = (
    re.compile(r"\b\w+_kernel_(?:cuda|impl)\b"),
    re.compile(r"\b\w*Functor\w*"),
    re.compile(r"\b\w+_functor\b"),
    re.compile(r"\blaunch_\w+"),
    re.compile(r"\b\w+Ops\b"),
)
_WORD = re.compile(r"\b[A-Za-z_]\w{3,}\b(?!::)")  # not a namespace
_NOISE = {
    "void",
    "float",
    "double",
    "half",
    "long",
    "unsigned",
    "char",
    "bool",
    "const",
    "std",
    "array",
    "instance",
    "lambda",
    "operator",
    "TensorIteratorBase",
    "TensorListMetadata",
    "detail",
    "memory",
}


def _split(name: str) -> tuple[str, str]:
    """(identifier before the first top-level '<' or '(', text of the template arguments)."""
    for i, ch in enumerate(name):
        if ch in "<(":
            if ch == "(":
                return name[:i], ""
            depth = 0
            for j in range(i, len(name)):
                depth += {"<": 1, ">": -1}.get(name[j], 0)
                if depth == 0:
                    return name[:i], name[i + 1 : j]
            return name[:i], name[i + 1 :]
    return name, ""


def _family(ident: str) -> str:
    """Cut a long generated name before its first field with a digit (tile sizes, dtypes)."""
    if len(ident) <= 40:
        return ident
    tokens = ident.split("_")
    keep = [t for t in tokens[:3]]
    for t in tokens[3:]:
        if any(c.isdigit() for c in t) or not t:
            break
        keep.append(t)
    return "_".join(keep)


def _hint(args: str) -> str:
    for rx in _HINTS:
        found = rx.findall(args)
        if found:  # the innermost functor (MulFunctor inside AUnaryFunctor) names the operation
            hint = found[-1] if "Functor" in found[-1] else found[0]
            return re.sub(r"_kernel_(?:cuda|impl)$", "", hint)
    words = [w for w in _WORD.findall(args) if w not in _NOISE]
    return _family(words[0]) if words else ""


def short_name(kernel: str) -> str:
    s = kernel.strip()
    for noise in ("<unnamed>::", "(anonymous namespace)::"):
        s = s.replace(noise, "")
    s = s.removeprefix("void ")
    ident, args = _split(s)
    base = ident.strip().split("::")[-1] or ident.strip()
    if base in _GENERIC:
        hint = _hint(args)
        base = base.removesuffix("_kernel") if hint else base
        out = f"{base}[{hint}]" if hint else base
    else:
        out = _family(base)
    return out if len(out) <= MAX_LEN else out[: MAX_LEN - 1] + "…"
