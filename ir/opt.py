"""`python -m ir.opt`: run passes over textual IR, without PyTorch in the loop.

    python -m ir.opt --passes=decompose,fold,simplify,scatters,cse,dce [--print-after-all]
                     [--print-after=NAME] [--timings] [--stats] [--check-semantics]
                     [in.rir]

Reads `in.rir` (or stdin), runs the passes on every function in it, and writes the
optimized IR to stdout.  IR printed after passes, timings and rewrite counts (`--stats`:
the rules each pass fired, by name) go to stderr, so stdout
is always just the result.  Parse errors point at `file:line:col`; invalid IR and
failing passes are reported by name; all errors exit with status 1 (2 for bad usage).
Spec: spec/passes.md, "`python -m ir.opt`".
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from ir.parser import ParseError, parse_module
from ir.passes.manager import DEFAULT_PIPELINE, PassError, run_pipeline
from ir.passes.registry import all_passes
from ir.printer import print_graph
from ir.verify import VerificationError


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ir.opt", description=__doc__.split("\n")[0])
    parser.add_argument("input", nargs="?", help="textual IR file (default: stdin)")
    parser.add_argument("--passes", default=",".join(DEFAULT_PIPELINE),
                        help="comma-separated pass names (default: %(default)s)")
    parser.add_argument("--print-after-all", action="store_true",
                        help="print the IR to stderr after every pass")
    parser.add_argument("--print-after", action="append", default=[], metavar="NAME",
                        help="print the IR to stderr after pass NAME (repeatable)")
    parser.add_argument("--timings", action="store_true", help="print pass timings to stderr")
    parser.add_argument("--stats", action="store_true",
                        help="print the rewrite rules each pass fired, counted, and the"
                             " node each firing rewrote, to stderr")
    parser.add_argument("--check-semantics", action="store_true",
                        help="interpret before/after each pass on random inputs")
    args = parser.parse_args(argv)

    passes = [p.strip() for p in args.passes.split(",") if p.strip()]
    unknown = [p for p in passes if p not in all_passes()]
    if unknown:
        parser.error(f"unknown pass(es) {', '.join(unknown)}; valid: "
                     f"{', '.join(sorted(all_passes()))}")
    stray = [p for p in args.print_after if p not in passes]
    if stray:
        parser.error(f"--print-after {', '.join(stray)}: not in --passes={','.join(passes)}")
    name = args.input or "<stdin>"
    try:
        text = open(args.input).read() if args.input else sys.stdin.read()
    except OSError as e:
        print(f"error: cannot read {name}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        graphs = parse_module(text)
    except ParseError as e:
        detail = str(e).removeprefix(f"line {e.line}:{e.col}: ")
        print(f"{name}:{e.line}:{e.col}: {detail}", file=sys.stderr)
        return 1

    print_after = "all" if args.print_after_all else args.print_after
    for graph in graphs:
        timings: dict[str, float] = {}
        report: list[str] = []
        # With --stats the passes run one at a time, so each firing can be shown as the
        # line it rewrote in that pass's input (provenance).
        steps = [[p] for p in passes] if args.stats else [passes]
        result = graph
        try:
            for step in steps:
                stats: dict = {}
                before = result
                result = run_pipeline(before, step, print_after=print_after, timings=timings,
                                      stats=stats, check_semantics=args.check_semantics,
                                      stream=sys.stderr)
                report += _rewrites(graph.name, stats, before)
        except (VerificationError, PassError) as e:
            print(f"{_locate(e, text, name)}@{graph.name}: {e}", file=sys.stderr)
            return 1
        sys.stdout.write(print_graph(result))
        if args.timings:
            line = ", ".join(f"{p} {t * 1e3:.2f} ms" for p, t in timings.items())
            print(f"# timings @{graph.name}: {line}", file=sys.stderr)
        if args.stats:
            sys.stderr.write("".join(line + "\n" for line in report))
    return 0


def _rewrites(graph_name: str, stats: dict, before) -> list[str]:
    """`# rewrites @f pass: rule xN, ...` and one `#   rule: <line>` per firing."""
    lines = []
    for p, fired in stats.items():
        if fired.sweeps == 0:
            continue  # not a rule table: nothing to count
        lines.append(f"# rewrites @{graph_name} {p}: {fired.summary()}")
        lines += [f"#   {line}" for line in fired.provenance(before)]
    return lines


def _locate(error: Exception, text: str, name: str) -> str:
    """`file:line:col: ` of the first diagnostic's IR line in the input, if it is there.

    The verifier quotes the offending line as the printer writes it; for input in the
    canonical form (what the printer writes) that is a line of the file.
    """
    diagnostics = getattr(error, "diagnostics", None) or \
        getattr(error.__cause__, "diagnostics", None) or []
    if isinstance(error, VerificationError) and diagnostics:
        quoted = diagnostics[0].line.removesuffix(" {...}").strip()
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip().startswith(quoted):
                return f"{name}:{number}:{len(line) - len(line.lstrip()) + 1}: "
    return f"{name}: "


if __name__ == "__main__":
    sys.exit(main())
