"""Re-run chosen mutants of a `mutants.py` run (tests/MUTANTS.md): survivors, or one line's.

    python tests/mutants_rerun.py --targets ir --seed 19 -n 110 --ids 7,31 \\
        --tests "tests/ir tests/passes" [--worktree]
    python tests/mutants_rerun.py --targets codegen --site codegen/runtime.py:214 \\
        --tests "tests/codegen/test_runtime_arena.py"

`--ids` re-draws the sample of `../shared/tools/mutants.py` with the same targets, seed and
-n (the same mutants while the target files are unchanged) and runs those ids; `--site`
runs every mutant the tool can plant on that line.  Each runs `pytest -x -q` on a copy
of HEAD (`--worktree`: of the working tree), one at a time, and the verdict is printed
as `killed` / `survived` per mutant.  Run it with a Python that does not have the project
installed editable, like mutants.py itself.
"""

import argparse
import importlib.util
import os
import random
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_tool(path: Path):
    spec = importlib.util.spec_from_file_location("mutants_tool", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", nargs="+", required=True)
    ap.add_argument("--tests", default="tests")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("--ids", default="", help="comma-separated mutant ids of the sample")
    ap.add_argument("--site", action="append", default=[], help="FILE:LINE, repeatable")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--worktree", action="store_true")
    ap.add_argument("--show", action="store_true", help="print the mutants, run nothing")
    ap.add_argument("--tool", default=next(
        (str(p) for p in (ROOT.parent / "shared/tools/mutants.py",
                          ROOT.parent.parent / "shared/tools/mutants.py") if p.exists()),
        None), help="path of mutants.py (default: ../shared/tools or ../../shared/tools)")
    args = ap.parse_args()
    if args.tool is None:
        ap.error("mutants.py not found beside the checkout: pass --tool")
    tool = load_tool(Path(args.tool))
    with tempfile.TemporaryDirectory(prefix="mutants-rerun-") as tmp:
        copy = tool.make_copy(str(ROOT), os.path.join(tmp, ROOT.name), args.worktree)
        files = tool.target_files(copy, str(ROOT), args.targets)
        sources = {rel: tool.Source(rel, tool.read(os.path.join(copy, rel))) for rel in files}
        sites = [s for src in sources.values() for s in tool.find_sites(src)]
        chosen = []
        if args.ids:
            sample, _ = tool.sample(sites, sources, args.n, random.Random(args.seed))
            want = {int(i) for i in args.ids.split(",")}
            chosen += [m for m in sample if m["id"] in want]
        for site in args.site:
            rel, line = site.rsplit(":", 1)
            for s in sites:
                if s["file"] == rel and s["line"] == int(line):
                    got = tool.mutate(s, sources[rel])
                    if got:
                        chosen.append(dict(s, id=f"{rel}:{line}", text=got[0], diff=got[1]))
        if not chosen:
            print("no mutants selected")
            return 2
        if args.show:
            for m in chosen:
                print(f"#{m['id']} {m['file']}:{m['line']} {m['kind']}: {m['desc']}")
                print("".join(f"      {d}\n" for d in m["diff"]), end="")
            return 0
        pytest = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        survived = 0
        for m in chosen:
            path = os.path.join(copy, m["file"])
            tool.write(path, m["text"])
            try:
                rc, out, secs = tool.run(pytest + shlex.split(args.tests), copy, args.timeout)
            finally:
                tool.write(path, sources[m["file"]].text)
            status = ("timeout" if rc is None else "survived" if rc == 0
                      else "error" if rc in (2, 3, 4, 5) else "killed")
            survived += status == "survived"
            print(f"{status:<8} #{m['id']} {m['file']}:{m['line']} {m['kind']}: {m['desc']}"
                  f" ({secs:.0f}s)")
            for d in m["diff"]:
                print(f"      {d}")
            if status == "killed":
                fails = [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))]
                print("      " + (fails[0] if fails else out.splitlines()[-1]))
        print(f"RERUN: {len(chosen) - survived} killed of {len(chosen)}, {survived} survived")
        return 0


if __name__ == "__main__":
    sys.exit(main())
