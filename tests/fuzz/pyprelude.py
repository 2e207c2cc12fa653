"""The module every Python-level fuzz program starts with (tests/fuzz/pygen.py): the
classes and state its statements use.  Side effects write `STATE` and `G_CALLS`, which
the oracle compares after every call.  Run afresh for the eager and the compiled run."""

import contextlib
import sys
import types

import torch

from tests.fuzz.program import OPAQUE  # noqa: F401  (a forced graph break)

STATE = {"n": 0, "log": []}
G_CALLS = 0
G_SCALE = 1.5
K_DEFAULT = 2.0
D = {"present": 1.0}
SEQ = [1, 2]
TAGGED = torch.ones(1)
_ = contextlib  # used by the statements


class Prop:
    def __init__(self):
        self.k = 2.0

    @property
    def scale(self):
        STATE["n"] += 1
        return self.k


class PropWithSetter(Prop):
    @property
    def scale(self):
        STATE["log"].append("scale")
        return self.k * 0.5

    @scale.setter
    def scale(self, value):
        self.k = value


P, PD = Prop(), PropWithSetter()


class Desc:
    def __get__(self, obj, owner=None):
        STATE["n"] += 1
        return 0.5


class HasDesc:
    d = Desc()


HD = HasDesc()


class GetattrFallback:
    def __getattr__(self, name):
        STATE["log"].append(name)
        return 1.5


GA = GetattrFallback()


class Aliased:
    """transformers' PretrainedConfig in miniature: aliases mapped in __getattribute__."""

    attribute_map = {"hidden": "d"}
    offset = 0.25

    def __init__(self):
        self.d = 2.0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            STATE["n"] += 1
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


CFG = Aliased()


class Wrap:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Wrap(self.t + other)


class Table:
    def __init__(self):
        self.values = [1.0, 2.0, 3.0]

    def __getitem__(self, i):
        STATE["n"] += 1
        return self.values[i]


TABLE = Table()


class Scaler:
    def __init__(self, s):
        self.s = s

    def __call__(self, v):
        STATE["n"] += 1
        return v * self.s


SCALER = Scaler(3.0)


class ConfigObj:
    def __init__(self):
        self.bias = 0.5


CFG_OBJ = ConfigObj()

pyfuzz_mod = types.ModuleType("pyfuzz_mod")
pyfuzz_mod.K = 2.0
sys.modules["pyfuzz_mod"] = pyfuzz_mod
