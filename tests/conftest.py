"""Shared test configuration: hypothesis profiles.

`ci` (default) keeps the whole suite within minutes on a 2-core machine;
`thorough` runs many more examples: `REFCOMP_HYPOTHESIS=thorough python -m pytest`.
The differential fuzzer sets its own example counts per profile (tests/fuzz/test_fuzz.py:
a few hundred programs in `ci`, 20,000 per CPU backend in `thorough`; spec/testing.md).
"""

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The on-disk kernel cache (codegen/diskcache.py) of a test run is its own, so a second
# run still compiles what the tests count as compiled; tests/codegen/test_disk_cache.py
# points it elsewhere where it tests sharing.
if "REFCOMP_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["REFCOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="refcomp-test-cache-")

settings.register_profile(
    "ci", max_examples=30, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough", max_examples=500, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("REFCOMP_HYPOTHESIS", "ci"))
