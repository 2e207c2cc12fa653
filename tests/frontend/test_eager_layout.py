"""refcomp/tracer/eager_layout.py against the CPU kernels it ports: on random shapes,
broadcasts and memory layouts, the strides it computes equal those eager's CPU kernels
give (spec/correctness.md, "Output layout")."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from refcomp.tracer.eager_layout import (
    ROW_MAJOR_RESULTS,
    batch_norm_strides,
    common_dtype,
    conv_strides,
    getitem_strides,
    iterator_strides,
    pads_in_suggested_format,
    pointwise_kernel,
    row_major_result,
    row_major_without_grad,
    suggested_format_strides,
)

SIZES = st.sampled_from([0, 1, 1, 2, 3])


@st.composite
def laid_out(draw, shape):
    """A CPU tensor of `shape` in a random memory order, maybe step-sliced or expanded."""
    shape = tuple(shape)
    order = draw(st.permutations(range(len(shape))))
    step = draw(st.sampled_from([1, 1, 2]))
    phys = tuple(shape[d] for d in order)
    if step > 1 and shape:
        phys = phys[:-1] + (phys[-1] * step,)
    base = torch.randn(phys)
    if step > 1 and shape:
        base = base[..., ::step]
    t = base.permute([order.index(d) for d in range(len(shape))])
    if shape and draw(st.booleans()):  # expand a size-1 dim
        d = draw(st.integers(0, len(shape) - 1))
        if shape[d] == 1:
            t = t.expand(*shape[:d], 1, *shape[d + 1:])
    assert tuple(t.shape) == shape
    return t


@st.composite
def broadcast_operands(draw):
    rank = draw(st.integers(0, 4))
    shape = [draw(SIZES) for _ in range(rank)]
    out = []
    for _ in range(draw(st.integers(1, 3))):
        drop = draw(st.integers(0, rank))
        own = [1 if draw(st.integers(0, 3)) == 0 else n for n in shape[drop:]]
        out.append(draw(laid_out(own)))
    return out


def _dense(shape, strides):
    """The strides that matter: those of dims of size > 1 (as the fuzzer compares them;
    ATen's kernels differ among themselves on the rest, e.g. `where` of an empty result)."""
    return tuple(st for n, st in zip(shape, strides) if n > 1)


def _meta(t):
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


@given(broadcast_operands())
def test_iterator_strides_match_the_cpu_kernel(operands):
    if len(operands) == 1:
        eager = torch.neg(operands[0])
    elif len(operands) == 2:
        eager = torch.copysign(operands[0], operands[1])
    else:
        eager = torch.where(operands[0] > 0, operands[1], operands[2])
    shape = torch.broadcast_shapes(*(t.shape for t in operands))
    if 0 in shape:  # refcomp keeps the meta kernel's strides for an empty result: ATen's
        return      # kernels differ there (`where` is row-major, `add` permutes)
    got = iterator_strides(shape, [_meta(t) for t in operands])
    assert _dense(shape, got) == _dense(shape, eager.stride()), \
        (shape, got, eager.stride(), [(tuple(t.shape), t.stride()) for t in operands])


PROMOTING = {"add": torch.add, "mul": torch.mul, "hypot": torch.hypot,
             "atan2": torch.atan2, "copysign": torch.copysign, "div": torch.div,
             "eq": torch.eq, "lt": torch.lt, "logical_or": torch.logical_or,
             "maximum": torch.maximum}


@given(broadcast_operands(), st.sampled_from(sorted(PROMOTING)),
       st.lists(st.sampled_from([torch.float32, torch.float64, torch.int64]),
                min_size=2, max_size=2))
def test_iterator_strides_of_promoted_operands_match_the_cpu_kernel(operands, op, dtypes):
    # compute_types casts an input of another dtype before the layout is chosen: an
    # expanded float32 operand beside a float64 one counts as row-major (corpus
    # grad_hypot_broadcast_expanded_permuted_strides).
    if len(operands) != 2:
        return
    if op in ("hypot", "atan2", "copysign") and torch.int64 in dtypes:
        dtypes = [torch.float32 if d == torch.int64 else d for d in dtypes]
    a, b = (t.to(d) if t.dim() == 0 else
            torch.empty_strided(t.shape, t.stride(), dtype=d).copy_(t) for t, d in
            zip(operands, dtypes))
    eager = PROMOTING[op](a, b)
    shape = eager.shape
    if 0 in shape:
        return
    metas = [_meta(a), _meta(b)]
    got = iterator_strides(shape, metas, common_dtype(metas, eager.dtype))
    assert _dense(shape, got) == _dense(shape, eager.stride()), \
        (op, shape, got, eager.stride(), [(tuple(t.shape), t.stride(), t.dtype)
                                          for t in (a, b)])


ITEMS = st.one_of(
    st.just(slice(None)), st.just(None), st.integers(-1, 0),
    st.builds(slice, st.sampled_from([None, 1]), st.none(), st.sampled_from([None, 2])),
    st.just("list"), st.just("tensor"), st.just("tensor2d"), st.just("int32"))


def _index_item(kind, size):
    if kind == "list":
        return [0, -1] if size else []
    if kind in ("tensor", "int32"):
        t = torch.tensor([0, size - 1, 0] if size else [], dtype=torch.long)
        return t.int() if kind == "int32" else t
    if kind == "tensor2d":
        return torch.zeros((2, 1), dtype=torch.long) if size else torch.zeros((0, 1),
                                                                              dtype=torch.long)
    return kind


@given(st.integers(1, 4).flatmap(lambda r: st.tuples(
    st.lists(SIZES, min_size=r, max_size=r), st.lists(ITEMS, min_size=1, max_size=r))),
    st.data())
def test_getitem_strides_match_the_cpu_kernel(shape_items, data):
    shape, kinds = shape_items
    x = data.draw(laid_out(shape))
    # an item's target dim, to build an index in range (Ellipsis is not drawn)
    index, dim = [], 0
    for kind in kinds:
        if kind is None:
            index.append(None)
            continue
        if dim >= len(shape):
            break
        if isinstance(kind, int) and shape[dim] == 0:
            kind = slice(None)
        index.append(_index_item(kind, shape[dim]))
        dim += 1
    index = tuple(index)
    try:
        eager = x[index]
    except (IndexError, RuntimeError):
        return
    meta_index = tuple(_meta(i) if isinstance(i, torch.Tensor) else i for i in index)
    got = getitem_strides(_meta(x), meta_index)
    if got is None:
        assert not any(isinstance(i, (torch.Tensor, list)) for i in index)
        return
    assert _dense(eager.shape, got) == _dense(eager.shape, eager.stride()), \
        (tuple(x.shape), x.stride(), index, got, eager.stride())


@given(st.integers(2, 5).flatmap(lambda r: st.lists(SIZES.filter(bool), min_size=r,
                                                   max_size=r)),
       st.data())
def test_batch_norm_strides_match_the_cpu_kernel(shape, data):
    x = data.draw(laid_out(shape))
    if data.draw(st.booleans()) and x.dim() in (4, 5):  # an explicit channels_last input
        x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4
                         else torch.channels_last_3d)
    c = shape[1]

    def param():  # None, contiguous, or step-sliced (not contiguous)
        kind = data.draw(st.sampled_from(["none", "dense", "step"]))
        return None if kind == "none" else torch.randn(2 * c)[::2] if kind == "step" \
            else torch.randn(c)
    weight, bias = param(), param()
    training = data.draw(st.booleans()) and x.numel() > c
    stats = (param(), param())  # the running statistics play no part in the layout
    if None in stats and not (training and stats == (None, None)):
        stats = (torch.zeros(c), torch.ones(c))
    eager = torch.native_batch_norm(x, weight, bias, *stats, training, 0.1, 1e-5)[0]
    got = batch_norm_strides(_meta(x), *(None if p is None else _meta(p)
                                         for p in (weight, bias)))
    assert got == eager.stride(), (tuple(x.shape), x.stride(), got, eager.stride())


@given(st.integers(2, 5).flatmap(lambda r: st.lists(st.sampled_from([1, 2, 3]), min_size=r,
                                                   max_size=r)),
       st.sampled_from(["replicate", "reflect", "circular"]), st.data())
def test_pad_strides_match_the_cpu_kernel(shape, mode, data):
    """Replication and reflection pads: the input's suggested memory format (c10's test),
    a 4-d result of a 3-d pad too; circular ones are not among them (composite)."""
    x = data.draw(laid_out(shape))
    if data.draw(st.booleans()) and x.dim() in (4, 5):  # an explicit channels_last input
        x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4
                         else torch.channels_last_3d)
    spatial = data.draw(st.sampled_from([n for n in (1, 2, 3) if x.dim() in (n + 1, n + 2)]))
    pad = [data.draw(st.integers(0, 1)) for _ in range(2 * spatial)]
    try:
        eager = torch.nn.functional.pad(x, pad, mode=mode)
    except RuntimeError:  # reflect: a pad as large as the dim
        return
    assert pads_in_suggested_format("pad", [x, pad, mode], {}) == (mode != "circular")
    if mode == "circular":
        return
    got = suggested_format_strides(_meta(x), eager.shape)
    assert _dense(eager.shape, got) == _dense(eager.shape, eager.stride()), \
        (tuple(x.shape), x.stride(), pad, got, eager.stride())


@given(st.data())
def test_conv_strides_match_the_cpu_kernel(data):
    spatial = data.draw(st.sampled_from([1, 2]))
    n, c, o = (data.draw(st.sampled_from([1, 2, 4])) for _ in range(3))
    sizes = [data.draw(st.sampled_from([1, 2, 4])) for _ in range(spatial)]
    ks = [data.draw(st.integers(1, s)) for s in sizes]
    groups = data.draw(st.sampled_from([g for g in (1, 2) if c % g == 0 and o % g == 0]))
    transposed = data.draw(st.booleans())
    batched = data.draw(st.booleans())
    x = data.draw(laid_out(([n] if batched else []) + [c] + sizes))
    w = data.draw(laid_out([c, o // groups] + ks if transposed else [o, c // groups] + ks))
    if data.draw(st.booleans()) and spatial == 2:  # explicit channels_last operands
        x = x.contiguous(memory_format=torch.channels_last) if batched else x
        w = w.contiguous(memory_format=torch.channels_last)
    F = torch.nn.functional
    fn = {(1, False): F.conv1d, (1, True): F.conv_transpose1d, (2, False): F.conv2d,
          (2, True): F.conv_transpose2d}[spatial, transposed]
    eager = fn(x, w, stride=data.draw(st.sampled_from([1, 2])), groups=groups)
    got = conv_strides(_meta(x), _meta(w), eager.shape)
    assert _dense(eager.shape, got) == _dense(eager.shape, eager.stride()), \
        (tuple(x.shape), x.stride(), tuple(w.shape), w.stride(), got, eager.stride())


def test_pointwise_kernels_are_told_from_composites():
    assert pointwise_kernel("copysign") and pointwise_kernel("add")
    # composite: a Contiguous clone then masked_fill_ (row-major in eager)
    assert not pointwise_kernel("masked_fill")
    assert not pointwise_kernel("ldexp")  # x * 2 ** other
    assert not pointwise_kernel("mvlgamma")  # a sum; only mvlgamma.out has a CPU kernel
    assert not pointwise_kernel("sum")


ROW_MAJOR_CALLS = {
    "poisson": lambda x: torch.poisson(x.abs()),
    "rrelu": lambda x: torch.rrelu(x, training=True),
    "rrelu_with_noise": lambda x: torch.ops.aten.rrelu_with_noise(
        x, torch.zeros_like(x), 0.1, 0.3, True),
    "_standard_gamma": lambda x: torch._standard_gamma(x.abs() + 0.1),
    "normal": lambda x: torch.normal(x, x.abs()),  # normal(x, 1.0): row-major in both
}


@pytest.mark.parametrize("name", sorted(ROW_MAJOR_RESULTS))
@pytest.mark.parametrize("layout", ["transposed", "channels_last"])
def test_row_major_kernels_are_row_major_where_the_meta_kernel_is_not(name, layout):
    x = torch.randn(6, 5).t() if layout == "transposed" else \
        torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    eager, meta = ROW_MAJOR_CALLS[name](x), ROW_MAJOR_CALLS[name](_meta(x))
    assert eager.is_contiguous() and not meta.is_contiguous()  # the entry is needed
    assert row_major_result(name)
    assert torch.normal(x, 1.0).is_contiguous() and torch.normal(0.0, x.abs()).is_contiguous()


@pytest.mark.parametrize("grad", [False, True])
def test_max_pool1d_is_row_major_only_without_grad(grad):
    x = torch.randn(2, 5, 4).transpose(1, 2).requires_grad_(grad)  # channels-last 1-d
    eager = torch.nn.functional.max_pool1d(x, 2)
    meta = torch.nn.functional.max_pool1d(_meta(x).requires_grad_(grad), 2)
    assert not meta.is_contiguous()  # the meta kernel follows the input either way
    assert eager.is_contiguous() == (not grad) == row_major_without_grad("max_pool1d", meta)


def test_an_expanded_operand_of_another_dtype_counts_as_row_major():
    # corpus grad_hypot_broadcast_expanded_permuted_strides: eager (1, 16, 4); without the
    # cast, the expanded operand's stride 0 left the permuted one's order, (1, 4, 20).
    a = torch.randn(1, 4).expand(5, 4)
    b = torch.randn(4, 5, 4, dtype=torch.float64).permute(2, 1, 0).contiguous().permute(2, 1, 0)
    for op in (torch.hypot, torch.add, torch.lt):
        eager = op(a, b)
        metas = [_meta(a), _meta(b)]
        got = iterator_strides(eager.shape, metas, common_dtype(metas, eager.dtype))
        assert got == eager.stride(), (op, got, eager.stride())
