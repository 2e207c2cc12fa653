"""Worked examples moved out of spec/passes.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_the_pass_manager():
    """spec/passes.md, "The pass manager"."""
    import io

    from ir import parse
    from ir.passes.manager import PassError, run_pipeline

    g = parse("""func @f(%x: f32[4]) -> f32[4] {
      %0 = add %x, %x : f32[4]
      %1 = neg %x : f32[4]
      return %1
    }""")
    log, timings = io.StringIO(), {}
    out = run_pipeline(g, ["dce"], print_after="all", stream=log, timings=timings)
    assert [n.op.name for n in out.nodes] == ["neg"] and list(timings) == ["dce"]
    assert log.getvalue().startswith("# after dce (")

    def negate_to_abs(graph):  # a wrong "optimization": neg -> abs
        from ir.graph import Node
        from ir.ops.registry import lookup
        node = graph.nodes[1]
        return graph.with_nodes([graph.nodes[0], Node(lookup("abs"), node.inputs, {}, node.outputs)])

    try:
        run_pipeline(g, [negate_to_abs], check_semantics=True)
        raise AssertionError("the semantic check must catch it")
    except PassError as e:
        assert "pass 'negate_to_abs' changed the program's results" in str(e)


@as_module
def test_worked_example():
    """spec/passes.md, "Worked example"."""
    import subprocess
    import sys
    source = """func @scaled_softmax(%x: f32[2,8]) -> f32[2,8] {
      %0 = full {value=8.0} : f32[]
      %1 = rsqrt %0 : f32[]
      %2 = mul %x, %1 : f32[2,8]
      %3 = softmax %2 {dim=1} : f32[2,8]
      %4 = full {value=1.0} : f32[]
      %5 = mul %3, %4 : f32[2,8]
      %6 = reshape %5 {shape=[16]} : f32[16]
      %7 = reshape %6 {shape=[2,8]} : f32[2,8]
      return %7
    }
    """
    result = subprocess.run([sys.executable, "-m", "ir.opt", "--check-semantics"], input=source,
                            capture_output=True, text=True, check=True).stdout
    assert result == """func @scaled_softmax(%x: f32[2,8]) -> f32[2,8] {
      %0 = full {value=0.3535533845424652} : f32[]
      %1 = mul %x, %0 : f32[2,8]
      %2 = amax %1 {dims=[1], keepdim=true} : f32[2,1]
      %3 = expand %2 {shape=[2,8]} : f32[2,8]
      %4 = sub %1, %3 : f32[2,8]
      %5 = exp %4 : f32[2,8]
      %6 = sum %5 {dims=[1], keepdim=true} : f32[2,1]
      %7 = expand %6 {shape=[2,8]} : f32[2,8]
      %8 = div %5, %7 : f32[2,8]
      return %8
    }
    """


@as_module
def test_freeze():
    """spec/passes.md, "freeze"."""
    import numpy as np

    from ir import GraphBuilder, run
    from ir.passes.fold import freeze
    from ir.types import TensorType, f32

    b = GraphBuilder("net")
    x = b.input("x", TensorType(f32, (1, 2, 4, 4)))
    w = b.input("w", TensorType(f32, (3, 2, 1, 1)))
    stats = [b.input(n, TensorType(f32, (3,))) for n in ("mean", "var", "gamma", "beta")]
    g = b.build([b.batch_norm(b.conv2d(x, w), *stats)])
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(3, 2, 1, 1)), "mean": rng.normal(size=3),
              "var": rng.uniform(0.5, 2, 3), "gamma": rng.normal(size=3), "beta": rng.normal(size=3)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    frozen = freeze(g, params)
    assert frozen.op_counts() == {"constant": 2, "conv2d": 1, "expand": 1, "add": 1}
    xs = rng.normal(size=(1, 2, 4, 4)).astype(np.float32)
    assert np.allclose(run(frozen, [xs])[0], run(g, [xs, *params.values()])[0], atol=1e-5)


@as_module
def test_writing_a_new_pass():
    """spec/passes.md, "Writing a new pass"."""
    from ir.passes.registry import register_pass
    from ir.rewrite import RuleTable, rewrite

    STRENGTH = RuleTable("strength")

    @STRENGTH.rule("mul")
    def mul_by_two(node, rw):
        """x * 2 -> x + x"""
        for x, two in (node.inputs, node.inputs[::-1]):
            if rw.splat(two) == 2 and x.type == node.output.type:
                return rw.emit("add", [x, x])
        return None

    @register_pass("strength")
    def strength(g):
        """Rewrites x * 2 into x + x.  Never touches effectful or fused nodes.
        Requires: a verified graph.  Preserves: types, results exactly.  Idempotent."""
        return rewrite(g, STRENGTH)

    from ir import parse, print_graph
    from ir.passes.manager import run_pipeline
    g = parse("""func @f(%x: f32[4], %n: i64[4]) -> (f32[4], i64[4]) {
      %0 = full {value=2.0} : f32[]
      %1 = mul %x, %0 : f32[4]
      %2 = full {value=2, dtype=i64} : i64[]
      %3 = mul %2, %n : i64[4]
      return %1, %3
    }""")
    stats = {}
    out = print_graph(run_pipeline(g, "strength,dce", check_semantics=True, stats=stats))
    assert "add %x, %x : f32[4]" in out and "add %n, %n : i64[4]" in out and "mul" not in out
    assert stats["strength"].counts == {"mul_by_two": 2}
