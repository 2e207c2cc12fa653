"""Guard soundness (issue 14, spec/guards.md "Soundness property"): a generated program reads
random Python and torch state; between calls a mutator changes one piece of it; every
compiled call equals eager (a recompile or a hit are both fine, a stale result never is).

The CI profile runs a few dozen programs; `REFCOMP_HYPOTHESIS=thorough` runs
THOROUGH_EXAMPLES of them (`--hypothesis-show-statistics` prints the count).
"""

import enum
import math
import os

import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

import refcomp

THOROUGH_EXAMPLES = 5000
THOROUGH = os.environ.get("REFCOMP_HYPOTHESIS") == "thorough"


class Mode(enum.Enum):
    A = 1
    B = 2
    C = 3


class Cfg:
    scale = 1.0


class Scale(nn.Module):
    def forward(self, v):
        return v * 1.5


SENTINEL = object()

# Each reader is a piece of the program's body (`y` is the running tensor, positive at
# the start); each names the state it reads.
READERS = {
    "int": ("K", "    y = y + K\n"),
    "float": ("F", "    y = y / F\n"),
    "enum_is": ("MODE", "    if MODE is Mode.A:\n        y = y + 1\n    else:\n        y = y * 2\n"),
    "enum_eq": ("MODE", "    if MODE == Mode.B:\n        y = y - 5\n"),
    "sentinel": ("OPT", "    if OPT is SENTINEL:\n        y = y + 7\n"),
    "set": ("S", "    if 'a' in S:\n        y = y - 3\n"),
    "dict": ("D", "    if 'k' in D:\n        y = y + D['k']\n"),
    "attr": ("scale", "    y = y * cfg.scale\n"),
    "getattr": ("gain", "    y = y + getattr(cfg, 'gain', 0.25)\n"),
    "hasattr": ("flag", "    if hasattr(cfg, 'flag'):\n        y = y * 3\n"),
    "closure": ("cell", "    y = y + cell\n"),
    "modlist": ("mods", "    for m in mods:\n        y = m(y)\n"),
    "len": ("mods", "    y = y + len(mods)\n"),
    "slope": ("slope", "    y = act(y - 1)\n"),
    "softmax": ("dim", "    y = sm(y) + 1\n"),
    "defaults": ("defaults", "    y = helper(y)\n"),
    "kwdefaults": ("kwdefaults", "    y = helper_kw(y)\n"),
    "grad": ("grad", "    if torch.is_grad_enabled():\n        y = y + 0.5\n"),
    "forward": ("forward", "    y = mod(y)\n"),
    "matmul": ("autocast", "    y = y @ W\n"),
}

PRELUDE = """
def helper(v, k=2.0):
    return v * k

def helper_kw(v, *, s=1.0):
    return v + s

def make(cell):
    def prog(x):
        y = x
{body}        return y

    def set_cell(v):
        nonlocal cell
        cell = v

    return prog, set_cell
"""

FLOATS = [1.0, -1.0, 0.0, -0.0, math.nan, 2.5, math.inf]
MODULES = [nn.Tanh, lambda: nn.LeakyReLU(0.3), nn.Identity, nn.Sigmoid]


def build(readers):
    body = "".join(_indent(READERS[r][1]) for r in readers)
    ns = {"torch": torch, "Mode": Mode, "SENTINEL": SENTINEL, "K": 1, "F": 1.0,
          "MODE": Mode.A, "OPT": SENTINEL, "S": {"b"}, "D": {"j": 1.0}, "cfg": Cfg(),
          "mods": nn.ModuleList([nn.Tanh()]), "act": nn.LeakyReLU(0.01),
          "sm": nn.Softmax(dim=0), "mod": Scale(), "W": torch.rand(4, 4) + 0.5}
    exec(compile(PRELUDE.format(body=body), "<soundness program>", "exec"), ns)
    prog, set_cell = ns["make"](2)
    ns["set_cell"] = set_cell
    return prog, ns


def _indent(snippet: str) -> str:
    return "".join("    " + line + "\n" for line in snippet.splitlines())


def mutate(ns, piece: str, k: int, context: dict) -> None:
    """Change one piece of state; `k` picks the new value."""
    cfg = ns["cfg"]
    if piece == "K":
        ns["K"] = k % 5 - 2
    elif piece == "F":
        ns["F"] = FLOATS[k % len(FLOATS)]
    elif piece == "MODE":
        ns["MODE"] = list(Mode)[k % 3]
    elif piece == "OPT":
        ns["OPT"] = [SENTINEL, object(), None][k % 3]
    elif piece == "S":
        (ns["S"].add if k % 2 else ns["S"].discard)("a")
    elif piece == "D":
        if k % 3 == 0:
            ns["D"].pop("k", None)
        else:
            ns["D"]["k"] = float(k)
    elif piece == "scale":
        cfg.scale = [1.0, -2.0, 0.5, -0.0][k % 4]
    elif piece == "gain":
        if k % 2:
            cfg.gain = float(k)
        elif "gain" in vars(cfg):
            del cfg.gain
    elif piece == "flag":
        if k % 2:
            cfg.flag = True
        elif "flag" in vars(cfg):
            del cfg.flag
    elif piece == "cell":
        ns["set_cell"](k % 4)
    elif piece == "mods":
        if k % 3 == 0 and len(ns["mods"]):
            del ns["mods"][len(ns["mods"]) - 1]
        else:
            ns["mods"].append(MODULES[k % len(MODULES)]())
    elif piece == "slope":
        ns["act"].negative_slope = [0.01, 0.5, -1.0, 2.0][k % 4]
    elif piece == "dim":
        ns["sm"].dim = [0, 1, -1][k % 3]
    elif piece == "defaults":
        ns["helper"].__defaults__ = ([2.0, 3.0, -1.0, 0.5][k % 4],)
    elif piece == "kwdefaults":
        ns["helper_kw"].__kwdefaults__ = {"s": [1.0, 4.0, -2.0][k % 3]}
    elif piece == "grad":
        context["grad"] = bool(k % 2)
    elif piece == "forward":
        if k % 2:
            ns["mod"].forward = (lambda v: v * 4.0) if k % 4 == 1 else (lambda v: v - 2.0)
        elif "forward" in vars(ns["mod"]):
            del ns["mod"].forward
    elif piece == "autocast":
        context["autocast"] = bool(k % 2)
    else:
        raise AssertionError(piece)


PIECES = sorted({piece for piece, _ in READERS.values()})


def run(fn, x, context):
    with torch.set_grad_enabled(context["grad"]):
        if context["autocast"]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return fn(x)
        return fn(x)


def check_same(got, want, step):
    assert got.dtype == want.dtype, (step, got.dtype, want.dtype)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True,
                               msg=lambda m: f"{step}: {m}")
    # -0.0 and 0.0 compare equal above; their signs must agree too (x / -0.0 ...).
    assert torch.equal(torch.signbit(got), torch.signbit(want)), step


@settings(max_examples=THOROUGH_EXAMPLES) if THOROUGH else (lambda f: f)
@given(readers=st.lists(st.sampled_from(sorted(READERS)), min_size=1, max_size=6, unique=True),
       steps=st.lists(st.tuples(st.sampled_from(PIECES), st.integers(0, 11)), min_size=1,
                      max_size=6))
def test_compiled_equals_eager_after_any_state_change(readers, steps):
    refcomp.reset()
    prog, ns = build(readers)
    # No IR passes: guards do not depend on them, and a compile is then ~4x cheaper.
    cf = refcomp.compile(prog, backend="eager", options={"passes": []})
    x = torch.rand(3, 4) + 0.5
    context = {"grad": True, "autocast": False}
    history = [("start", None)]
    check_same(run(cf, x, context), run(prog, x, context), history)
    for piece, k in steps:
        mutate(ns, piece, k, context)
        history.append((piece, k))
        check_same(run(cf, x, context), run(prog, x, context), (readers, history))
