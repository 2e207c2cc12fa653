"""The torch-level differential fuzzer (spec/testing.md): random programs from
tests/fuzz/gen.py, compiled on each backend, equal eager in everything eager defines
(tests/fuzz/runner.py).  A failure prints the shrunk program in corpus format and as a
standalone script.

Profiles (REFCOMP_HYPOTHESIS, tests/conftest.py): `ci` runs EXAMPLES["ci"] programs per
backend, derandomized; `thorough` runs THOROUGH_PROGRAMS random programs on every CPU
backend, each run eagerly once (the soak's loop, tests/fuzz/soak.py), plus EXAMPLES
["thorough"] per backend through hypothesis, which shrinks a failure.  For time-boxed runs
with counts per failure class use `python -m tests.fuzz.soak --seconds N`.
"""

import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.gen import (
    CORPUS,
    KNOWN_OPEN,
    corpus_entry,
    known_open_files,
    programs,
    relaxed_checks,
)
from tests.fuzz.grad import GRAD_KNOWN_OPEN, differentiable, grad_check, grad_relaxed
from tests.fuzz.runner import check

PROFILE = os.environ.get("REFCOMP_HYPOTHESIS", "ci")
EXAMPLES = {"ci": {"interp": 120, "eager": 150, "llvm": 120, "triton": 8},
            "thorough": {"interp": 1000, "eager": 1000, "llvm": 1000, "triton": 300}}
THOROUGH_PROGRAMS = 20000  # per CPU backend, in test_fuzz_thorough_every_backend
EXAMPLES = EXAMPLES.get(PROFILE, EXAMPLES["ci"])
# Gradient mode (tests/fuzz/grad.py): per backend in CI (derandomized); the thorough
# profile runs GRAD_THOROUGH_PROGRAMS through the soak's loop on every CPU backend.
GRAD_EXAMPLES = {"interp": 150, "eager": 200, "llvm": 150}  # the suite's time budget
GRAD_THOROUGH_PROGRAMS = 1000


def _fuzz(backend, max_statements=8):
    @settings(max_examples=EXAMPLES[backend])
    @given(programs(backend, max_statements=max_statements))
    def run(program):
        check(program, backend, relaxed_checks(backend))
    run()


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_fuzz_programs_equal_eager(backend):
    _fuzz(backend)


@pytest.mark.skipif(PROFILE != "thorough", reason="the thorough profile's run (REFCOMP_HYPOTHESIS"
                    "=thorough): 20,000 programs per CPU backend, ~30 min on 2 cores")
def test_fuzz_thorough_every_backend():
    """THOROUGH_PROGRAMS random programs, each compared with eager on interp, eager and
    llvm: no mismatch, no crash.  Every failure is printed in corpus format as it happens
    (the soak's output); replay one with the per-backend tests to shrink it."""
    from tests.fuzz import soak

    counts = soak.main(["--programs", str(THOROUGH_PROGRAMS), "--seconds", "1e9",
                        "--progress", "1000"])
    for backend, c in counts.items():
        assert c["programs"] >= THOROUGH_PROGRAMS, (backend, dict(c))
        assert c["mismatches"] == 0 and c["crashes"] == 0, (backend, dict(c))


def test_fuzz_programs_equal_eager_on_triton():
    """A sample on Triton (its interpreter on this CPU machine; ~0.1 s per launch)."""
    pytest.importorskip("triton")
    from codegen.triton import interpreting

    if not interpreting():
        pytest.skip("CUDA present: the fuzzer's inputs are CPU tensors")
    _fuzz("triton", max_statements=4)


def test_known_open_entries_name_open_corpus_files():
    """Every exclusion in the generator names a corpus file that is still open, so an
    exclusion cannot outlive its bug (or hide one without a replayed program)."""
    for feature in KNOWN_OPEN:
        for name in known_open_files(feature):
            assert (CORPUS / name).exists(), f"KNOWN_OPEN[{feature!r}]: no corpus file {name}"
            mod = corpus_entry(name)
            assert mod.STATUS == "open", (f"{name} is {mod.STATUS}: remove it from"
                                          f" KNOWN_OPEN[{feature!r}] (and the entry, if it"
                                          " was the last) so the fuzzer tests it again")


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_fuzz_gradients_equal_eager(backend):
    """Gradient mode: programs with a float32/float64 input, those inputs requiring grad;
    forward as above, plus which outputs require grad, plus the gradient of a weighted sum
    of the float outputs with respect to every such input (spec/testing.md, "Gradients")."""
    @settings(max_examples=GRAD_EXAMPLES[backend],
              suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    @given(programs(backend).filter(differentiable))
    def run(program):
        grad_check(program, backend, relaxed_checks(backend) | grad_relaxed(backend))
    run()


@pytest.mark.skipif(PROFILE != "thorough", reason="the thorough profile's gradient run"
                    " (REFCOMP_HYPOTHESIS=thorough): 1,000 programs per CPU backend")
def test_fuzz_gradients_thorough_every_backend():
    """GRAD_THOROUGH_PROGRAMS random programs in gradient mode, each compared with eager
    on interp, eager and llvm: no mismatch, no crash."""
    from tests.fuzz import soak

    counts = soak.main(["--grad", "--programs", str(GRAD_THOROUGH_PROGRAMS), "--seconds",
                        "1e9", "--progress", "250"])
    for backend, c in counts.items():
        assert c["programs"] >= GRAD_THOROUGH_PROGRAMS, (backend, dict(c))
        assert c["mismatches"] == 0 and c["crashes"] == 0, (backend, dict(c))


def test_grad_known_open_entries_name_open_corpus_files():
    """Every relaxation of the gradient mode names a corpus file that is still open."""
    for feature, (name, message) in GRAD_KNOWN_OPEN.items():
        assert (CORPUS / name).exists(), f"GRAD_KNOWN_OPEN[{feature!r}]: no corpus file {name}"
        mod = corpus_entry(name)
        assert mod.STATUS == "open", (f"{name} is {mod.STATUS}: remove GRAD_KNOWN_OPEN"
                                      f"[{feature!r}] so the gradient mode tests it again")
        assert message in mod.SYMPTOM or mod.SYMPTOM.split(": ", 2)[-1] in message, name
