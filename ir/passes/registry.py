"""Passes by name.  A pass is a callable `Graph -> Graph` whose docstring is its contract.

    @register_pass("dce")
    def dce(g: Graph) -> Graph: ...

Spec: spec/passes.md, "Writing a pass".
"""

from __future__ import annotations

import importlib
from typing import Callable

from ir.graph import Graph

Pass = Callable[[Graph], Graph]
_PASSES: dict[str, Pass] = {}

# Modules that define passes; importing them registers their passes.
PASS_MODULES = ("decompose", "fold", "simplify", "cse", "dce", "fuse", "plan_memory")


def register_pass(name: str):
    def wrap(fn: Pass) -> Pass:
        if name in _PASSES and _PASSES[name] is not fn:
            raise ValueError(f"pass {name!r} is registered twice")
        _PASSES[name] = fn
        return fn
    return wrap


def _load() -> None:
    for module in PASS_MODULES:
        try:
            importlib.import_module(f"ir.passes.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"ir.passes.{module}":
                raise


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
