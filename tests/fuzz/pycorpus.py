"""Programs the Python-level fuzzer found (tests/fuzz/pygen.py), kept as they were found:
the body of `f`, the mutation run after each call but the last, the number of inputs.
Each is replayed on every backend by tests/fuzz/test_pyfuzz.py."""

CASES = {
    # A Python __getitem__ with a side effect (TABLE[2]) ran once per guard check as well
    # as once per call: its result was guarded by reading TABLE[2] again.  Fixed: a Python
    # __getitem__ is traced as a call (Note [Reads that run user code]).  Seed 24, Nov 29.
    "getitem_runs_user_code": (
        ["v0 = x0 * len(SEQ) if SEQ else x0", "v1 = x0 + TABLE[2]",
         "v2 = x1 * GA.missing_0", "try:", "    try:", "        raise KeyError('k')",
         "    except KeyError as e:", "        raise ValueError('v') from e",
         "except ValueError:", "    v3 = v1 - x0", "v4 = v2 * PD.scale + x1",
         "return (v3, v4,)"],
        ["SEQ.append(1)", "pass"], 2),
    # Two modules made from one source (the oracle's eager and compiled namespaces, and
    # every earlier program) have equal code objects: they shared one frame cache, and the
    # resume function built with the first module's globals incremented ITS G_CALLS.
    # Fixed: frame caches are keyed by the code object's identity.  Seed 226, Nov 29.
    "equal_code_objects": (
        ["global G_CALLS", "G_CALLS += 1", "v0 = x0 + x0", "return (v0,)"],
        ["pyfuzz_mod.K = pyfuzz_mod.K + 1.0", "pyfuzz_mod.K = pyfuzz_mod.K + 1.0"], 2),
    # A resume function at a KeyError inside `with contextlib.suppress(KeyError)` went on
    # in code only its exception handler reaches (the generator call after the block); its
    # co_stacksize was 4 where 5 were needed, and `gen(x0)` got a function for `x0`
    # (TypeError).  Fixed: Note [Stack size] (refcomp/bytecode_gen.py).  Seed 100619.
    "stack_after_a_handler": (
        ["v0 = SCALER(x0) - x0", "v1 = x0", "with contextlib.suppress(KeyError):",
         "    v1 = v0 * D['missing']", "v2 = x0 * P.scale + x0", "def gen(v):",
         "    yield v", "    yield v * 2", "v3 = sum(gen(x0)) + v2", "return (v2, v3,)"],
        ["SEQ.clear()", "P.k = P.k + 1.0"], 1),
    # A property read through a subclass's property with a setter, __getattr__ fallback
    # and a descriptor in one frame: each ran 2-4 times a call before the fix.
    "reads_that_run_user_code": (
        ["v0 = x0 * PD.scale + x0", "v1 = v0 + HD.d", "v2 = v1 * GA.missing_1",
         "v3 = v2 * CFG.hidden + CFG.offset", "return (v2, v3,)"],
        ["P.k = P.k + 1.0", "CFG.d = CFG.d + 1.0"], 1),
}
