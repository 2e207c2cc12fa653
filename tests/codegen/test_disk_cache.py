"""The on-disk cache of compiled kernels (codegen/diskcache.py, spec/codegen.md "The
on-disk cache"): a second process compiles no kernel; bad entries are ignored and rebuilt;
a folder others may write is not used."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codegen import diskcache

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = r"""
import json, time, torch, refcomp
from codegen import stats, diskcache
def f(x, w):
    return (torch.tanh(x @ w) * 1.5 + 0.25).softmax(-1).sum(0)
x, w = torch.randn(16, 8), torch.randn(8, 8)
t0 = time.perf_counter()
out = refcomp.compile(f)(x, w)
first = time.perf_counter() - t0
torch.testing.assert_close(out, f(x, w))
s = stats.snapshot()
print(json.dumps({"compiled": s["kernels_compiled"], "from_disk": s["kernels_from_disk"],
                  "first_call_s": first, "counters": diskcache.COUNTERS}))
"""


def run_process(cache_dir):
    env = dict(os.environ, REFCOMP_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_compiles_no_kernel(tmp_path):
    cold = run_process(tmp_path)
    warm = run_process(tmp_path)
    assert cold["compiled"] >= 1 and cold["from_disk"] == 0
    assert warm["compiled"] == 0 and warm["from_disk"] == cold["compiled"]
    assert warm["counters"]["hits"] >= 1 and warm["counters"]["writes"] == 0


def _tiny_module(tag: str):
    """A one-function LLVM module whose text is unique to `tag`."""
    import llvmlite.ir as lir

    from codegen.llvm import jit

    module = jit.new_module(f"disk_cache_test_{tag}")
    fn = lir.Function(module, lir.FunctionType(lir.IntType(64), [lir.IntType(64)]),
                      name=f"add_{tag}")
    b = lir.IRBuilder(fn.append_basic_block())
    b.ret(b.add(fn.args[0], lir.Constant(lir.IntType(64), 7)))
    return module, f"add_{tag}"


def test_corrupt_entry_is_ignored_and_rebuilt(cache_dir):
    import ctypes

    from codegen.llvm import jit

    def compile_once():
        module, symbol = _tiny_module(tag)
        addresses, from_disk = jit.compile_module(module, {symbol: f"test key {tag}"})
        add7 = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addresses[symbol])
        assert add7(35) == 42                       # the code runs, whichever way it came
        return from_disk

    tag = os.urandom(4).hex()
    assert compile_once() is False                  # compiled, and written to disk
    assert compile_once() is True                   # loaded: no O3, no codegen
    (entry,) = cache_dir.glob("*.bin")
    data = bytearray(entry.read_bytes())
    data[-8:] = b"\0garbage"                       # the payload digest no longer matches
    entry.write_bytes(bytes(data))
    rejected = diskcache.COUNTERS["rejected"]
    assert compile_once() is False                  # ignored, compiled again, rewritten
    assert diskcache.COUNTERS["rejected"] == rejected + 1
    assert compile_once() is True                   # the rebuilt entry serves again


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("REFCOMP_CACHE_DIR", str(folder))
    monkeypatch.setitem(diskcache._state, "checked", {})
    return folder


def test_roundtrip_truncated_and_foreign_key(cache_dir):
    diskcache.put("key one", b"object code")
    assert diskcache.get("key one") == b"object code"
    assert diskcache.get("key two") is None
    (entry,) = cache_dir.glob("*.bin")
    entry.write_bytes(entry.read_bytes()[:10])            # truncated
    assert diskcache.get("key one") is None and not entry.exists()
    diskcache.put("key one", b"object code")
    (entry,) = cache_dir.glob("*.bin")
    other = diskcache._path("key two")[0]
    other.write_bytes(entry.read_bytes())                 # an entry under the wrong name
    assert diskcache.get("key two") is None


def test_folder_writable_by_others_is_not_used(cache_dir):
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    diskcache.put("k", b"x")
    assert list(cache_dir.iterdir()) == []
    assert diskcache.get("k") is None


def test_size_cap_evicts_least_recently_used(cache_dir, monkeypatch):
    monkeypatch.setenv("REFCOMP_CACHE_MAX_MB", str(2.5 * 1024 / (1024 * 1024)))  # ~2.5 KB
    for i in range(4):
        diskcache.put(f"k{i}", bytes(1000))
        os.utime(diskcache._path(f"k{i}")[0], (i, i))       # older first
    assert diskcache.get("k0") is None and diskcache.get("k3") == bytes(1000)
    assert len(list(cache_dir.glob("*.bin"))) == 2


def test_off_switch(cache_dir, monkeypatch):
    monkeypatch.setenv("REFCOMP_CACHE", "0")
    monkeypatch.setitem(diskcache._state, "enabled", None)
    diskcache.put("k", b"x")
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []
