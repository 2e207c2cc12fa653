"""refcomp over PyTorch's OpInfo database (tests/opinfo/runner.py): zero mismatches.

CI runs a sampled slice (every SLICE-th op, its first sample); the thorough profile
(`REFCOMP_HYPOTHESIS=thorough`) runs every op's first SAMPLES samples.  Both demand that no sample differs
from eager and that the captured share does not fall below the floor measured when
this test was last raised (spec/tracer.md, "OpInfo coverage"; every run: tests/opinfo/RUNS.md).
The layout oracle (`layout=`: tensor arguments laid out transposed, channels_last or
step-sliced, output strides compared with eager's) runs on the same ops, the thorough
profile on their first three samples, and demands zero mismatches too.
"""

import os

import pytest

pytest.importorskip("expecttest")  # torch.testing._internal needs it

from tests.opinfo import runner  # noqa: E402

THOROUGH = os.environ.get("REFCOMP_HYPOTHESIS") == "thorough"
SLICE = 15
# Captured share (of non-skipped samples) the run must keep: the target (measured
# values are in spec/tracer.md).
FLOOR = 0.97  # measured: all ops' first samples 97.1% (647/666), slice 100% (45/45)
# Over every op's first SAMPLES samples: measured 96.4% (2750/2852, issue 36); the
# issue's target is 97.5%.
FLOOR_THOROUGH = 0.96


# Samples per op: the thorough profile runs the first five, as users' calls vary (about
# 15 minutes on one core); CI the first.
SAMPLES = 5


def test_op_db_samples_equal_eager():
    ops = runner.op_db()
    results = runner.run(ops if THOROUGH else ops[::SLICE], samples=SAMPLES if THOROUGH else 1)
    report = runner.summary(results)
    print(report)
    mismatched = {k: d for k, (o, d) in results.items() if o == "mismatched"}
    assert not mismatched, report
    considered = [o for o, _ in results.values() if o != "skipped"]
    assert len(considered) >= 40
    rate = considered.count("captured") / len(considered)
    assert rate >= (FLOOR_THOROUGH if THOROUGH else FLOOR), report


# The layout oracle: CI runs the slice's first samples in every layout (about 1 s each);
# the thorough profile every op's first THOROUGH_SAMPLES samples (about a minute each).
THOROUGH_SAMPLES = 3


@pytest.mark.parametrize("layout", sorted(runner.LAYOUTS))
def test_op_db_samples_keep_eager_layout(layout):
    ops = runner.op_db()
    results = runner.run(ops if THOROUGH else ops[::SLICE], layout=layout,
                         samples=THOROUGH_SAMPLES if THOROUGH else 1)
    report = runner.summary(results)
    print(report)
    mismatched = {k: d for k, (o, d) in results.items() if o == "mismatched"}
    assert not mismatched, report
    assert sum(o != "skipped" for o, _ in results.values()) >= 40
