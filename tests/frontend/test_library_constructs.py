"""Python constructs that Hugging Face `transformers` models run inside `forward`, each
reduced to a few lines: captured without a break (where Dynamo captures it too), equal to
eager, and guarded (a changed fact recompiles).  The models themselves are in
tests/models/test_transformers.py; spec/tracer.md, "Python features", says what is traced.
"""

import torch

import refcomp


def explain(fn, *args, **kwargs):
    refcomp.reset()
    return refcomp.explain(fn, *args, backend="eager", **kwargs)


# --- super() ---------------------------------------------------------------------------------
class Registry(dict):
    """transformers' _CanRecordRegistry: a dict subclass keyed by class name."""

    def get(self, model):
        return super().get(type(model).__name__) or {}


REGISTRY = Registry()


class Base(torch.nn.Module):
    def scale(self, x):
        return x * 2

    @classmethod
    def offset(cls):
        return 1 if cls is Base else 3


class Child(Base):
    def scale(self, x):
        return super().scale(x) + super(Child, self).offset()

    def forward(self, x):
        flags = REGISTRY.get(self)
        for key in flags:
            x = x + flags[key]
        return self.scale(x)


def test_zero_argument_super_is_traced():
    # Was a break at every call ("call of type <class 'super'>"): 128 breaks over the six
    # transformers models, all in _CanRecordRegistry.get.
    REGISTRY.clear()
    REGISTRY["Child"] = {"a": 1.5, "b": 2}
    model, x = Child(), torch.randn(3)
    report = explain(model, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, model(x))
    assert model(torch.zeros(1)).item() == (1.5 + 2) * 2 + 3


def test_super_read_of_a_registry_is_guarded():
    REGISTRY.clear()
    REGISTRY["Child"] = {"a": 1.0}
    refcomp.reset()
    model, x = Child(), torch.randn(3)
    compiled = refcomp.compile(model, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))
    REGISTRY["Child"] = {"a": 5.0, "b": -1.0}  # a new entry: recompiles
    torch.testing.assert_close(compiled(x), model(x))
    del REGISTRY["Child"]  # absent: super().get returns None, `or {}`
    torch.testing.assert_close(compiled(x), model(x))
    assert refcomp.stats()["counters"]["graphs"] >= 3
