"""The pass manager: run a pipeline of passes, verify after each, time, print, check semantics.

Owns: `run_pipeline`, `PassError`, and the semantic check used by tests
(`check_same_results`, `random_inputs`, `tolerance`).  Must not know any pass's internals:
a pass is a name in the registry or any callable `Graph -> Graph`.  Which passes run on
refcomp's graphs is chosen in ir/passes/pipelines.py.
Spec: spec/passes.md, "The pass manager".

    g = run_pipeline(g)                          # decompose, fold, simplify, scatters, cse, dce
    g = run_pipeline(g, ["fold", "dce"], print_after="all", check_semantics=True)
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from typing import Callable, Iterable, Optional, Sequence, TextIO, Union

import numpy as np

from ir.graph import Graph
from ir.interpreter import InterpreterError, run
from ir.passes.pipelines import DEFAULT_PIPELINE  # noqa: F401 (the default, chosen there)
from ir.passes.registry import get_pass
from ir.printer import print_graph
from ir.rewrite import RewriteStats, collect
from ir.types import DType, bf16, f16, f32, f64, is_symbolic, real_dtype, simplify_dim
from ir.verify import VerificationError, verify

PassLike = Union[str, Callable[[Graph], Graph]]


class PassError(RuntimeError):
    """A pass failed, broke the IR, mutated its input, or changed the program's results."""

    def __init__(self, pass_name: str, message: str):
        self.pass_name = pass_name
        super().__init__(f"pass {pass_name!r} {message}")


def run_pipeline(graph: Graph, passes: Sequence[PassLike] = DEFAULT_PIPELINE, *,
                 verify: bool = True, print_after: Union[str, Iterable[str]] = (),
                 check_semantics: bool = False, timings: Optional[dict] = None,
                 stats: Optional[dict] = None, stream: Optional[TextIO] = None,
                 seed: int = 0, around: Optional[Callable] = None) -> Graph:
    """Run `passes` in order on `graph` and return the result (the input is never changed).

    passes: names, callables `Graph -> Graph`, or one comma-separated string of names.

    verify: check the input, then the IR after every pass; a broken result raises
        `PassError` naming the pass, with the verifier's diagnostics.
    print_after: pass names (or "all") after which the IR is printed to `stream`
        (default stdout), stamped `# after dce (0.4 ms)`.
    check_semantics: run the interpreter before and after each pass on the same random
        inputs (and the same random stream) and raise `PassError` naming the pass on any
        difference beyond `tolerance(dtype)`; also checks the pass left its input intact.
    timings: a dict filled with pass name -> seconds (summed if a pass runs twice).
    stats: a dict filled with pass name -> `RewriteStats`: the rules of the rewrite
        engine (ir/rewrite.py) fired during that pass, counted by name, and each firing.
    around: `around(name)` is a context manager each pass runs inside (the compiler
        times each pass as its compile stage with it).
    """
    if isinstance(passes, str):  # "fold,dce", as on the command line
        passes = [p.strip() for p in passes.split(",") if p.strip()]
    if verify:
        _check_valid(graph, None)
    wanted = _print_set(print_after)
    out = stream if stream is not None else sys.stdout
    args = random_inputs(graph, np.random.default_rng(seed)) if check_semantics else None
    for item in passes:
        name, fn = _resolve(item)
        before_text = print_graph(graph) if check_semantics else None
        start = time.perf_counter()
        try:
            with collect() as fired, (around(name) if around else nullcontext()):
                result = fn(graph)
        except PassError:  # from a pipeline inside the pass: it already names its pass
            raise
        except Exception as e:  # name the pass, keep the cause
            raise PassError(name, f"failed: {type(e).__name__}: {e}") from e
        elapsed = time.perf_counter() - start
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + elapsed
        if stats is not None:
            _merge(stats.setdefault(name, RewriteStats()), fired)
        if not isinstance(result, Graph):
            raise PassError(name, f"returned {type(result).__name__}, not a Graph")
        if verify:
            _check_valid(result, name)
        if check_semantics:
            if print_graph(graph) != before_text:
                raise PassError(name, "mutated its input graph (passes must build a new one)")
            problem = check_same_results(graph, result, args, seed)
            if problem:
                raise PassError(name, f"changed the program's results: {problem}")
        if "all" in wanted or name in wanted:
            out.write(f"# after {name} ({elapsed * 1e3:.1f} ms)\n{print_graph(result)}")
        graph = result
    return graph


def _merge(into: RewriteStats, more: RewriteStats) -> None:
    into.sweeps += more.sweeps
    for firing in more.firings:
        into.add(firing)


def _resolve(item: PassLike) -> tuple[str, Callable[[Graph], Graph]]:
    if isinstance(item, str):
        return item, get_pass(item)
    if callable(item):
        return getattr(item, "__name__", repr(item)), item
    raise TypeError(f"a pass is a registered name or a callable Graph -> Graph, got {item!r}")


def _print_set(print_after) -> set[str]:
    if isinstance(print_after, str):
        return {print_after}
    return set(print_after)


def _check_valid(graph: Graph, pass_name: Optional[str]) -> None:
    """Raise if `graph` is invalid: a VerificationError for the input, a PassError after a pass."""
    diagnostics = verify(graph)
    if not diagnostics:
        return
    if pass_name is None:
        raise VerificationError(diagnostics, "input IR")
    body = "\n".join(f"  {d}" for d in diagnostics)
    raise PassError(pass_name, f"broke the IR ({len(diagnostics)} problem(s)):\n{body}")


# --- semantic check ---------------------------------------------------------------------
# Tolerances per dtype (rtol, atol): decompositions and rewrites may round differently from
# the composite's reference, by a few ulps per op.  Integers and bools compare exactly.
_TOLERANCE = {f16: (1e-2, 1e-2), bf16: (5e-2, 5e-2), f32: (1e-4, 1e-5), f64: (1e-9, 1e-12)}


def tolerance(dtype: DType) -> tuple[float, float]:
    """(rtol, atol) for comparing results of `dtype`; (0, 0) for integers and bools."""
    return _TOLERANCE.get(real_dtype(dtype), (0.0, 0.0))


def random_inputs(graph: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    """Arrays for `graph`'s inputs: floats (and complex parts) in [-2, 2], ints in [0, 3),
    random bools.

    Each size symbol is bound to a size in [2, 4].  Small non-negative ints keep index
    inputs (gather, embedding) in range for most shapes.
    """
    sizes: dict = {}
    arrays = []
    for value in graph.inputs:
        for dim in value.type.shape:
            for sym in (dim.free_symbols if is_symbolic(dim) else ()):
                sizes.setdefault(sym, int(rng.integers(2, 5)))
        shape = tuple(int(simplify_dim(d.subs(sizes)) if is_symbolic(d) else d)
                      for d in value.type.shape)
        dtype = value.type.dtype
        if dtype.is_float:
            array = rng.uniform(-2.0, 2.0, shape)
        elif dtype.is_complex:
            array = rng.uniform(-2.0, 2.0, shape) + 1j * rng.uniform(-2.0, 2.0, shape)
        elif dtype.is_bool:
            array = rng.random(shape) < 0.5
        else:
            array = rng.integers(0, 3, shape)
        arrays.append(np.asarray(array).astype(dtype.np))
    return arrays


def check_same_results(before: Graph, after: Graph, args: Sequence, seed: int = 0) -> str:
    """'' if `before` and `after` give the same outputs on `args`, else what differs.

    Both run with a generator seeded by `seed`, so random ops must keep their order.
    """
    try:
        expected = run(before, args, np.random.default_rng(seed))
    except InterpreterError as e:
        raise InterpreterError(f"check_semantics cannot run the graph on random inputs: {e}")
    actual = run(after, args, np.random.default_rng(seed))
    if len(expected) != len(actual):
        return f"{len(expected)} outputs became {len(actual)}"
    for k, (want, got, value) in enumerate(zip(expected, actual, before.outputs)):
        if want.shape != got.shape or want.dtype != got.dtype:
            return (f"output {k} was {want.dtype}{list(want.shape)},"
                    f" now {got.dtype}{list(got.shape)}")
        rtol, atol = tolerance(value.type.dtype)
        if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            bad = np.argwhere(~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
            where = tuple(int(i) for i in bad[0])
            return f"output {k} at index {where}: expected {want[where]}, got {got[where]}"
    return ""
