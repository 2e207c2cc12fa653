"""What a code object writes that outlives its frame, read from its bytecode and source.

Owns: `stored_names` (the globals and attribute names a code object assigns),
`counted_attrs` (the attributes some store computes from their own value: counters) and
`mutated_containers` (the locals the code mutates through a method or item store).  The
tracer uses them to decide which reads happen outside the graph and which effects are
replayed after it.  Must not know graphs or guards.  Spec: spec/runtime.md, "Side
effects", which defines Note [Reading what the frame writes].
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from refcomp.tracer.frame import _instructions as instructions

_STORED: dict = {}  # code -> (globals assigned, attribute names assigned)
_COUNTED: dict = {}  # code -> attribute names some store computes from themselves


def stored_names(code) -> tuple:
    """(names of globals the code assigns, attribute names it assigns), as frozensets."""
    cached = _STORED.get(code)
    if cached is None:
        insts, _ = instructions(code)
        globs = frozenset(i.argval for i in insts if i.opname in ("STORE_GLOBAL",
                                                                  "DELETE_GLOBAL"))
        attrs = frozenset(i.argval for i in insts if i.opname in ("STORE_ATTR",
                                                                  "DELETE_ATTR"))
        cached = _STORED[code] = (globs, attrs)
    return cached


def counted_attrs(code) -> frozenset:
    """The attribute names the code assigns from their own value (counters, Note [Reading
    what the frame writes]); every assigned name when the source cannot be read."""
    cached = _COUNTED.get(code)
    if cached is None:
        stored = stored_names(code)[1]
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
        except (OSError, TypeError, SyntaxError, IndentationError):
            tree = None
        cached = _COUNTED[code] = stored if tree is None else frozenset(
            n for n in stored if _counts(tree, n))
    return cached


def _names_in(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _reads_attr(node, name) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(node))


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _counts(tree, name) -> bool:
    """Whether a store of attribute `name` in `tree` may be computed from its old value."""
    tainted: set = set()  # locals computed (anywhere) from the attribute
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            value = getattr(node, "value", None) if isinstance(
                node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) else \
                node.iter if isinstance(node, (ast.For, ast.comprehension)) else None
            if value is None or not (_reads_attr(value, name) or _names_in(value) & tainted):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            new = set().union(*(_names_in(t) for t in targets)) - tainted
            if new:
                tainted |= new
                changed = True
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            for store in ast.walk(t):
                if not (isinstance(store, ast.Attribute) and store.attr == name):
                    continue
                value = node.value
                if value is None or _reads_attr(value, name) or \
                        _names_in(value) & (tainted | {_root(store)}):
                    return True
    # Every other store (`self.n += 1`, `for self.n in ...`, `del self.n`) counts.
    plain = {id(t) for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
             for t in ast.walk(t)}
    return any(isinstance(n, ast.Attribute) and n.attr == name and
               isinstance(n.ctx, (ast.Store, ast.Del)) and id(n) not in plain
               for n in ast.walk(tree))


MUTATORS = frozenset("append extend insert pop remove clear update setdefault popitem sort "
                     "reverse __setitem__ __delitem__".split())


def mutated_containers(code) -> frozenset:
    """Locals the code mutates in place: `name.append(...)`, `name[k] = v`, `del name[k]`.

    Note [Mutated containers]: a list or dict passed in and appended to would be a
    LENGTH_CHECK guard (and its items graph inputs) if the tracer read it, so every
    call would recompile.  At a break point the tracer treats such a local as opaque
    (its type is guarded, its contents are not) and its mutations run concretely.
    """
    cached = _MUTATED.get(code)
    if cached is None:
        insts, _ = instructions(code)
        names = set()
        for i, inst in enumerate(insts[:-1]):
            if inst.opname != "LOAD_FAST":
                continue
            nxt = insts[i + 1]
            if nxt.opname in ("LOAD_METHOD", "LOAD_ATTR") and nxt.argval in MUTATORS:
                names.add(inst.argval)
            elif i + 2 < len(insts) and nxt.opname in ("LOAD_CONST", "LOAD_FAST") and \
                    insts[i + 2].opname in ("STORE_SUBSCR", "DELETE_SUBSCR"):
                names.add(inst.argval)
        # Note [Fresh keyword dicts]: the `**kwargs` parameter of a frame called by
        # refcomp is a dict CPython made for this call; nobody else holds it, so its
        # mutations (`kwargs.pop("return_dict", None)` in transformers' wrappers) are
        # the frame's own business: it is traced like any dict.  Generated code (a
        # resume function) receives it as a plain argument and keeps the rule above.
        from refcomp.bytecode_gen import GENERATED

        if code.co_flags & inspect.CO_VARKEYWORDS and code not in GENERATED:
            names.discard(code.co_varnames[code.co_argcount + code.co_kwonlyargcount +
                                           bool(code.co_flags & inspect.CO_VARARGS)])
        cached = _MUTATED[code] = frozenset(names)
    return cached


_MUTATED: dict = {}
