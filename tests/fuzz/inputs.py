"""Input tensors of a fuzz program: one deterministic constructor, `make`, used by the
generator (to type statements while drawing them), by the runner (once for eager, once for
the compiled function: the same values in the same layout) and by every printed repro.

Layouts (all give the same logical values for the same seed; only strides differ):

| layout          | how                                                         | needs   |
|-----------------|-------------------------------------------------------------|---------|
| `contiguous`    | a fresh tensor                                              |         |
| `transposed`    | a tensor with the last two dims swapped, `.transpose(-1, -2)` | rank>=2 |
| `permuted`      | dims reversed, then `.permute` back                         | rank>=2 |
| `step`          | every other element of a wider last dim (`[..., ::2]`)      | rank>=1 |
| `offset`        | `[1:]` of a tensor one row longer: storage offset > 0       | rank>=1 |
| `expanded`      | size-1 dim 0 expanded to its size: stride 0                 | rank>=1 |
| `channels_last` | `.contiguous(memory_format=torch.channels_last)`            | rank 4  |
"""

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "bool": torch.bool}
LAYOUTS = ["contiguous", "transposed", "permuted", "step", "offset", "expanded",
           "channels_last"]


def layout_fits(layout: str, rank: int) -> bool:
    need = {"transposed": 2, "permuted": 2, "step": 1, "offset": 1, "expanded": 1}
    if layout == "channels_last":
        return rank == 4
    return rank >= need.get(layout, 0)


# Value families (the optional fifth element of an input spec): `normal` is 2 * N(0, 1);
# `shifted` is 100 + 2 * N(0, 1) for floats (a mean far from 0, as activations and
# statistics have: a half-precision decomposition that rounds its partial results to
# half loses the small deviations there: spec/testing.md, "Inputs"); ints and bools are
# the same in both.
VALUES = ["normal", "shifted"]


def _values(shape, dtype, gen, values="normal"):
    """Values that keep float programs away from overflow and give ints small magnitudes
    (ties and zeros do occur, as in real data)."""
    if values not in VALUES:
        raise ValueError(f"unknown values {values!r}; one of {VALUES}")
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if not dtype.is_floating_point:
        return torch.randint(-4, 5, shape, generator=gen).to(dtype)
    shift = 100.0 if values == "shifted" else 0.0
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * 2 + shift).to(dtype)


def make(shape, dtype, layout="contiguous", seed=0, values="normal"):
    """A tensor of `shape` (a tuple) and `dtype` (a torch dtype or its name) in `layout`,
    its values from the family `values`."""
    if isinstance(dtype, str):
        dtype = DTYPES[dtype]
    shape = tuple(shape)
    gen = torch.Generator().manual_seed(seed)
    if not layout_fits(layout, len(shape)):
        raise ValueError(f"layout {layout!r} needs another rank than {len(shape)}")
    if layout == "contiguous":
        return _values(shape, dtype, gen, values)
    if layout == "transposed":
        base = _values(shape[:-2] + (shape[-1], shape[-2]), dtype, gen, values)
        return base.transpose(-1, -2)
    if layout == "permuted":
        rev = tuple(reversed(range(len(shape))))
        base = _values(tuple(shape[i] for i in rev), dtype, gen, values)
        return base.permute(rev)
    if layout == "step":
        base = _values(shape[:-1] + (2 * shape[-1],), dtype, gen, values)
        return base[..., ::2]
    if layout == "offset":
        base = _values((shape[0] + 1,) + shape[1:], dtype, gen, values)
        return base[1:]
    if layout == "expanded":
        base = _values((1,) + shape[1:], dtype, gen, values)
        return base.expand(shape)
    if layout == "channels_last":
        return _values(shape, dtype, gen, values).contiguous(memory_format=torch.channels_last)
    raise ValueError(f"unknown layout {layout!r}; one of {LAYOUTS}")
