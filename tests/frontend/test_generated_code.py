"""Generated code objects are checked before they run; exceptions raised at a graph break
inside a handler block propagate as in eager (spec/runtime.md, "Generated code at a break").

The programs run in a child process: before the fix, their second call crashed the
interpreter (an exception-table entry with stack depth 32768, left unset by `bytecode`).
"""

import subprocess
import sys
import textwrap

import pytest
from bytecode import ConcreteBytecode

from refcomp.bytecode_gen import BadCode, check_code

PROGRAMS = {
    "suppress_around_a_break": """
        def f(x, d):
            with contextlib.suppress(KeyError):
                return x * d["k"]
            return x - 1
        calls = [(torch.ones(2), {"k": 2.0}), (torch.ones(2), {})]
    """,
    "try_inside_no_grad": """
        def f(x, d):
            with torch.no_grad():
                try:
                    y = x * d["k"]
                except KeyError:
                    y = x + 1
            return y * 2
        calls = [(torch.ones(2), {"k": 3.0}), (torch.ones(2), {})]
    """,
    "raise_from_in_a_handler": """
        def f(x, d):
            try:
                y = x * d["k"]
            except KeyError as e:
                raise ValueError("no k") from e
            return y
        calls = [(torch.ones(2), {"k": 3.0}), (torch.ones(2), {})]
    """,
    # Found by the Python-level fuzzer (tests/fuzz/pycorpus.py, `stack_after_a_handler`):
    # the resume function at the KeyError went on, after suppress swallowed it, in code only
    # its handler reaches; its stack was sized 4 where 5 were needed, and `gen(x)` got a
    # function for `x` (a TypeError eager never raises; a segfault before Nov 28).
    "code_after_a_suppressed_break": """
        D = {}
        def f(x, d):
            with contextlib.suppress(KeyError):
                y = x * D["missing"]
            def gen(v):
                yield v
            return sum(gen(x))
        calls = [(torch.ones(2), {}), (torch.ones(2), {})]
    """,
}

RUNNER = """
import contextlib, torch, refcomp
{program}
def outcome(fn, args):
    try:
        return ("value", fn(*args).tolist())
    except Exception as e:
        return ("raised", type(e).__name__, str(e), type(e.__cause__).__name__)
for backend in ("interp", "eager", "llvm"):
    refcomp.reset()
    compiled = refcomp.compile(f, backend=backend)
    for args in calls:
        got, want = outcome(compiled, args), outcome(f, args)
        assert got == want, (backend, got, want)
    print("same as eager on", backend, flush=True)
"""


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_exception_at_a_break_in_a_handler_block_is_eagers(name):
    """One child process per program runs it on every CPU backend (a crash names the
    backend by the last line it printed)."""
    source = RUNNER.format(program=textwrap.dedent(PROGRAMS[name]))
    proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert proc.stdout.split().count("same") == 3, proc.stdout


def test_check_code_refuses_an_unset_handler_depth():
    def has_handler(d):
        try:
            return d["k"]
        except KeyError:
            return None

    check_code(has_handler.__code__)  # CPython's own code passes
    concrete = ConcreteBytecode.from_code(has_handler.__code__)
    for entry in concrete.exception_table:
        entry.stack_depth = 32768  # what `bytecode` writes for a depth it never computed
    bad = concrete.to_code(stacksize=has_handler.__code__.co_stacksize,
                           compute_exception_stack_depths=False)
    with pytest.raises(BadCode, match="stack depth 32768"):
        check_code(bad)


def test_the_stack_depth_walk_agrees_with_cpython():
    """`max_stack_depth` (Note [Stack size]) never exceeds what CPython's compiler sized for
    its own code, on functions with handlers, with blocks, loops and calls."""
    import contextlib
    import inspect
    import json

    from refcomp.bytecode_gen import max_stack_depth
    codes = [f.__code__ for m in (contextlib, json.decoder, inspect)
             for f in vars(m).values() if inspect.isfunction(f)]
    assert len(codes) > 50
    for code in codes:
        assert max_stack_depth(code) <= code.co_stacksize, code.co_name


def test_check_code_refuses_a_stack_too_small_for_a_path():
    def calls(a, b, c):
        return max(a, b, c) + min(a, b, c)

    code = calls.__code__
    check_code(code)
    with pytest.raises(BadCode, match="needs a stack of"):
        check_code(code.replace(co_stacksize=1))
