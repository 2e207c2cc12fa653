"""Logs and debug dumps: what the compiler did, on request (`REFCOMP_LOGS`, like TORCH_LOGS).

Owns: the channels (`CHANNELS`), `set_logs` (also read from the environment at import:
`REFCOMP_LOGS=graph_breaks,guards`, `REFCOMP_DEBUG_DIR=<folder>`), the hooks the compile
path calls, and the debug folder's numbered files.  Must not know how a frame is traced
or a graph compiled: hooks are handed finished objects (a graph, an entry, a cache).
Spec: spec/runtime.md, "Logs and debug dumps".

Each channel is a `logging` logger named `refcomp.<channel>`, logged at INFO; a handler
on the `refcomp` logger writes them to stderr (the stderr of the moment, so pytest's
capture sees it).  Records propagate as usual, so `caplog` and user handlers see them.

Note [Logging costs nothing when off]: every hook is called on a cache miss or while
compiling, never on a guarded hit, and returns at once unless `_ON` (computed by
`set_logs`) says some channel or the debug folder is active.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import sys
import threading
from pathlib import Path
from typing import Optional

from codegen import dumps

CHANNELS = ("graph_breaks", "guards", "recompiles", "ir", "output_code", "llvm_ir", "asm",
            "triton")
# Channels fed by codegen/dumps.py (codegen announces code; this module listens).
DUMP_KINDS = {"llvm_ir": ("llvm_ir", "llvm_ir_opt"), "asm": ("asm",), "triton": ("triton",)}
# Debug-folder file suffix of each dump kind.
DUMP_SUFFIX = {"llvm_ir": "ll", "llvm_ir_opt": "opt.ll", "asm": "s", "triton": "triton.py"}
LOGGERS = {c: logging.getLogger(f"refcomp.{c}") for c in CHANNELS}

_enabled: frozenset = frozenset()
_debug_dir: Optional[Path] = None
_ON = False  # some channel or the debug folder is active (Note [Logging costs nothing when off])
_count = 0  # graphs numbered so far in the debug folder
_lock = threading.Lock()
_local = threading.local()  # .graph: (number, name) of the graph this thread compiles


class _Stderr(logging.StreamHandler):
    """Writes to the current sys.stderr (as logging.lastResort does)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


_HANDLER = _Stderr()
_HANDLER.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
_HANDLER.set_name("refcomp.logs.stderr")


def set_logs(channels: str = "", debug_dir: Optional[str] = None) -> None:
    """Turn channels on (comma-separated names, or "all"); "" turns them all off.

    Each call replaces the whole configuration, as torch._logging.set_logs does;
    `debug_dir`: write each compiled graph's IR, kernels and guards there.
    """
    global _enabled, _debug_dir, _ON, _count
    names = {c.strip() for c in (channels or "").split(",") if c.strip()}
    unknown = sorted(names - set(CHANNELS) - {"all"})
    if unknown:
        raise ValueError(f"unknown REFCOMP_LOGS channel(s) {unknown}; valid: "
                         f"{', '.join(CHANNELS + ('all',))}")
    enabled = frozenset(CHANNELS) if "all" in names else frozenset(names)
    for channel, logger in LOGGERS.items():
        logger.setLevel(logging.INFO if channel in enabled else logging.NOTSET)
    root = logging.getLogger("refcomp")
    for handler in [h for h in root.handlers if h.get_name() == _HANDLER.get_name()]:
        root.removeHandler(handler)  # by name: a reloaded module made a new one
    if enabled:
        root.addHandler(_HANDLER)
    with _lock:
        _enabled = enabled
        _debug_dir = Path(debug_dir) if debug_dir else None
        _count = _highest_number(_debug_dir)
        _ON = bool(enabled) or _debug_dir is not None
    kinds = set(DUMP_SUFFIX) if _debug_dir is not None else \
        {k for channel in enabled & set(DUMP_KINDS) for k in DUMP_KINDS[channel]}
    dumps.subscribe(_code_dumped, kinds)


def enabled() -> frozenset:
    """The channels now on."""
    return _enabled


def _highest_number(folder: Optional[Path]) -> int:
    """Numbering continues after the files already in the folder (no run overwrites)."""
    if folder is None or not folder.is_dir():
        return 0
    numbers = [int(m.group(1)) for p in folder.iterdir()
               if (m := re.match(r"(\d+)_", p.name))]
    return max(numbers, default=0)


def _log(channel: str, text: str) -> None:
    if channel in _enabled:
        LOGGERS[channel].info("%s", text)


def _dump(suffix: str, text: str) -> None:
    """Append to `<debug_dir>/<number>_<graph name>.<suffix>` of this thread's graph."""
    graph = getattr(_local, "graph", None)
    if _debug_dir is None or graph is None:
        return
    _debug_dir.mkdir(parents=True, exist_ok=True)
    with open(_debug_dir / f"{graph[0]:04d}_{graph[1]}.{suffix}", "a") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _index(line: str) -> None:
    """One line per graph in `<debug_dir>/index.txt`: which files belong to which graph."""
    if _debug_dir is None:
        return
    _debug_dir.mkdir(parents=True, exist_ok=True)
    with open(_debug_dir / "index.txt", "a") as f:
        f.write(line + "\n")


def _frame(cache) -> str:
    code = cache.code
    where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    from refcomp.bytecode_gen import resume_line

    line = resume_line(code)  # a resume function (refcomp/resume.py)
    return where if line is None else f"{where}, resume function at line {line}"


# --- hooks: each is one call from the compile path -----------------------------------------
#
# Note [Logging never changes what runs]: every hook is wrapped by `_hook`, which turns an
# exception inside logging into a warning on the `refcomp.logs` logger.  A hook that raised
# used to surface as an internal tracer error, so turning a channel on made the frame run
# eagerly (the Triton `output_code` bug); tests/frontend/test_logs.py runs every backend
# with REFCOMP_LOGS=all and compares results and graph counts.

_FAILURES = logging.getLogger("refcomp.logs")


def _hook(fn):
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            _FAILURES.warning("logging hook %s failed: %r (the compiled code is unaffected)",
                              fn.__name__, e)
            return {} if fn.__name__ == "graph_captured" else None
    return guarded


def _code_dumped(kind: str, name: str, text: str) -> None:
    """codegen/dumps.py listener: generated code to its channel and the debug folder."""
    channel = next(c for c, kinds in DUMP_KINDS.items() if kind in kinds)
    header = {"llvm_ir": "LLVM IR before optimisation", "llvm_ir_opt": "LLVM IR after O3",
              "asm": "assembly", "triton": "Triton source"}[kind]
    _log(channel, f"# {header}: {name}\n{text.rstrip()}")
    _dump(DUMP_SUFFIX[kind], f"# {name}\n{text}")

class _PassStream(io.TextIOBase):
    """run_pipeline's print_after stream: each `# after <pass>` block becomes one record.

    A pass that left the graph's text unchanged logs one line, `# after cse (0.1 ms):
    unchanged`, instead of the whole graph again."""

    def __init__(self, captured: str):
        super().__init__()
        self.last = captured

    def write(self, text: str) -> int:
        try:
            self._record(text)
        except Exception as e:  # Note [Logging never changes what runs]
            _FAILURES.warning("logging the IR failed: %r (the compiled code is unaffected)", e)
        return len(text)

    def _record(self, text: str) -> None:
        header, _, body = text.partition("\n")
        if body.strip() == self.last.strip():
            text = f"{header}: unchanged\n"
        else:
            self.last = body
        _log("ir", text.rstrip("\n"))
        _dump("ir", text)


@_hook
def graph_captured(graph) -> dict:
    """A graph leaves the tracer: log it, number it; run_pipeline's keywords for `ir`.

    Called by build_entry before the passes; returns {} when neither `ir` nor the
    debug folder is on, else print_after="all" with a stream that logs each pass.
    """
    if not _ON:
        return {}
    from ir.printer import print_graph

    global _count
    with _lock:
        _count += 1
        _local.graph = (_count, re.sub(r"[^\w.-]", "_", graph.name))
    captured = print_graph(graph)
    text = f"# after capture\n{captured}"
    _log("ir", text.rstrip("\n"))
    _dump("ir", text)
    _index(f"{_count:04d}_{_local.graph[1]}: graph {graph.name!r}, "
           f"{len(graph.nodes)} node(s) after capture")
    if "ir" not in _enabled and _debug_dir is None:
        return {}
    return {"print_after": "all", "stream": _PassStream(captured)}


@_hook
def output_code(fn) -> None:
    """The backend compiled the graph: its kernels (LLVM: printed Kernels and the call;
    Triton: each kernel's source); symbolic graphs' kernels take their sizes as
    arguments, so this is all the code they ever run."""
    if not _ON:
        return
    compiled = getattr(fn, "compiled", None)
    if compiled is None:
        text = "# output code: no generated code (this backend runs ops)"
    elif hasattr(compiled, "sources"):  # codegen/triton/backend.py TritonGraph
        text = "\n".join(f"# triton kernel {i}\n{s}" for i, s in enumerate(compiled.sources))
    elif hasattr(compiled, "kernels"):  # codegen/runtime.py CompiledGraph (llvm)
        from codegen.kernel import print_kernel

        parts = [f"# kernel {i}\n{print_kernel(k)}" for i, k in enumerate(compiled.kernels)]
        text = "\n".join(parts + [f"# call\n{compiled.source}"])
    else:
        text = f"# output code: {type(compiled).__name__} has no printable code"
    _log("output_code", text.rstrip("\n"))
    _dump("code", text)


def _guard_lines(entry) -> str:
    return "\n".join(f"  {g.kind}: {g.describe()}" for g in entry.guards.guards)


@_hook
def new_entry(cache, entry) -> None:
    """An entry joins a cache: its guards, and the graph break or fallback that made it."""
    if not _ON:
        return
    reason = entry.reason
    if reason is not None:
        kind = "graph break" if getattr(entry, "resume", None) is not None else \
            "frame runs eagerly"
        # message(): [id] title: detail at file:line (instruction). Hint: ...
        _log("graph_breaks", f"{kind} in {_frame(cache)}: {reason.message()}")
    n = len(cache.entries) - 1  # called after the entry was added
    text = f"entry {n} of {_frame(cache)}: {len(entry.guards.guards)} guard(s)\n" \
           f"{_guard_lines(entry)}"
    _log("guards", text.rstrip("\n"))
    if entry.graph is not None and getattr(_local, "graph", None) is not None:
        _dump("guards", text)


@_hook
def recompile(cache, limit: int, frame_args=None) -> None:
    """A miss on a cache that has entries: which guards failed, and a limit hit.

    `cache.miss_reasons` holds the failures (explain_miss ran), unless `frame_args`
    (L, G, C, B) are given: a resume point's miss, whose failures are computed here
    without counting them in stats().
    """
    if not _ON or "recompiles" not in _enabled or not cache.entries:
        return
    if frame_args is None and getattr(cache, "history", None):
        reasons = [(i, [str(f) for f in failed]) for i, failed in cache.history[-1].failures]
    elif frame_args is None:
        reasons = cache.miss_reasons
    else:
        reasons = [(i, _failing(e, *frame_args)) for i, e in enumerate(cache.entries)]
    lines = [f"recompiling {_frame(cache)}: no entry's guards hold"]
    for i, failed in reasons:
        lines.append(f"  entry {i} failed: {'; '.join(failed) or '(nothing named)'}")
    if getattr(cache, "auto_dims", None):  # automatic dynamic (refcomp/cache.py)
        lines.append(f"  automatic dynamic: sizes now symbolic: {cache.auto_dims}")
    if len(cache.entries) >= limit:
        lines.append(f"  cache_size_limit={limit} reached: this call runs eagerly")
    _log("recompiles", "\n".join(lines))


def _failing(entry, L, G, C, B) -> list:
    return [str(f) for f in entry.guards.explain(L, G, C, B, count=False)]


set_logs(os.environ.get("REFCOMP_LOGS", ""), os.environ.get("REFCOMP_DEBUG_DIR") or None)
