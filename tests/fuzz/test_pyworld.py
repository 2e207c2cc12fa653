"""The Python-level fuzzer (tests/fuzz/pyworld.py; spec/testing.md, "Python-level
programs"): programs mixing torch statements with properties, descriptors, dunders,
builtins on tensors, closures, exceptions across breaks in `with` blocks, generators,
classes made in the frame, and changes to globals, module attributes and defaults between
calls; compiled on each CPU backend, equal to eager in results, exceptions, side effects,
globals and grad mode.  A failure prints the shrunk program in corpus format.

Profiles (REFCOMP_HYPOTHESIS): `ci` runs PY_EXAMPLES["ci"] programs per backend,
derandomized (a few seconds); `thorough` runs PY_THOROUGH_PROGRAMS programs on every CPU
backend through the soak's loop in child processes (`--python --isolate`: a program that
kills the interpreter is counted, not the end of the run).
"""

import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.gen import CORPUS, corpus_entry
from tests.fuzz.pyworld import FEATURES, KNOWN_OPEN, check, programs, relaxed_checks

PROFILE = os.environ.get("REFCOMP_HYPOTHESIS", "ci")
PY_EXAMPLES = {"ci": 30, "thorough": 300}.get(PROFILE, 30)
PY_THOROUGH_PROGRAMS = 10000


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_pyworld_programs_equal_eager(backend):
    @settings(max_examples=PY_EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(programs(backend))
    def run(program):
        kinds.append(check(program, backend, relaxed_checks(backend)).kind)
    kinds = []
    run()
    # Most programs run to the end (a raise is compared too, but tests less).
    assert kinds.count("ok") >= len(kinds) // 2, kinds


@pytest.mark.skipif(PROFILE != "thorough", reason="the thorough profile's run (REFCOMP_HYPOTHESIS"
                    "=thorough): 10,000 Python-level programs per CPU backend")
def test_pyworld_programs_thorough_every_backend():
    from tests.fuzz import soak

    counts = soak.main(["--python", "--isolate", "--programs", str(PY_THOROUGH_PROGRAMS),
                        "--seconds", "1e9", "--progress", "1000"])
    for backend, c in counts.items():
        assert c["programs"] >= PY_THOROUGH_PROGRAMS, (backend, dict(c))
        assert c["mismatches"] == 0 and c["crashes"] == 0, (backend, dict(c))


def test_known_open_entries_name_open_corpus_files():
    """Every exclusion names an open pyworld_*.py corpus file and a template or feature
    the generator has, so an exclusion cannot outlive its bug or its template."""
    templates = {t for feature in FEATURES.values() for t in feature.templates + feature.ending}
    for key, files in KNOWN_OPEN.items():
        if key.startswith("template:"):
            assert key[len("template:"):] in templates, f"KNOWN_OPEN[{key!r}]: no such template"
        elif not key.startswith("check:"):
            assert key in FEATURES, key
        for name in (files,) if isinstance(files, str) else files:
            assert (CORPUS / name).exists(), f"KNOWN_OPEN[{key!r}]: no corpus file {name}"
            assert name.startswith("pyworld_"), name
            assert corpus_entry(name).STATUS == "open", (
                f"{name} is fixed: remove it from KNOWN_OPEN so the generator draws"
                f" {key!r} again")
