"""Running the opaque `aten` op (ir/ops/opaque.py) with torch, on every backend.

Owns: the text form of an `aten` node's call (`encode_args` / `decode_args`: the
one definition of the `args` attribute's grammar), the callable's dotted name
(`callable_name` / `resolve`), and `make_runner`, the torch function one node runs.
Registers the runner with the eager backend's table (so the llvm and triton
runtimes, which run extern nodes through that table, get it too) and, as numpy
arrays in and out, with the reference interpreter (`ir.ops.opaque.set_executor`).
Must not know: the frontend.  Spec: spec/ops.md, "Extern".

A runner is functional: an operand the call writes in torch (`mutates`) is cloned
first, and its new value is returned after the call's results; a result torch
returns as a view of an operand (`views`) is copied, so no result of the node shares
memory with its operands (the memory plan and the kernels may reuse operand bytes).
"""

from __future__ import annotations

import ast
import math

import numpy as np
import torch

from codegen.torch_bridge import from_numpy, to_numpy
from ir.ops import opaque as ir_opaque

# Constants that appear in `args` by name: torch.<name> for these types.
_NAMED_TYPES = (torch.dtype, torch.layout, torch.memory_format)


class OpaqueArgsError(ValueError):
    """An `args` text (or a value to encode) outside the grammar."""


# --- names ----------------------------------------------------------------------------------
def callable_name(fn) -> str | None:
    """The dotted path from `torch` that resolves back to `fn`, or None."""
    if isinstance(fn, torch._ops.OpOverload):
        name = f"torch.ops.{fn.namespace}.{fn._opname}.{fn._overloadname}"
    elif isinstance(fn, torch._ops.OpOverloadPacket):
        name = f"torch.ops.{fn._qualified_op_name.replace('::', '.')}"
    else:
        owner = getattr(fn, "__objclass__", None)
        if owner is not None:  # a method descriptor of torch.Tensor / TensorBase
            name = f"torch.Tensor.{fn.__name__}"
        else:
            module = getattr(fn, "__module__", None) or ""
            fname = getattr(fn, "__name__", None)
            if not fname or not (module == "torch" or module.startswith("torch.")):
                return None
            name = f"{module}.{fname}"
            if getattr(fn, "__qualname__", "").startswith("_VariableFunctionsClass.") and \
                    getattr(torch, fname, None) is not fn:
                # torch._VF.x where `torch.x` is the Python wrapper that calls it
                # (torch.broadcast_tensors, torch.einsum): name the C function itself.
                name = f"torch._C._VariableFunctions.{fname}"
    try:
        return name if resolve(name) is fn or resolve(name) == fn else None
    except (AttributeError, OpaqueArgsError):
        return None


def resolve(name: str):
    """The torch callable a dotted `fn` attribute names."""
    parts = name.split(".")
    if parts[0] != "torch":
        raise OpaqueArgsError(f"aten fn {name!r} does not start with 'torch.'")
    obj = torch
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


# --- the args grammar -------------------------------------------------------------------------
def encode_args(args, kwargs, operand_index) -> str:
    """Call-syntax text for `args`/`kwargs`; `operand_index(x)` gives a tensor's T-index
    (or None when `x` is not an operand)."""
    def enc(v) -> str:
        i = operand_index(v)
        if i is not None:
            return f"T[{i}]"
        if v is Ellipsis:
            return "..."
        if v is None or isinstance(v, (bool, str)):
            return repr(v)
        if isinstance(v, int):
            return repr(int(v))
        if isinstance(v, float):
            if math.isnan(v):
                return "nan"
            if math.isinf(v):
                return "inf" if v > 0 else "-inf"
            return repr(v)
        if isinstance(v, complex):
            return f"complex({enc(v.real)}, {enc(v.imag)})"
        if isinstance(v, _NAMED_TYPES):
            name = str(v).split(".")[-1]
            if getattr(torch, name, None) != v:
                raise OpaqueArgsError(f"{v!r} has no torch.<name>")
            return f"torch.{name}"
        if isinstance(v, torch.device):
            return f"torch.device({str(v)!r})"
        if isinstance(v, slice):
            return f"slice({enc(v.start)}, {enc(v.stop)}, {enc(v.step)})"
        if isinstance(v, list):
            return "[" + ", ".join(enc(x) for x in v) + "]"
        if type(v) is tuple or isinstance(v, torch.Size):
            items = [enc(x) for x in v]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        raise OpaqueArgsError(f"an argument of type {type(v).__name__} ({v!r})")

    parts = [enc(a) for a in args]
    for k, v in kwargs.items():
        if not k.isidentifier():
            raise OpaqueArgsError(f"keyword {k!r}")
        parts.append(f"{k}={enc(v)}")
    return ", ".join(parts)


def decode_args(text: str):
    """`bind(tensors) -> (args, kwargs)` for an `args` text (strict: constants only)."""
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError as e:
        raise OpaqueArgsError(f"args {text!r}: {e.msg}") from None
    if not isinstance(call, ast.Call):
        raise OpaqueArgsError(f"args {text!r}")
    arg_nodes = list(call.args)
    kw_nodes = [(k.arg, k.value) for k in call.keywords]
    if any(isinstance(a, ast.Starred) for a in arg_nodes) or any(k is None for k, _ in kw_nodes):
        raise OpaqueArgsError(f"args {text!r}: no * or ** unpacking")
    # Check the whole text once, then bind per call.
    for node in arg_nodes + [v for _, v in kw_nodes]:
        _eval(node, None, text)

    def bind(tensors):
        return ([_eval(a, tensors, text) for a in arg_nodes],
                {k: _eval(v, tensors, text) for k, v in kw_nodes})
    return bind


def _eval(node, tensors, text):
    def bad(what):
        return OpaqueArgsError(f"args {text!r}: {what}")

    if isinstance(node, ast.Constant):
        if node.value is Ellipsis or node.value is None or isinstance(
                node.value, (bool, int, float, str)):
            return node.value
        raise bad(f"constant {node.value!r}")
    if isinstance(node, ast.Name):
        if node.id in ("inf", "nan"):
            return float(node.id)
        raise bad(f"name {node.id!r}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _eval(node.operand, tensors, text)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
        raise bad("'-' of a non-number")
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, tensors, text) for e in node.elts)
    if isinstance(node, ast.List):
        return [_eval(e, tensors, text) for e in node.elts]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id == "T":
        if not (isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
            raise bad("T[...] needs an operand number")
        if tensors is None:
            return None
        if not 0 <= node.slice.value < len(tensors):
            raise bad(f"T[{node.slice.value}] but {len(tensors)} operands")
        return tensors[node.slice.value]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "torch":
        value = getattr(torch, node.attr, None)
        if isinstance(value, _NAMED_TYPES):
            return value
        raise bad(f"torch.{node.attr} is not a dtype, layout or memory format")
    if isinstance(node, ast.Call) and not node.keywords:
        f = node.func
        args = [_eval(a, tensors, text) for a in node.args]
        if isinstance(f, ast.Name) and f.id == "slice" and len(args) == 3:
            return slice(*args)
        if isinstance(f, ast.Name) and f.id == "complex" and len(args) == 2:
            return complex(*args)
        if isinstance(f, ast.Attribute) and f.attr == "device" and isinstance(
                f.value, ast.Name) and f.value.id == "torch" and len(args) == 1 \
                and isinstance(args[0], str):
            return torch.device(args[0])
    raise bad(f"unsupported expression {ast.unparse(node)!r}")


# --- running ---------------------------------------------------------------------------------
def flatten_results(out) -> list:
    """A call's results in order, sequences nested one level flattened (histogramdd's
    `(hist, (edges0, edges1))` -> [hist, edges0, edges1]): the node's results."""
    flat = []
    for r in out:
        flat.extend(r) if isinstance(r, (tuple, list)) else flat.append(r)
    return flat


def make_runner(attrs: dict):
    """The torch function for one `aten` node: tensors in, a tensor or a tuple out."""
    fn = resolve(attrs["fn"])
    bind = decode_args(attrs["args"])
    mutates = tuple(attrs.get("mutates") or ())
    views = frozenset(attrs.get("views") or ())
    n_results = len(ir_opaque.parse_results(attrs["results"]))
    token = attrs["results"].strip() == ir_opaque.NO_RESULTS
    draws = bool(attrs.get("rng"))
    layouts = ir_opaque.parse_layouts(attrs.get("layouts") or "")
    overlaps = frozenset(attrs.get("overlaps") or ())

    def run(*tensors):
        if draws:  # Note [Random draws in eager's layout]: every operand as eager's
            tensors = [_laid_out(t, layouts.get(i), i in mutates)
                       for i, t in enumerate(tensors)]
        elif layouts or mutates or not all(t.is_contiguous() for t in tensors):
            # Note [Operands in eager's layout]: eager's strides, else row-major unless
            # eager's operand overlaps itself (an expanded input ATen only reads)
            tensors = [_laid_out(t, layouts[i], i in mutates) if i in layouts else
                       (t.clone() if i in mutates else t) if i in overlaps else
                       _laid_out(t, None, i in mutates) for i, t in enumerate(tensors)]
        args, kwargs = bind(tensors)
        out = fn(*args, **kwargs)
        if token:  # an effect-only call (torch.manual_seed): its result is the token
            return torch.empty(0, dtype=torch.uint8)
        outs = [] if out is None else flatten_results(out) if isinstance(
            out, (tuple, list)) else [out]
        # A result torch returns as an operand or a view of one is copied: the traced
        # `views`, and (cheaply checked) any other, so that no result shares memory
        # with an operand on any call (refcomp/aliasing.py relies on it).
        outs = [o.clone(memory_format=torch.contiguous_format)
                if j in views or any(torch._C._is_alias_of(o, t) for t in tensors) else o
                for j, o in enumerate(outs)]
        outs += [tensors[i] for i in mutates]
        if len(outs) != n_results:
            raise RuntimeError(f"aten {attrs['fn']}: torch returned {len(outs)} results,"
                               f" the node declares {n_results}")
        return outs[0] if n_results == 1 else tuple(outs)

    return run


def _laid_out(t, strides, written: bool):
    """`t` with `strides` (None: row-major; a DimOrder: dense in that order): itself when
    it has them and the call does not write it, else a fresh copy (the node never
    writes its operands)."""
    if strides is None:
        if t.is_contiguous() and not written:
            return t
        return t.clone(memory_format=torch.contiguous_format)
    if isinstance(strides, ir_opaque.DimOrder):
        inverse = sorted(range(len(strides)), key=strides.__getitem__)
        if not written and t.permute(*strides).is_contiguous():
            return t
        return torch.empty([t.shape[d] for d in strides], dtype=t.dtype,
                           device=t.device).permute(*inverse).copy_(t)
    if tuple(t.stride()) == tuple(strides) and not written:
        return t
    out = torch.empty_strided(tuple(t.shape), strides, dtype=t.dtype, device=t.device)
    return out.copy_(t)


def _numpy_executor(arrays, operand_dtypes=None, **attrs):
    """The interpreter's runner: numpy arrays in and out, the call run by torch on CPU.
    Each operand becomes a tensor of its IR dtype (`operand_dtypes`, where the
    interpreter passes them): a bf16 operand is a float32 array, and torch must run the
    op on bf16 as eager does (corpus interp_aten_bf16_operands)."""
    types = ir_opaque.parse_results(attrs["results"])
    dtypes = operand_dtypes or [_dtype_of_array(np.asarray(a)) for a in arrays]
    # from_numpy copies (np.ascontiguousarray would turn a 0-d array into a 1-d one).
    tensors = [from_numpy(np.asarray(a), d, "cpu") for a, d in zip(arrays, dtypes)]
    out = make_runner(attrs)(*tensors)
    outs = list(out) if isinstance(out, tuple) else [out]
    # A result torch marks conjugated or negated lazily (fft.ifft's conj view) is
    # materialized first: numpy cannot read the bit.
    arrays = [to_numpy(o.resolve_conj().resolve_neg()).copy() for o in outs]
    for t, a in zip(types, arrays):  # a wrong declared dtype must not pass silently
        if a.dtype != t.dtype.np:
            raise RuntimeError(f"aten {attrs['fn']}: torch gives {a.dtype}, the node"
                               f" declares {t.dtype}")
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


def _dtype_of_array(a):
    from ir.types import from_numpy as ir_from_numpy

    return ir_from_numpy(a.dtype)


def _make_eager(node, attrs):
    return make_runner(attrs)


def register() -> None:
    from codegen.eager import EAGER_OPS

    EAGER_OPS["aten"] = _make_eager
    ir_opaque.set_executor(_numpy_executor)


register()
