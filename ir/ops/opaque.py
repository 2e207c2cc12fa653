"""The opaque op `aten`: one call of a torch callable the IR has no rule for.

Owns: the `aten` OpDef and the hook through which it is executed.  Spec: spec/ops.md,
"Extern", and spec/ir.md.

The IR knows nothing of torch (tests/test_layering.py), so an `aten` node carries
what is needed to *name* the call, never to understand it:

    %2 = aten %0, %1 {fn="torch.addmm", args="T[0], T[1], T[1], beta=0.5",
                      results="f32[3,3]"} : f32[3,3]

- `fn`: the callable's dotted path from the `torch` module ("torch.addmm",
  "torch.Tensor.addcmul", "torch._C._nn.gelu", "torch.ops.aten.add.Tensor").
- `args`: the call's arguments in Python call syntax, each tensor operand written
  `T[i]` (operand i of the node); everything else is a constant literal (numbers,
  strings, None, lists, tuples, `torch.float32`-style dtypes/layouts/memory formats,
  `torch.device('cpu')`, `slice(...)`, `complex(re, im)`, `...`).
- `results`: the declared result types, `;`-separated.  They come from torch's own
  meta kernels when the node is traced (the IR cannot infer them); the type rule
  returns them, so the verifier checks the node's declared types against them.
- `mutates`: operand indices the call writes in torch (`Tensor(a!)` arguments,
  `out=`).  The node is functional: it never writes its operands; the written
  operands' new values are extra results after the call's own results, in order.
- `views`: result indices that torch returns as views of an operand; the node's
  result is a copy (value semantics; the frontend keeps track of the aliasing).
- `rng`: the call draws from, seeds or restores torch's default generator
  (`torch.bernoulli`, `torch.manual_seed`, `torch.set_rng_state`): its effect is on the
  random stream, so a rerun of the graph (double backward) would change it.
- `layouts`: the strides ATen must see operands in (`"0:1,4; 2:12,1"`: operand 0 with
  strides (1, 4), ...), eager's where they are not row-major: ATen's kernels pick paths
  by layout, so the runner lays the operands out as eager's were (Note [Operands in
  eager's layout], refcomp/tracer/eager_layout.py).  A call that draws (`rng`) gets the
  operands it does not name row-major (Note [Random draws in eager's layout]).
- `results="none"`: the call returns nothing the graph uses (`torch.manual_seed`
  returns a Generator, `torch.set_rng_state` None); the node's one result is an empty
  `u8[0]` token, and the node exists for its effect.

The node is an EXTERN op: never fused, never part of a kernel; the memory plan
leaves its results to whoever runs it.  It has effects: never removed, merged or
folded, because a call may raise on its operands' data as eager would (`take` out of
range, `linalg.cholesky` of a matrix that is not positive definite) even when its
result is unused.  Its reference semantics are torch itself:
`ref` calls the executor registered by `set_executor` (codegen/opaque.py registers
one that runs the call with ATen on CPU tensors made from the numpy arrays).  With no
executor registered (plain `ir` use without codegen) running an `aten` node raises.
"""

from __future__ import annotations

from typing import Callable, Optional

from ir.ops.registry import EXTERN, defop

_EXECUTOR: Optional[Callable] = None


def set_executor(fn: Callable) -> None:
    """Register `fn(arrays, **attrs) -> array | tuple of arrays`, the numpy-level runner."""
    global _EXECUTOR
    _EXECUTOR = fn


# `results="none"`: an effect-only call; the node's result is this empty token.
NO_RESULTS = "none"


def token_type():
    from ir.types import TensorType, u8

    return TensorType(u8, (0,), "cpu")


def parse_results(text: str) -> tuple:
    """The TensorTypes written in a `results` attribute ("f32[3,4]; i64[3]"; "none": the
    token of an effect-only call)."""
    from ir.parser import Parser

    if text.strip() == NO_RESULTS:
        return (token_type(),)
    types = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            raise ValueError(f"aten: empty result type in results={text!r}")
        try:
            p = Parser(part)
            t = p.type()
        except Exception as e:  # a ParseError: say which attribute held it
            raise ValueError(f"aten: cannot read result type {part!r}: {e}") from None
        if p.tok.kind != "eof":
            raise ValueError(f"aten: cannot read result type {part!r}")
        types.append(t)
    return tuple(types)


def format_results(types) -> str:
    return "; ".join(str(t) for t in types)


def _infer(types, fn, args, results, mutates, views, rng=False, layouts=""):
    """The declared results; `mutates` names operands (their new values come last)."""
    out = parse_results(results)
    if not fn:
        raise TypeError("aten needs fn= naming the torch callable")
    for i, strides in parse_layouts(layouts).items():
        if not 0 <= i < len(types) or len(strides) != len(types[i].shape):
            raise TypeError(f"aten {fn}: layout {i}:{strides} does not fit its operand")
    if results.strip() == NO_RESULTS and (mutates or views):
        raise TypeError(f"aten {fn}: results=\"none\" writes and views nothing")
    for i in mutates:
        if not 0 <= i < len(types):
            raise TypeError(f"aten {fn}: mutates operand {i}, but it has {len(types)}")
        if out[len(out) - len(mutates) + list(mutates).index(i)].shape != types[i].shape:
            raise TypeError(f"aten {fn}: the new value of operand {i} must keep its shape")
    for j in views:
        if not 0 <= j < len(out) - len(mutates):
            raise TypeError(f"aten {fn}: view result {j} out of range")
    return out if len(out) != 1 else out[0]


def parse_layouts(text: str) -> dict:
    """{operand index: strides} from a `layouts` attribute ("0:1,4; 2:12,1")."""
    out = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        try:
            i, strides = part.split(":")
            out[int(i)] = tuple(int(s) for s in strides.split(","))
        except ValueError:
            raise ValueError(f"aten: cannot read layout {part.strip()!r} (want"
                             " 'operand:stride,stride,...')") from None
    return out


def _ref(*arrays, fn, args, results, mutates, views, rng=False, layouts="",
         operand_dtypes=None):
    """`operand_dtypes`: each operand's IR dtype where the interpreter knows it (a bf16
    operand is a float32 array; torch must see it as bf16, as eager does)."""
    if _EXECUTOR is None:
        raise RuntimeError(f"aten {fn}: an opaque torch call needs torch to run; import"
                           " codegen.opaque to register its executor")
    return _EXECUTOR(arrays, fn=fn, args=args, results=results, mutates=mutates, views=views,
                     rng=rng, layouts=layouts, operand_dtypes=operand_dtypes)


ATEN = defop(
    "aten", EXTERN, operands=("xs",), variadic=True,
    attrs={"fn": "str", "args": ("str", ""), "results": "str", "mutates": ("ints", ()),
           "views": ("ints", ()), "rng": ("bool", False), "layouts": ("str", "")},
    infer=_infer, ref=_ref, effects=True,
    doc="one call of a torch callable with no IR rule, run by ATen (see ir/ops/opaque.py)")
