"""The README's main command (python -m refcomp.demo) runs, checks itself against eager
and points at its picture."""

import pytest

from refcomp import demo


@pytest.mark.slow
def test_demo_runs_and_draws(tmp_path, capsys):
    demo.main(["--picture", str(tmp_path / "demo.svg")])
    out = capsys.readouterr().out
    assert "Graph Count: 1" in out and "Graph Break Count: 0" in out
    assert "x eager" in out and "refcomp[" in out
    assert any(p.name.startswith("demo.") for p in tmp_path.iterdir())
