"""Run a fuzz program eagerly and compiled, and compare everything eager defines
(spec/testing.md, "What is compared").

`outcome(program, backend)` returns an `Outcome` (kind "ok", "ok-raise", or a failure kind);
`check(program, backend)` raises AssertionError with a paste-ready report on failure.
`reference(program)` runs eager once and `compare(program, backend, ref)` checks one backend
against it, so a run over several backends runs eager once per program (the soak).

Per call k (the compiled function is called for every call in order, so later calls go
through guards, recompiles and dynamic sizes), on inputs built twice by `make` (same values,
same strides):
- exceptions: eager raises -> the compiled call raises the same type (then the program
  stops: inputs after a raising call are not compared); eager returns -> compiled returns;
- structure: the same containers (tuple, list, torch.return_types.*), Python numbers equal;
- each output tensor: dtype, shape, values (TOLERANCE), strides (ignoring size-1 dims,
  and not for a tensor with no element: spec/testing.md says why);
- aliasing: which inputs each output *is* and shares storage with, and which outputs share
  storage with each other;
- inputs after the call: shape, strides, dtype, values.
"""

import contextlib
import warnings
from dataclasses import dataclass
from typing import Optional

import torch

import refcomp
from tests.fuzz.program import MUST_CAPTURE

# (rtol, atol) by the compared tensor's dtype.  float32 allows reassociated reductions over
# a few thousand elements; half types allow an ulp of the half type on each op of a chain
# (a kernel computes each in float32, by its own formula, and rounds).
TOLERANCE = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-4),
             torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}
# Half-precision values inside a kernel are computed in float32 and rounded after each op
# (spec/codegen.md), each maybe an ulp of the half type off eager's: so every float output gets at
# least the tolerance of the least precise float dtype the program uses (its inputs', and
# half/bfloat16 named in its source).
HALF_NAMES = {torch.float16: ("float16", "half()"), torch.bfloat16: ("bfloat16",)}
FAIL_KINDS = ("crash", "missed-raise", "wrong-exception", "structure", "dtype", "shape",
              "value", "stride", "alias", "input", "capture")


@dataclass
class Outcome:
    kind: str               # "ok", "ok-raise" or one of FAIL_KINDS
    detail: str = ""
    call: int = 0

    @property
    def failed(self):
        return self.kind not in ("ok", "ok-raise")

    def signature(self):
        """A short class key for counting distinct failures in a soak run."""
        if self.kind in ("crash", "wrong-exception", "missed-raise"):
            first = self.detail.splitlines()[0] if self.detail else ""
            return f"{self.kind}: {''.join(c for c in first if not c.isdigit())[:90]}"
        return self.kind


def _leaves(x, path="out"):
    """(path, leaf) pairs and a structure description of a returned value."""
    if isinstance(x, (tuple, list)):
        kind = type(x).__module__ + "." + type(x).__qualname__
        pairs, shape = [], []
        for i, item in enumerate(x):
            p, s = _leaves(item, f"{path}[{i}]")
            pairs += p
            shape.append(s)
        return pairs, (kind, tuple(shape))
    if isinstance(x, torch.Tensor):
        return [(path, x)], "tensor"
    return [(path, x)], type(x).__name__


def _storage(t):
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


def _strides(t):
    return tuple(st for sz, st in zip(t.shape, t.stride()) if sz > 1)


def program_tolerance(program):
    """(rtol, atol) floor for float outputs: the least precise float dtype in the program
    (its inputs', and the half types named in its source).  A float32 input counts too:
    a float64 output computed from float32 values (`v.sum(dtype=torch.float64)` of a
    normalized float32 `v`, 0 in exact arithmetic) carries float32 rounding (soak seed
    1527, program 3179: eager 8.9e-8, refcomp 5.4e-7; corpus
    float64_sum_of_float32_values_tolerance)."""
    used = {spec[1] for call in program.calls for spec in call}
    tol = TOLERANCE[torch.float32] if "float32" in used else (0.0, 0.0)
    for dtype, names in HALF_NAMES.items():
        if str(dtype).split(".")[1] in used or any(n in program.source for n in names):
            tol = max(tol, TOLERANCE[dtype])
    return tol


def _compare_tensor(name, got, want, strides=True, floor=(0.0, 0.0)):
    if got.dtype != want.dtype:
        return Outcome("dtype", f"{name}: dtype {got.dtype}, eager {want.dtype}")
    if got.shape != want.shape:
        return Outcome("shape", f"{name}: shape {tuple(got.shape)}, eager {tuple(want.shape)}")
    rtol, atol = TOLERANCE.get(want.dtype, (0, 0))
    if want.dtype.is_floating_point:
        rtol, atol = max(rtol, floor[0]), max(atol, floor[1])
    try:
        if not torch.equal(got, want):  # equal: assert_close passes (the common case)
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                       check_stride=False)
    except AssertionError as e:
        return Outcome("value", f"{name}: {e}\ncompiled: {got}\neager:    {want}")
    if strides and _strides(got) != _strides(want):
        return Outcome("stride", f"{name}: strides {got.stride()}, eager {want.stride()}"
                                 f" (shape {tuple(want.shape)})")
    return None


def _compare_results(got, want, args_c, args_e, relax, floor):
    pairs_g, shape_g = _leaves(got)
    pairs_e, shape_e = _leaves(want)
    if shape_g != shape_e:
        return Outcome("structure", f"returned {shape_g}, eager {shape_e}")
    inputs_e = {_storage(a) for a in args_e} - {None}    # storages of eager's inputs
    for (name, g), (_, w) in zip(pairs_g, pairs_e):
        if isinstance(w, torch.Tensor):
            fresh = _storage(w) not in inputs_e
            strides = ("check:fresh_output_strides" not in relax if fresh
                       else "check:output_views_of_inputs" not in relax)
            if w.numel() == 0:
                strides = False  # eager leaves them undefined (spec/testing.md)
            bad = _compare_tensor(name, g, w, strides=strides, floor=floor)
            if bad:
                return bad
        elif isinstance(w, float) and isinstance(g, float):
            tol = max(1e-4, floor[0])
            if not (g == w or abs(g - w) <= tol * max(1.0, abs(w)) or (g != g and w != w)):
                return Outcome("value", f"{name}: {g!r}, eager {w!r}")
        elif type(g) is not type(w) or g != w:
            return Outcome("value", f"{name}: {g!r} ({type(g).__name__}),"
                                    f" eager {w!r} ({type(w).__name__})")
    # Aliasing: identity with inputs, storage shared with inputs and between outputs.
    tens_g = [(n, t) for n, t in pairs_g if isinstance(t, torch.Tensor)]
    tens_e = [(n, t) for n, t in pairs_e if isinstance(t, torch.Tensor)]

    def structure(tens, args):
        facts = []
        for name, t in tens:
            s = _storage(t)
            facts.append((name, "is input", [j for j, a in enumerate(args) if t is a]))
            facts.append((name, "shares storage with input",
                          [j for j, a in enumerate(args) if s is not None and s == _storage(a)]))
            facts.append((name, "shares storage with", [m for m, u in tens if m != name
                                                         and s is not None and s == _storage(u)]))
        return facts

    view_of_input = {name: bool(inputs_e) and _storage(t) in inputs_e for name, t in tens_e}
    for fg, fe in zip(structure(tens_g, args_c), structure(tens_e, args_e)):
        if fe[1] != "shares storage with":     # a fact about an output and the inputs
            if view_of_input[fe[0]] and "check:output_views_of_inputs" in relax:
                continue   # KNOWN_OPEN: eager's output is a view of an input
            if not view_of_input[fe[0]] and "check:fresh_output_aliases_input" in relax:
                continue   # KNOWN_OPEN: eager's output is fresh, refcomp's may alias an input
        elif "check:outputs_alias_each_other" in relax:
            continue   # KNOWN_OPEN: outputs that are views of each other may be copies
        if fg != fe:
            return Outcome("alias", f"{fg[0]} {fg[1]}: {fg[2]}, eager {fe[2]}")
    return None


def _compare_inputs(args_c, args_e, floor):
    for j, (c, e) in enumerate(zip(args_c, args_e)):
        name = f"input x{j} after the call"
        if c.shape != e.shape or c.dtype != e.dtype:
            return Outcome("input", f"{name}: {c.dtype}{tuple(c.shape)}, eager"
                                    f" {e.dtype}{tuple(e.shape)}")
        rtol, atol = TOLERANCE.get(e.dtype, (0, 0))
        if e.dtype.is_floating_point:
            rtol, atol = max(rtol, floor[0]), max(atol, floor[1])
        try:
            if not torch.equal(c, e):
                torch.testing.assert_close(c, e, rtol=rtol, atol=atol, equal_nan=True,
                                           check_stride=False)
        except AssertionError as err:
            return Outcome("input", f"{name}: {err}\ncompiled: {c}\neager:    {e}")
        if _strides(c) != _strides(e):
            return Outcome("input", f"{name}: strides {c.stride()}, eager {e.stride()}")
    return None


def _autocast(dtype):
    return (torch.autocast("cpu", dtype=dtype) if dtype is not None
            else contextlib.nullcontext())


@dataclass
class Reference:
    """What eager did on each call of a program: per call, its inputs after the call and
    its result or exception.  Computed once and compared with every backend (each call
    starts from a seeded generator: `_seed`)."""

    calls: list             # per call: (args after the call, result, exception or None)
    autocast: object = None


def _seed(k: int) -> None:
    """Seed torch's generator before call `k`, eager's and compiled alike: programs may
    draw random numbers, and a compiled call must draw eager's (spec/tracer.md, "Random
    draws")."""
    torch.manual_seed(1000 + k)


def reference(program, autocast=None) -> Reference:
    """Run `program` eagerly on fresh inputs, call after call, up to its first raise."""
    f_eager = program.function("fuzz program (eager)")
    calls = []
    for k in range(len(program.calls)):
        args_e = program.args(k)
        with warnings.catch_warnings(), _autocast(autocast):
            warnings.simplefilter("ignore")
            _seed(k)
            try:
                want, err_e = f_eager(*args_e), None
            except Exception as e:
                want, err_e = None, e
        calls.append((args_e, want, err_e))
        if err_e is not None:
            break
    return Reference(calls, autocast)


def compare(program, backend, ref: Reference, relax=frozenset(), dynamic=None) -> Outcome:
    """Run `program` compiled with `backend` (and `dynamic`: None, the default, is
    automatic dynamic) on fresh inputs and compare each call with eager's `ref`; the first
    difference found.  `relax`: the "check:..." KNOWN_OPEN entries (tests/fuzz/gen.py) to
    skip."""
    f = program.function()
    compiled = refcomp.compile(f, backend=backend, dynamic=dynamic)
    raised = False
    floor = program_tolerance(program)
    if ref.autocast is not None:
        floor = max(floor, TOLERANCE[ref.autocast])
    for k, (args_e, want, err_e) in enumerate(ref.calls):
        args_c = program.args(k)
        with warnings.catch_warnings(), _autocast(ref.autocast):
            warnings.simplefilter("ignore")
            _seed(k)
            try:
                got, err_c = compiled(*args_c), None
            except Exception as e:
                got, err_c = None, e
        if err_e is not None:
            raised = True
            if err_c is None:
                return Outcome("missed-raise", f"eager raised {type(err_e).__name__}: {err_e}"
                                               " but the compiled call returned", k)
            if type(err_c) is not type(err_e):
                return Outcome("wrong-exception",
                               f"{type(err_c).__name__}: {err_c}\n(eager raised"
                               f" {type(err_e).__name__}: {err_e})", k)
            break
        if err_c is not None:
            return Outcome("crash", f"{type(err_c).__name__}: {err_c}", k)
        bad = (_compare_results(got, want, args_c, args_e, relax, floor)
               or _compare_inputs(args_c, args_e, floor))
        if bad:
            bad.call = k
            return bad
    if not raised:
        missed = capture_failure(program)
        if missed:
            return missed
    return Outcome("ok-raise" if raised else "ok")


def capture_failure(program) -> Optional[Outcome]:
    """The explain() oracle: a write through a view that refcomp must capture (a line
    tests/fuzz/gen.py marks MUST_CAPTURE) is no graph break.  Traced on the first call's
    inputs (static sizes), once per program."""
    lines = {i + 1 for i, line in enumerate(program.source.splitlines())
             if line.endswith(MUST_CAPTURE)}
    if not lines:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _seed(0)
        report = refcomp.explain(program.function(), *program.args(0), backend="eager")
    for b in report.break_reasons:
        where = b.get("where") or ""
        line = where.rsplit(":", 1)[-1]
        if where.startswith("<fuzz program") and line.isdigit() and int(line) in lines:
            return Outcome("capture", f"a write through a view marked {MUST_CAPTURE.strip()!r}"
                                      f" breaks: [{b['id']}] {b['reason']} at line {line}")
    return None


def outcome(program, backend, relax=frozenset(), dynamic=None, autocast=None) -> Outcome:
    """Run `program` eagerly and compiled with `backend` (and `dynamic`: None, the
    default, is automatic dynamic); the first difference found.
    `relax`: the "check:..." KNOWN_OPEN entries (tests/fuzz/gen.py) to skip.
    `autocast`: a dtype: both run under `torch.autocast("cpu", dtype=autocast)`, and
    float outputs get that dtype's tolerance."""
    return compare(program, backend, reference(program, autocast), relax, dynamic)


def report(program, backend, out: Outcome) -> str:
    return (f"refcomp backend {backend!r} differs from eager at call {out.call}"
            f" [{out.kind}]: {out.detail}\n\n--- program (corpus format) ---\n"
            + program.render(backends=[backend], symptom=out.signature())
            + "\n--- standalone repro ---\n" + program.snippet(backend))


def check(program, backend, relax=frozenset(), dynamic=None, autocast=None):
    out = outcome(program, backend, relax, dynamic, autocast)
    assert not out.failed, report(program, backend, out)
    return out
