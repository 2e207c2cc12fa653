"""The opaque `aten` op: text round trip, verification, and execution on every backend.

Semantics are torch's (codegen/opaque.py runs the named callable); these tests hold the
IR side (print/parse/verify), the args grammar, and that interp, eager, llvm and triton
all run the node and equal torch.
"""

import numpy as np
import pytest
import torch

import codegen.opaque  # noqa: F401  (registers the executor)
from codegen.backends import get_backend
from codegen.opaque import OpaqueArgsError, callable_name, decode_args, encode_args, resolve
from ir import parse, print_graph, run, verify

ADDMM = """func @f(%x: f32[3,3], %y: f32[3,3]) -> f32[3,3] {
  %0 = aten %x, %y, %y {fn="torch.addmm", args="T[0], T[1], T[2], beta=0.5, alpha=2", results="f32[3,3]"} : f32[3,3]
  %1 = relu %0 : f32[3,3]
  return %1
}
"""

# A written operand (index_fill_) comes back as an extra result; a view result is a copy.
MUTATE = """func @g(%x: f32[5], %i: i64[2]) -> (f32[5], f32[5], f32[5]) {
  %0, %1 = aten %x, %i {fn="torch.Tensor.index_fill_", args="T[0], 0, T[1], 2.5", results="f32[5]; f32[5]", mutates=[0], views=[0]} : f32[5], f32[5]
  %2 = aten %x {fn="torch.Tensor.clamp_min", args="T[0], 0.0", results="f32[5]"} : f32[5]
  return %0, %1, %2
}
"""


def test_text_round_trips_and_verifies():
    for text in (ADDMM, MUTATE):
        g = parse(text)
        assert verify(g) == []
        assert print_graph(g) == text


def test_declared_types_are_checked_against_results():
    bad = ADDMM.replace(': f32[3,3]\n  %1', ': f32[3,4]\n  %1')
    diagnostics = verify(parse(bad))
    assert diagnostics and "aten produces f32[3,3]" in diagnostics[0].message


def test_mutated_operand_must_keep_its_shape():
    bad = """func @g(%x: f32[5], %i: i64[2]) -> f32[4] {
  %0, %1 = aten %x, %i {fn="torch.Tensor.index_fill_", args="T[0], 0, T[1], 2.5", results="f32[5]; f32[4]", mutates=[0]} : f32[5], f32[4]
  return %1
}
"""
    assert any("keep its shape" in d.message for d in verify(parse(bad)))


def _inputs():
    x = torch.randn(3, 3)
    return x, torch.randn(3, 3)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm", "triton"])
def test_every_backend_runs_the_node(backend):
    if backend == "triton":
        pytest.importorskip("triton")
        from codegen.triton import interpreting

        if not interpreting():
            pytest.skip("CUDA present: this test uses CPU tensors")
    g = parse(ADDMM)
    x, y = _inputs()
    (got,) = get_backend(backend).compile_graph(g, {})(x, y)
    torch.testing.assert_close(got, torch.relu(torch.addmm(x, y, y, beta=0.5, alpha=2)))

    g = parse(MUTATE)
    x, i = torch.randn(5), torch.tensor([0, 3])
    before = x.clone()
    written, result, clamped = get_backend(backend).compile_graph(g, {})(x, i)
    want = before.clone().index_fill_(0, i, 2.5)
    torch.testing.assert_close(written, want)
    torch.testing.assert_close(result, want)
    torch.testing.assert_close(clamped, before.clamp_min(0.0))
    torch.testing.assert_close(x, before)  # the node is functional: the input is untouched


def test_interpreter_runs_the_node_on_numpy():
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    (got,) = run(parse(ADDMM), [x, x])
    t = torch.from_numpy(x)
    np.testing.assert_allclose(got, torch.relu(torch.addmm(t, t, t, beta=0.5, alpha=2)).numpy())


def test_args_grammar_round_trips_constants():
    values = [1, -2.5, float("inf"), float("-inf"), None, True, "mean", (1,), [2, 3],
              torch.float64, torch.channels_last, torch.strided, torch.device("cpu"),
              slice(None, 3, 2), Ellipsis, 2 + 3j]
    text = encode_args(values, {"dim": -1}, lambda v: None)
    args, kwargs = decode_args(text)([])
    assert args == values and kwargs == {"dim": -1}
    nan_args, _ = decode_args(encode_args([float("nan")], {}, lambda v: None))([])
    assert nan_args[0] != nan_args[0]


@pytest.mark.parametrize("text", ["__import__('os')", "T[0].foo", "torch.add", "x",
                                  "*T", "open('f')", "T['a']", "1 + 2"])
def test_args_grammar_refuses_anything_but_constants(text):
    with pytest.raises(OpaqueArgsError):
        decode_args(text)


def test_callable_names_resolve_back_to_the_callable():
    for fn in (torch.addmm, torch.Tensor.addcmul, torch._C._nn.gelu, torch.ops.aten.add.Tensor,
               torch.linalg.det, torch.special.erfcx, torch.fft.rfft):
        name = callable_name(fn)
        assert name is not None and resolve(name) == fn, fn
    assert callable_name(len) is None and callable_name(lambda x: x) is None


def test_running_without_an_executor_says_what_is_missing(monkeypatch):
    from ir.ops import opaque

    monkeypatch.setattr(opaque, "_EXECUTOR", None)
    with pytest.raises(Exception, match="needs torch to run"):
        run(parse(ADDMM), [np.zeros((3, 3), np.float32)] * 2)


def test_interpreter_keeps_rank_zero_operands():
    # Regression (fuzzer): the numpy executor made 0-d operands 1-d.
    g = parse("""func @h(%x: f32[]) -> f32[] {
  %0 = aten %x {fn="torch.frac", args="T[0]", results="f32[]"} : f32[]
  return %0
}
""")
    (got,) = run(g, [np.array(2.75, np.float32)])
    assert got.shape == () and float(got) == 0.75


# Complex values (c64/c128) between `aten` nodes; IR ops take them only with the `complex`
# fact (spec/ir.md, "Complex values").
COMPLEX = """func @c(%x: f32[4]) -> (f32[4,2], c64[4]) {
  %0 = aten %x {fn="torch._C._fft.fft_fft", args="T[0]", results="c64[4]"} : c64[4]
  %1 = aten %0 {fn="torch.view_as_real", args="T[0]", results="f32[4,2]", views=[0]} : f32[4,2]
  return %1, %0
}
"""


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_complex_values_between_aten_nodes(backend):
    g = parse(COMPLEX)
    assert verify(g) == [] and print_graph(g) == COMPLEX
    x = torch.randn(4)
    if backend == "interp":
        got = [torch.from_numpy(np.asarray(a)) for a in run(g, [x.numpy()])]
    else:
        got = get_backend(backend).compile_graph(g, {})(x)
    want = torch.fft.fft(x)
    torch.testing.assert_close(got[1], want)
    torch.testing.assert_close(got[0], torch.view_as_real(want))


def test_ir_ops_without_a_complex_form_reject_complex_values():
    from ir.builder import ComplexDTypeError, GraphBuilder
    from ir.types import TensorType, c64

    bad = COMPLEX.replace("return %1, %0", "%2 = sigmoid %0 : c64[4]\n  return %1, %2")
    assert any("sigmoid takes no complex values" in d.message for d in verify(parse(bad)))
    b = GraphBuilder("f")
    x = b.input("x", TensorType(c64, (4,)))
    with pytest.raises(ComplexDTypeError):
        b.sigmoid(x)
    assert b.neg(x).type.dtype == c64  # neg has a complex form
