"""Re-run chosen mutants of a `mutants.py` run (tests/MUTANTS.md): survivors, or one line's.

    python tests/mutants_rerun.py --targets ir --seed 19 -n 110 --ids 7,31 \\
        --tests "tests/ir tests/passes" [--worktree]
    python tests/mutants_rerun.py --targets codegen --site codegen/runtime.py:214 \\
        --tests "tests/codegen/test_runtime_arena.py"
    python tests/mutants_rerun.py --from-json /tmp/mut/codegen.json --ids 40,90 \\
        --tests "tests/codegen/test_codegen_mutation_gaps.py"

`--ids` re-draws the sample of `../shared/tools/mutants.py` with the same targets, seed and
-n (the same mutants while the target files are unchanged) and runs those ids; `--site`
runs every mutant the tool can plant on that line.  Each runs `pytest -x -q` on a copy
of HEAD (`--worktree`: of the working tree), one at a time, and the verdict is printed
as `killed` / `survived` per mutant.  `--from-json RUN.json --ids` plants the mutants
recorded in an earlier run's JSON (possibly of an older commit) into this checkout by
their text: the recorded original lines are found in the file (the occurrence nearest
the recorded line) and replaced by the mutated ones; a mutant whose lines are gone is
reported `missing`.  Run it with a Python that does not have the project
installed editable, like mutants.py itself.
"""

import argparse
import importlib.util
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_tool(path: Path):
    spec = importlib.util.spec_from_file_location("mutants_tool", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def planted_by_text(tool, copy: str, json_path: str, ids: str) -> list:
    """The recorded mutants `ids` of `json_path`, planted in `copy` by their text."""
    want = {int(i) for i in ids.split(",")}
    out = []
    run = json.loads(Path(json_path).read_text())
    for m in run["mutants"]:
        if m["id"] not in want:
            continue
        old = [d[1:] for d in m["diff"] if d.startswith("-")]
        new = [d[1:] for d in m["diff"] if d.startswith("+")]
        path = os.path.join(copy, m["file"])
        lines = tool.read(path).split("\n") if os.path.exists(path) else []
        starts = [i for i in range(len(lines) - len(old) + 1)
                  if lines[i:i + len(old)] == old]
        text = None
        if starts and old:
            # The occurrence whose neighbouring lines best match the measured commit's
            # file (then the nearest to the recorded line): a line like `if not x:` can
            # occur several times, and the file may have moved since.
            before = _measured_lines(run.get("commit"), m["file"])
            near = before[max(m["line"] - 9, 0):m["line"] + 8] if before else []

            def score(i):
                around = lines[max(i - 8, 0):i + len(old) + 8]
                return (-sum(1 for x in set(near) if x.strip() and x in around),
                        abs(i + 1 - m["line"]))
            at = min(starts, key=score)
            text = "\n".join(lines[:at] + new + lines[at + len(old):])
        out.append(dict(m, text=text))
    return out


def _measured_lines(commit, rel: str) -> list:
    """`rel` as it was at `commit` (the measured commit of a run), or [] if unknown."""
    if not commit:
        return []
    got = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{rel}"],
                         capture_output=True, text=True)
    return got.stdout.split("\n") if got.returncode == 0 else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", nargs="+", default=[])
    ap.add_argument("--from-json", help="plant the --ids of this mutants.py JSON by their text")
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
        if args.from_json:
            chosen += planted_by_text(tool, copy, args.from_json, args.ids)
        elif args.ids:
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
                if m.get("text") is None:
                    print(f"missing #{m['id']} {m['file']}:{m['line']}")
                    continue
                print(f"#{m['id']} {m['file']}:{m['line']} {m['kind']}: {m['desc']}")
                print("".join(f"      {d}\n" for d in m["diff"]), end="")
            return 0
        pytest = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        survived = 0
        for m in chosen:
            if m.get("text") is None:
                print(f"missing  #{m['id']} {m['file']}:{m['line']}: its lines are not in this"
                      " checkout")
                continue
            path = os.path.join(copy, m["file"])
            original = tool.read(path)
            tool.write(path, m["text"])
            try:
                rc, out, secs = tool.run(pytest + shlex.split(args.tests), copy, args.timeout)
            finally:
                tool.write(path, original)
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
