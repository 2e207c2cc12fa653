"""The triton backend on a GPU, from textual IR: for GPU machines whose Python is not 3.11.

refcomp traces on CPython 3.11 only (RB007 elsewhere).  So the graphs are traced here and
sent as textual IR; the GPU machine parses them, compiles each with the triton backend for
CUDA and compares it with the `interp` backend (numpy, CPU) on the same random inputs:

    python -m bench.gpu_graphs export DIR [--fuzz N] [--seed S] [--workloads a,b]  # here
    python -m bench.gpu_graphs check DIR [--only GLOB]              # on the GPU machine

`export` writes the graph each backend call receives (what `codegen.triton`'s
`compile_graph` would get) for the bench workloads (bench/workloads.py, inference rows) and
for N programs of the fuzzer's generator (tests/fuzz/gen.py), one `.rir` file per distinct
graph.  `check` prints one line per graph that fails or differs and the counts; graphs with
symbolic sizes or non-tensor inputs are skipped.  With TRITON_INTERPRET=1 and no GPU it runs
the same flow on the CPU (a check of this script).  spec/codegen.md, "Measured on an H100",
has a run's numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import torch


def export(out: Path, n_fuzz: int, seed_value: int, workloads=None) -> int:
    import refcomp
    from bench.workloads import WORKLOADS
    from codegen.backends import Backend, get_backend, register_backend
    from ir.printer import print_graph

    captured: list = []
    interp = get_backend("interp")

    def capture(graph, options):
        captured.append(print_graph(graph))
        return interp.compile_graph(graph, {})

    register_backend(Backend("graph-export", capture))
    out.mkdir(parents=True, exist_ok=True)
    seen: set = set()

    def keep(prefix):
        for text in captured:
            if text not in seen:
                seen.add(text)
                (out / f"{prefix}_{len(seen):04d}.rir").write_text(text)
        captured.clear()

    for name, w in WORKLOADS.items():
        if not w.train and (workloads is None or name in workloads):
            torch.manual_seed(0)
            refcomp.compile(w.fn, backend="graph-export")(*w.make_inputs())
            keep(name)
    if n_fuzz:
        from hypothesis import HealthCheck, Phase, given, seed, settings

        from tests.fuzz.gen import programs
        from tests.fuzz.runner import outcome

        @seed(seed_value)
        @settings(max_examples=n_fuzz, deadline=None, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(programs("triton", max_statements=6))
        def collect(program):
            try:
                outcome(program, "graph-export")
            except Exception:  # the program's own failure: only its graphs matter here
                pass
            keep("fuzz")

        collect()
    print(f"{len(seen)} graphs in {out}")
    return 0


def _on_device(graph, device: str) -> None:
    """Retype a graph traced on the CPU for `device` (values and device attributes)."""
    from ir.types import TensorType

    for node in graph.nodes:
        if "device" in node.attrs:
            node.attrs["device"] = device
        if node.body is not None:
            _on_device(node.body, device)
    for v in list(graph.inputs) + [o for node in graph.nodes for o in node.outputs]:
        if isinstance(v.type, TensorType):
            v.type = dataclasses.replace(v.type, device=device)


def _random_input(t, gen: torch.Generator) -> torch.Tensor:
    from codegen.torch_bridge import torch_dtype

    shape, dtype = tuple(int(d) for d in t.shape), torch_dtype(t.dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    return torch.randint(0, 3, shape, generator=gen).to(dtype)


_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 5e-2}


def _differs(got: torch.Tensor, want: torch.Tensor) -> str:
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{tuple(got.shape)} {got.dtype}, interp {tuple(want.shape)} {want.dtype}"
    if not got.dtype.is_floating_point:
        n = int((got != want).sum())
        return f"{n} elements differ" if n else ""
    tol = _TOLERANCE.get(got.dtype, 1e-4)
    g, w = got.double(), want.double()
    scale = float(w.abs().nan_to_num().max()) if w.numel() else 0.0
    if torch.allclose(g, w, rtol=tol, atol=tol * max(1.0, scale), equal_nan=True):
        return ""
    return f"max error {float((g - w).abs().nan_to_num().max()):.3g}"


def check(folder: Path, pattern: str = "*") -> int:
    from codegen.backends import get_backend
    from codegen.triton import interpreting
    from ir.ops.registry import RANDOM
    from ir.parser import parse
    from ir.types import TensorType

    device = "cpu" if interpreting() else "cuda"
    triton, interp = get_backend("triton"), get_backend("interp")
    counts = dict.fromkeys(["equal", "differ", "error", "skipped"], 0)
    for path in sorted(folder.glob(f"{pattern}.rir")):
        text = path.read_text()
        reference, graph = parse(text), parse(text)
        if not all(isinstance(v.type, TensorType) and
                   all(isinstance(d, int) for d in v.type.shape) for v in graph.inputs) or \
                any(n.op.name == "aten" and not n.inputs for n in graph.walk()) or \
                any(n.op.category == RANDOM or n.attrs.get("rng") for n in graph.walk()):
            # symbolic sizes; or an ATen creation call traced without a device, which makes
            # a CPU tensor whatever this check does to the graph's types; or a random draw
            # (a GPU's generator draws other numbers than the CPU's)
            counts["skipped"] += 1
            continue
        args = [_random_input(v.type, torch.Generator().manual_seed(i))
                for i, v in enumerate(reference.inputs)]
        try:
            want = interp.compile_graph(reference, {})(*[a.clone() for a in args])
        except Exception:  # inputs the program never sees (an index out of range)
            counts["skipped"] += 1
            continue
        try:
            _on_device(graph, device)
            got = triton.compile_graph(graph, {})(*[a.to(device) for a in args])
        except Exception as e:
            counts["error"] += 1
            print(f"{path.name}: error {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        diffs = [f"out{i}: {d}" for i, (g, w) in enumerate(zip(got, want))
                 if (d := _differs(g.cpu(), w))]
        counts["differ" if diffs else "equal"] += 1
        if diffs:
            print(f"{path.name}: {'; '.join(diffs)}", flush=True)
    print(f"on {device}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 1 if counts["differ"] or counts["error"] else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="trace and write the graphs (Python 3.11)")
    e.add_argument("folder", type=Path)
    e.add_argument("--fuzz", type=int, default=400, help="fuzzer programs to trace")
    e.add_argument("--seed", type=int, default=1127)
    e.add_argument("--workloads", default=None, help="comma-separated (default: all)")
    c = sub.add_parser("check", help="compile and compare each graph (on the GPU machine)")
    c.add_argument("folder", type=Path)
    c.add_argument("--only", default="*", help="a glob of graph names (default: all)")
    opts = parser.parse_args(argv)
    if opts.command == "export":
        chosen = opts.workloads.split(",") if opts.workloads else None
        return export(opts.folder, opts.fuzz, opts.seed, chosen)
    return check(opts.folder, opts.only)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    sys.exit(main())
