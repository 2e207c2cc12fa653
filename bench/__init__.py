"""refcomp's benchmark suite: `python -m bench` (see README.md, "Benchmarks").

Workloads are plain PyTorch functions (bench/workloads.py); candidates are eager
PyTorch, torch.compile (Inductor) and refcomp.compile, measured side by side and
interleaved in one run (bench/harness.py); the report is bench/RESULTS.md.
"""
