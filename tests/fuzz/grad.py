"""Gradient mode of the torch-level fuzzer (spec/testing.md, "Gradients").

A fuzz program (tests/fuzz/gen.py, `programs()`) is run with its float32/float64 inputs
made leaves that require grad; eager and compiled each on their own fresh inputs (same
values, same strides), each call seeded as in the forward runner (`runner._seed`).  Per
call k:

- the forward is compared as the forward runner compares it (exceptions, structure,
  values, strides, aliasing, inputs after the call), plus which outputs require grad;
- every floating output that requires grad is reduced to one scalar with fixed random
  weights, `sum((out.double() * w).sum())` (w drawn from a generator seeded by the call
  and the output's position: the same for eager and compiled), and
  `torch.autograd.grad(loss, leaves, allow_unused=True)` is called;
- exceptions of that backward: eager raises -> compiled raises the same type;
- each leaf's gradient: None where eager's is None, else dtype, shape and values (the
  forward runner's tolerance by dtype, at least the program's floor; strides are not
  compared: `autograd.grad` returns what the backward formula produced, eager's layout is
  no contract there).  Where a float32 gradient's values differ, the float64 run judges
  (Note [Gradients judged in float64]).

Note [Gradients judged in float64]: an element of a gradient that is 0 in exact
arithmetic but made of large terms (var's 2 (x - mean) / N on values near 1e4, where
x is near the mean) is rounding noise of the size of those terms in any float32
computation, eager's and refcomp's alike, and an elementwise tolerance cannot tell it from
a wrong value (gradient soak seed 2112, program 1,135: eager 0.16 off the float64 answer,
refcomp 0.09, at gradients of 3.5e4).  So a float32 gradient that fails the comparison is
judged against the same program run on float64 copies of the inputs, as "Ties" in
spec/testing.md judges exact ties: it passes when eager is itself accurate there (its
error is at most 1e-3 of the largest float64 gradient) and refcomp's error is at most
4x eager's plus 1e-6 of that largest gradient.  Programs that draw random numbers (the
float64 run draws other numbers) or whose float64 run fails or differs in structure are
not judged: the mismatch stands.

float16/bfloat16 inputs stay plain tensors (their gradients would compare rounding of a
half-precision backward).  A program that mutates an input in place raises in eager
("a leaf Variable that requires grad is being used in an in-place operation"): the
compiled call must raise the same type, as for any other raise.

`grad_reference(program)` runs eager once; `grad_compare(program, backend, ref)` checks one
backend against it; `grad_outcome` does both and `grad_check` raises with a report.
"""

import warnings
from dataclasses import dataclass

import torch

import refcomp
from tests.fuzz.runner import (
    Outcome,
    _compare_inputs,
    _compare_results,
    _compare_tensor,
    _leaves,
    _seed,
    program_tolerance,
)

GRAD_DTYPES = (torch.float32, torch.float64)
# Open gradient-mode classes relaxed while their corpus file is open on the backend (as
# KNOWN_OPEN in tests/fuzz/gen.py; tests/fuzz/test_fuzz.py checks the files are open):
# feature -> (corpus file, the start of eager's backward error that is then not required).
GRAD_KNOWN_OPEN: dict = {}
GRAD_FAIL_KINDS = ("grad-flag", "grad-crash", "grad-missed-raise", "grad-wrong-exception",
                   "grad-none", "grad-dtype", "grad-shape", "grad-value")


def grad_relaxed(backend) -> frozenset:
    """GRAD_KNOWN_OPEN features whose corpus file is open on `backend`."""
    from tests.fuzz.gen import corpus_entry

    out = set()
    for feature, (name, _) in GRAD_KNOWN_OPEN.items():
        entry = corpus_entry(name)
        if entry.STATUS == "open" and backend in entry.BACKENDS:
            out.add(feature)
    return frozenset(out)


def differentiable(program) -> bool:
    """Whether some input of the program's calls gets requires_grad (float32/float64)."""
    return any(spec[1] in ("float32", "float64") for call in program.calls for spec in call)


def grad_args(program, k):
    """Fresh inputs of call k, float32/float64 ones leaves requiring grad."""
    args = program.args(k)
    for a in args:
        if a.dtype in GRAD_DTYPES:
            a.requires_grad_(True)
    return args


def _weights(k, i, t):
    g = torch.Generator().manual_seed(7919 * (k + 1) + i)
    return torch.randn(t.shape, generator=g, dtype=torch.float64)


def _loss(result, k):
    """The scalar of call k's result: each floating output that requires grad, weighted;
    None if no output requires grad."""
    terms = []
    for i, (_, t) in enumerate(_leaves(result)[0]):
        if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.requires_grad:
            terms.append((t.double() * _weights(k, i, t)).sum())
    return sum(terms) if terms else None


def _backward(result, args, k):
    """(gradients of the leaves, exception): gradients is None when nothing requires
    grad."""
    leaves = [a for a in args if a.requires_grad]
    loss = _loss(result, k)
    if loss is None or not leaves:
        return None, None
    try:
        return torch.autograd.grad(loss, leaves, allow_unused=True), None
    except Exception as e:
        return None, e


def _run(fn, program, k):
    """Call k of `fn` on fresh grad inputs: (args, result, forward exception, grads,
    backward exception)."""
    args = grad_args(program, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _seed(k)
        try:
            result = fn(*args)
        except Exception as e:
            return args, None, e, None, None
        grads, err = _backward(result, args, k)
    return args, result, None, grads, err


@dataclass
class GradReference:
    calls: list   # per call: (args, result, forward exception, grads, backward exception)


def grad_reference(program) -> GradReference:
    f_eager = program.function("fuzz program (eager, grad)")
    calls = []
    for k in range(len(program.calls)):
        calls.append(_run(f_eager, program, k))
        if calls[-1][2] is not None or calls[-1][4] is not None:
            break
    return GradReference(calls)


def _exception(kind_prefix, err_c, err_e, k):
    if err_c is None:
        return Outcome(f"{kind_prefix}missed-raise", f"eager raised {type(err_e).__name__}:"
                                                     f" {err_e} but the compiled call returned", k)
    if type(err_c) is not type(err_e):
        return Outcome(f"{kind_prefix}wrong-exception",
                       f"{type(err_c).__name__}: {err_c}\n(eager raised"
                       f" {type(err_e).__name__}: {err_e})", k)
    return None


RANDOM_CALLS = ("rand", "dropout", "bernoulli", "normal", "poisson", "rrelu")


def _float64_grads(program, k):
    """The gradients of call k's leaves with float32 inputs run as float64 (Note [Gradients
    judged in float64]), or None where that run cannot judge."""
    if any(name in program.source for name in RANDOM_CALLS):
        return None
    args = [a.detach().to(torch.float64).requires_grad_(True) if a.dtype == torch.float32
            else a for a in grad_args(program, k)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _seed(k)
        try:
            grads, err = _backward(program.function("fuzz program (float64)")(*args), args, k)
        except Exception:
            return None
    return None if err is not None else grads


def _judged_in_float64(gc, ge, truth) -> bool:
    """Note [Gradients judged in float64]."""
    if truth is None or truth.shape != ge.shape or not truth.numel():
        return False
    scale = truth.abs().max()
    err_e = (ge.double() - truth).abs().max()
    err_c = (gc.double() - truth).abs().max()
    return bool(torch.isfinite(scale) and err_e <= 1e-3 * scale and
                err_c <= 4 * err_e + 1e-6 * scale)


def _compare_grads(grads_c, grads_e, args_e, floor, float64=None):
    """`float64`: a callable giving the float64 run's gradients (Note [Gradients judged in
    float64]), called only where a float32 gradient's values differ."""
    names = [f"x{j}" for j, a in enumerate(args_e) if a.requires_grad]
    truth = []  # [the float64 run's gradients] once asked for
    for j, (name, gc, ge) in enumerate(zip(names, grads_c, grads_e)):
        if (gc is None) != (ge is None):
            return Outcome("grad-none", f"d loss / d {name}: {'None' if gc is None else 'a tensor'}"
                                        f", eager {'None' if ge is None else 'a tensor'}")
        if ge is None:
            continue
        # the forward's tensor comparison (dtype, shape, values by dtype and floor);
        # strides are not compared: autograd.grad returns what the backward formula made
        bad = _compare_tensor(f"d loss / d {name}", gc, ge, strides=False, floor=floor)
        if bad and bad.kind == "value" and ge.dtype == torch.float32 and float64:
            truth = truth or [float64()]
            if truth[0] is not None and _judged_in_float64(gc, ge, truth[0][j]):
                continue
        if bad:
            bad.kind = "grad-" + bad.kind
            return bad
    return None


def grad_compare(program, backend, ref: GradReference, relax=frozenset(),
                 dynamic=None) -> Outcome:
    f = program.function("fuzz program (grad)")
    compiled = refcomp.compile(f, backend=backend, dynamic=dynamic)
    floor = program_tolerance(program)
    raised = False
    for k, (args_e, want, err_e, grads_e, berr_e) in enumerate(ref.calls):
        args_c, got, err_c, grads_c, berr_c = _run(compiled, program, k)
        if err_e is not None:
            bad = _exception("", err_c, err_e, k)
            if bad:
                return bad
            raised = True
            break
        if err_c is not None:
            return Outcome("crash", f"{type(err_c).__name__}: {err_c}", k)
        bad = (_compare_results(got, want, args_c, args_e, relax, floor)
               or _compare_inputs([a.detach() for a in args_c],
                                  [a.detach() for a in args_e], floor))
        if bad is None:
            flags_c = [getattr(t, "requires_grad", None) for _, t in _leaves(got)[0]]
            flags_e = [getattr(t, "requires_grad", None) for _, t in _leaves(want)[0]]
            if flags_c != flags_e:
                bad = Outcome("grad-flag", f"outputs requiring grad: {flags_c}, eager"
                                           f" {flags_e}")
        if bad is None and berr_e is not None:
            bad = _exception("grad-", berr_c, berr_e, k)
            if bad is not None and bad.kind == "grad-missed-raise" and any(
                    str(berr_e).startswith(GRAD_KNOWN_OPEN[f][1]) for f in relax
                    if f in GRAD_KNOWN_OPEN):
                return Outcome("ok-raise", "relaxed: " + bad.detail, k)  # KNOWN_OPEN
            if bad is None:
                raised = True
                break
        if bad is None and berr_c is not None:
            bad = Outcome("grad-crash", f"{type(berr_c).__name__}: {berr_c}")
        if bad is None and (grads_c is None) != (grads_e is None):
            bad = Outcome("grad-flag", f"compiled grads {grads_c}, eager {grads_e}")
        if bad is None and grads_e is not None:
            bad = _compare_grads(grads_c, grads_e, args_e, floor,
                                 lambda: _float64_grads(program, k))
        if bad:
            bad.call = k
            return bad
    return Outcome("ok-raise" if raised else "ok")


def signature(out: Outcome) -> str:
    """A class key for a soak's counts: the kind, and for an exception its first line."""
    if out.kind in ("grad-crash", "grad-wrong-exception", "grad-missed-raise"):
        first = out.detail.splitlines()[0] if out.detail else ""
        return f"{out.kind}: {''.join(c for c in first if not c.isdigit())[:90]}"
    return out.signature()


def grad_outcome(program, backend, relax=frozenset(), dynamic=None) -> Outcome:
    return grad_compare(program, backend, grad_reference(program), relax, dynamic)


def grad_report(program, backend, out: Outcome) -> str:
    return (f"refcomp backend {backend!r} differs from eager (gradient mode) at call"
            f" {out.call} [{out.kind}]: {out.detail}\n\n--- program (corpus format) ---\n"
            + program.render(grad=True, backends=[backend], symptom=signature(out)))


def grad_check(program, backend, relax=frozenset(), dynamic=None):
    out = grad_outcome(program, backend, relax, dynamic)
    assert not out.failed, grad_report(program, backend, out)
    return out
