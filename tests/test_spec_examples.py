"""Every example in spec/ is executed, so the spec cannot drift from the code.

Convention for fenced blocks in spec/*.md:
- ```rir     textual IR: parsed, verified, and `print(parse(text)) == text` (exact round trip).
- ```python  executed as-is, in a fresh namespace, from the repository root; it must assert
             what it claims (a block that asserts nothing proves nothing).
- anything else (```text, ```bash, untagged) is prose and not executed.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)


def spec_blocks():
    cases = []
    for path in sorted((ROOT / "spec").glob("*.md")):
        text = path.read_text()
        for m in BLOCK.finditer(text):
            lang, body = m.group(1), m.group(2)
            if lang in ("rir", "python"):
                line = text.count("\n", 0, m.start()) + 1
                cases.append(pytest.param(lang, body, id=f"{path.name}:{line}"))
    return cases


@pytest.mark.parametrize("lang, body", spec_blocks())
def test_spec_example(lang, body):
    if lang == "rir":
        from ir import parse, print_graph, verify

        graph = parse(body)
        assert verify(graph) == []
        assert print_graph(graph) == body
    else:
        namespace = {"__name__": "spec_example"}
        exec(compile(body, "<spec example>", "exec"), namespace)
        assert "assert" in body, "a python example must assert what it shows"
