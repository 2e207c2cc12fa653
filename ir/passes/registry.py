"""Passes by name.  A pass is a callable `Graph -> Graph` whose docstring is its contract.

    @register_pass("dce")
    def dce(g: Graph) -> Graph: ...

The decorator is the only registration: every module of the `ir.passes` package is
imported on the first lookup, so a new module there is found without a list to edit.
Spec: spec/passes.md, "Writing a new pass".
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from ir.graph import Graph

Pass = Callable[[Graph], Graph]
_PASSES: dict[str, Pass] = {}
_loaded: list[bool] = []


def register_pass(name: str):
    def wrap(fn: Pass) -> Pass:
        if name in _PASSES and _PASSES[name] is not fn:
            raise ValueError(f"pass {name!r} is registered twice")
        _PASSES[name] = fn
        return fn
    return wrap


def _load() -> None:
    if _loaded:
        return
    import ir.passes

    for module in pkgutil.iter_modules(ir.passes.__path__):
        importlib.import_module(f"ir.passes.{module.name}")
    _loaded.append(True)


def get_pass(name: str) -> Pass:
    _load()
    try:
        return _PASSES[name]
    except KeyError:
        valid = ", ".join(sorted(_PASSES)) or "none"
        raise ValueError(f"unknown pass {name!r}; valid passes: {valid}") from None


def all_passes() -> dict[str, Pass]:
    _load()
    return dict(_PASSES)
