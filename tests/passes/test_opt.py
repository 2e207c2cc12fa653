"""`python -m ir.opt`: the command-line driver over textual IR."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ir.opt import main
from tests.conftest import ROOT

SOURCE = """func @f(%x: f32[4]) -> f32[4] {
  %0 = full {value=2.0} : f32[]
  %1 = full {value=0.5} : f32[]
  %2 = mul %0, %1 : f32[]
  %3 = mul %x, %2 : f32[4]
  %4 = exp %x : f32[4]
  return %3
}
"""
EXPECTED = """func @f(%x: f32[4]) -> f32[4] {
  return %x
}
"""


def test_module_runs_the_default_pipeline_on_stdin():
    proc = subprocess.run([sys.executable, "-m", "ir.opt"], input=SOURCE, text=True,
                          capture_output=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == EXPECTED


def test_print_after_goes_to_stderr_and_names_the_pass(tmp_path, capsys):
    path = tmp_path / "in.rir"
    path.write_text(SOURCE)
    assert main(["--passes=fold,dce", "--print-after=fold", "--timings", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == EXPECTED.replace("return %x", "%0 = full {value=1.0} : f32[]\n"
                                   "  %1 = mul %x, %0 : f32[4]\n  return %1")
    assert err.startswith("# after fold (") and "exp %x" in err
    assert "# after dce" not in err and "# timings @f: fold " in err


def test_print_after_all(tmp_path, capsys):
    path = tmp_path / "in.rir"
    path.write_text(SOURCE)
    assert main(["--print-after-all", str(path)]) == 0
    err = capsys.readouterr().err
    names = [line.split()[2] for line in err.splitlines() if line.startswith("# after ")]
    assert names == ["decompose", "fold", "simplify", "scatters", "cse", "dce"]


def test_parse_errors_point_at_line_and_column(tmp_path, capsys):
    path = tmp_path / "bad.rir"
    path.write_text(SOURCE.replace("exp %x", "exq %x"))
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:6:8: unknown op 'exq'")


def test_verifier_errors_point_at_the_line(tmp_path, capsys):
    path = tmp_path / "bad.rir"
    path.write_text(SOURCE.replace("%4 = exp %x : f32[4]", "%4 = sum %x {dims=[0]} : f32[1]"))
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:6:3: @f: input IR: invalid IR")
    assert "sum produces f32[] but the IR declares f32[1]" in err


def test_unknown_pass_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--passes=fold,nope"])
    assert info.value.code == 2
    assert "unknown pass(es) nope; valid: cse, dce, decompose, fold, " in capsys.readouterr().err


def test_print_after_a_pass_not_in_the_pipeline_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        main(["--passes=fold", "--print-after=dce"])
    assert "--print-after dce: not in --passes=fold" in capsys.readouterr().err
