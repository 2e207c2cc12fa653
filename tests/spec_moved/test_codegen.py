"""Worked examples moved out of spec/codegen.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_eager_backend():
    """spec/codegen.md, "Backends" (the eager backend)."""
    import torch

    from codegen.backends import get_backend
    from ir import parse

    g = parse("""func @f(%x: f32[s0,3], %b: f32[3]) -> f32[s0,3] {
      %0 = reshape %b {shape=[1,3]} : f32[1,3]
      %1 = expand %0 {shape=[s0,3]} : f32[s0,3]
      %2 = add %x, %1 : f32[s0,3]
      %3 = relu %2 : f32[s0,3]
      return %3
    }""")
    x, b = torch.randn(5, 3, requires_grad=True), torch.randn(3)
    want = torch.relu(x + b)
    for name in ("eager", "interp"):
        (got,) = get_backend(name).compile_graph(g, {})(x, b)
        assert got.dtype == torch.float32 and torch.allclose(got, want)
    (got,) = get_backend("eager").compile_graph(g, {})(x, b)
    got.sum().backward()  # eager records autograd
    assert torch.equal(x.grad, (want > 0).float())


@as_module
def test_kernel_model():
    """spec/codegen.md, "Kernel model"."""
    import numpy as np

    import ir
    from codegen.kernel import print_kernel
    from codegen.kernel_numpy import run_kernel
    from codegen.lower import lower_region

    g = ir.parse("""
    func @f(%x: f32[3,4]) -> f32[3] {
      %0 = fused %x {kind="reduction"} : f32[3] {
      ^(%a: f32[3,4]):
        %1 = exp %a : f32[3,4]
        %2 = sum %1 {dims=[1]} : f32[3]
        return %2
      }
      return %0
    }""")
    k = lower_region(g.nodes[0].body)
    text = print_kernel(k)
    assert "outer [o0 < 3]" in text and "stage [r0 < 4]" in text and "reduce a0 %" in text
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    bufs = {"in0": x.reshape(-1), "out0": np.zeros(3, np.float32)}
    run_kernel(k, bufs)
    assert np.allclose(bufs["out0"], ir.run(g, [x])[0])


@as_module
def test_triton():
    """spec/codegen.md, "Triton"."""
    import ir
    from codegen.lower import lower_region
    from codegen.triton.emit import emit_kernel

    g = ir.parse("""
    func @f(%x: f32[8,100]) -> f32[8] {
      %0 = fused %x {kind="reduction"} : f32[8] {
      ^(%a: f32[8,100]):
        %1 = exp %a : f32[8,100]
        %2 = sum %1 {dims=[1]} : f32[8]
        return %2
      }
      return %0
    }""")
    k = lower_region(g.nodes[0].body)
    persistent = emit_kernel(k, "k_sum_exp")
    assert "def k_sum_exp(in0, out0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr)" \
        in persistent.source
    assert "for roffset" not in persistent.source and "tl.math.exp" in persistent.source
    assert dict(persistent.blocks) == {"XBLOCK": 8, "RBLOCK": 128}
    assert persistent.sizes == (("xnumel", 8), ("rnumel", 100)) and persistent.grid == 1
    looped = emit_kernel(k, "k_sum_exp", max_rblock=32)
    assert "for roffset in range(0, rnumel, RBLOCK):" in looped.source
    assert dict(looped.blocks) == {"XBLOCK": 8, "RBLOCK": 32}
