"""A small differential check against eager for the wrong-result regression tests.

`assert_like_eager(f, make_args, backend)` runs `f` eagerly and compiled (twice: the
second call runs the cache entry) on two results of `make_args()` under the same seed and asserts what
spec/correctness.md promises: equal values, dtypes and shapes, equal inputs after the
call, the same return types (torch.return_types included), the same exception type when
eager raises, and the same aliasing: which outputs share storage with which inputs and
with each other.
"""

import torch

import refcomp


def _leaves(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for i in x for t in _leaves(i)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _leaves(v)]
    return []


def _same(want, got, path="out", rtol=1e-5, atol=1e-6):
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, \
            f"{path}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}"
        if want.is_floating_point():
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f"{path}: {m}")
        else:
            assert torch.equal(got, want), f"{path}: {got} != {want}"
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (w, g) in enumerate(zip(want, got)):
            _same(w, g, f"{path}[{i}]", rtol, atol)
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            _same(want[k], got[k], f"{path}[{k!r}]", rtol, atol)
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def _sharing(outs, ins):
    """Which tensors share storage: pairs (output i, input j) and (output i, output k)."""
    def key(t):
        return t.untyped_storage().data_ptr() if t.numel() else None

    pairs = set()
    for i, o in enumerate(outs):
        for j, x in enumerate(ins):
            if key(o) is not None and key(o) == key(x):
                pairs.add(("in", i, j))
            if o is x:
                pairs.add(("is", i, j))
        for k in range(i):
            if key(o) is not None and key(o) == key(outs[k]):
                pairs.add(("out", i, k))
    return pairs


def assert_like_eager(f, make_args, backend, *, calls=2, rtol=1e-5, atol=1e-6):
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    for call in range(calls):
        torch.manual_seed(call)
        args_e = make_args()
        torch.manual_seed(call)
        args_c = make_args()
        try:
            want = f(*args_e)
        except Exception as err:  # eager raises: refcomp raises the same type
            try:
                cf(*args_c)
            except Exception as got:
                assert type(got) is type(err), f"{type(got).__name__}: {got} (eager: {err})"
                continue
            raise AssertionError(f"eager raised {type(err).__name__}: {err}; refcomp ran")
        got = cf(*args_c)
        _same(want, got, rtol=rtol, atol=atol)
        _same(tuple(args_e), tuple(args_c), "inputs after the call", rtol, atol)
        ins_e, ins_c = _leaves(args_e), _leaves(args_c)
        assert _sharing(_leaves(got), ins_c) == _sharing(_leaves(want), ins_e), "aliasing"
        # A write to each output reaches exactly what it reaches in eager.
        for o_w, o_g in zip(_leaves(want), _leaves(got)):
            if o_w.numel() and not o_w.requires_grad and o_w.dtype != torch.bool:
                o_w.add_(1)
                o_g.add_(1)
        _same(tuple(args_e), tuple(args_c), "inputs after writing the outputs", rtol, atol)
        _same(want, got, "outputs after writing the outputs", rtol, atol)
    refcomp.reset()
