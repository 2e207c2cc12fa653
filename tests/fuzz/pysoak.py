"""Time-boxed runs of the Python-level fuzzer with counts per backend:

    python -m tests.fuzz.pysoak --seconds 600 [--seed S] [--programs N] [--backends a,b]

Each program (tests/fuzz/pygen.py `generate(seed)`, seeds counting up from --seed) runs on
every backend; a mismatch (the compiled run differs from eager) or a crash (the harness
itself failed) is printed with the program as it can be pasted into tests/fuzz/pycorpus.py.
"""

import argparse
import time
import warnings

import refcomp
from tests.fuzz.pygen import check_program, generate


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--programs", type=int, default=10**9)
    ap.add_argument("--backends", default="interp,eager,llvm")
    args = ap.parse_args(argv)
    backends = args.backends.split(",")
    counts = {b: {"programs": 0, "mismatches": 0, "crashes": 0} for b in backends}
    deadline = time.time() + args.seconds
    seed = args.seed
    warnings.simplefilter("ignore")
    while time.time() < deadline and seed - args.seed < args.programs:
        program = generate(seed)
        for backend in backends:
            try:
                problem = check_program(program, backend)
                kind = "mismatches"
            except Exception as e:  # the harness failed: a crash
                problem, kind = f"{type(e).__name__}: {e}", "crashes"
            counts[backend]["programs"] += 1
            if problem is not None:
                counts[backend][kind] += 1
                print(f"--- {kind[:-2]} on {backend}, seed {seed}: {problem}\n"
                      f"body={program.body!r}\nmutations={program.mutations!r}\n"
                      f"n_inputs={program.n_inputs}", flush=True)
        seed += 1
        if (seed - args.seed) % 200 == 0:
            refcomp.reset()  # every program compiles new code objects: bound the caches
    print(f"seeds {args.seed}..{seed - 1}: {counts}", flush=True)
    return counts


if __name__ == "__main__":
    main()
