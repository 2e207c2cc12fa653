"""Worked examples moved out of spec/ (issue 37).

The spec keeps at most one short example per rule; the longer ones (many cases of a rule, long
setups, loops over backends) live here, each test citing the spec section it checks.  A moved
example ran in spec/ as a module of its own, and its globals may matter (a global the traced frame
reads or assigns is guarded or breaks as `G['name']`), so `as_module` runs the test's body the same
way: dedented, in a fresh module namespace, with tracebacks pointing at this package's lines.
"""

import ast
import functools
import inspect
import textwrap


def as_module(fn):
    """Run `fn`'s body (after its docstring) as the top level of a fresh module."""
    lines = inspect.getsource(fn).splitlines(keepends=True)
    (node,) = ast.parse(textwrap.dedent("".join(lines))).body
    first = node.body[0].end_lineno  # the body starts after the docstring
    source = "\n" * (fn.__code__.co_firstlineno - 1 + first) + textwrap.dedent("".join(lines[first:]))
    code = compile(source, fn.__code__.co_filename, "exec")

    @functools.wraps(fn)
    def run():
        exec(code, {"__name__": "spec_example"})

    return run
