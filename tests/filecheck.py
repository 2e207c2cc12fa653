"""FileCheck for refcomp's textual tests: a thin adapter over PyPI's `filecheck`.

We use xDSL's `filecheck` package (a maintained Python clone of LLVM FileCheck:
CHECK, CHECK-NEXT, CHECK-NOT, CHECK-LABEL, CHECK-SAME, CHECK-DAG, `{{regex}}`,
`[[N:regex]]` captures and `[[N]]` uses) through its command line, its public
interface, rather than re-implementing a matcher here.

    check(output_text, check_text, origin=("tests/passes/dce/dce.rir", 12))

raises `AssertionError` carrying FileCheck's message when the CHECK lines in
`check_text` do not match `output_text`.  `origin` makes the reported line numbers
those of the original file: the check text is padded so its first line lands on
line `origin[1]`.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile


def check(output: str, checks: str, origin: tuple[str, int] = ("<checks>", 1)) -> None:
    """Match `checks`' CHECK lines against `output`; raise AssertionError on a mismatch."""
    if importlib.util.find_spec("filecheck") is None:
        raise RuntimeError("textual IR tests need PyPI 'filecheck': pip install -e .[test]")
    path, first_line = origin
    fd, tmp = tempfile.mkstemp(suffix=".checks", text=True)
    try:
        with os.fdopen(fd, "w") as f:
            f.write("\n" * (first_line - 1) + checks)
        proc = subprocess.run(
            [sys.executable, "-m", "filecheck", tmp], input=output, text=True,
            capture_output=True, env={**os.environ, "NO_COLOR": "1"},
        )
    finally:
        os.unlink(tmp)
    if proc.returncode != 0:
        message = (proc.stderr + proc.stdout).replace(tmp, path)
        raise AssertionError(f"FileCheck failed:\n{message}\n--- output was:\n{output}")
