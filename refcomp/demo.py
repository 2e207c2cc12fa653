"""The README's demo.  Until the frontend lands it shows the IR pipeline by hand:
build a graph, print it, parse it back, verify it and run it on numpy."""

import numpy as np

from ir import GraphBuilder, TensorType, parse, print_graph, run, verify
from ir.types import f32, size_symbol


def main() -> None:
    s0 = size_symbol("s0")
    b = GraphBuilder("forward")
    x = b.input("x", TensorType(f32, (s0, 16)))
    w = b.input("w", TensorType(f32, (16, 16)))
    y = b.relu(b.add(b.matmul(x, w), 1.0))
    graph = b.build([b.div(y, b.sum(y, dims=[1], keepdim=True))])
    text = print_graph(graph)
    print(text)
    assert print_graph(parse(text)) == text and verify(graph) == []
    rng = np.random.default_rng(0)
    (out,) = run(graph, [rng.standard_normal((3, 16)), rng.standard_normal((16, 16))])
    print("interpreted on x: f32[3,16] -> out", out.shape, "row sums", out.sum(axis=1))


if __name__ == "__main__":
    main()
