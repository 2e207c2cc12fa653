"""The on-disk cache of compiled code: bytes by key, shared by processes of one user.

Owns: where the cache lives (`directory`), reading (`get`) and writing (`put`) entries,
and the size cap.  Callers (codegen/llvm/jit.py) choose the key — a digest of everything
that decides the bytes: the printed LLVM module, the target (triple, CPU, features) and
the versions of llvmlite and of the entry format — and store machine code under it.

Note [Disk cache safety]: nothing is unpickled (a fixed header with the key's and the
payload's SHA-256, then the bytes; a mismatch is removed and rebuilt), the directory is
per user and refused when another user owns it or others may write it, and writes are
atomic (`os.replace`).  Where it lives, the size cap and the switch: spec/codegen.md,
"The on-disk cache".
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import tempfile
from pathlib import Path
from typing import Optional

FORMAT = 1
_MAGIC = b"RCMP"
_HEADER = struct.Struct("<4sI32sQ32s")  # magic, format, sha256(key), length, sha256(payload)
_log = logging.getLogger("refcomp.codegen")
_state = {"enabled": None, "checked": {}}
COUNTERS = {"hits": 0, "misses": 0, "writes": 0, "rejected": 0, "evicted": 0}


def enabled(value: Optional[bool] = None) -> bool:
    """Whether the cache is used; `enabled(False)` turns it off for this process."""
    if value is not None:
        _state["enabled"] = bool(value)
    if _state["enabled"] is None:
        return os.environ.get("REFCOMP_CACHE", "1") not in ("0", "false", "off", "")
    return _state["enabled"]


def directory() -> Path:
    """The cache folder for this user (See Note [Disk cache safety])."""
    chosen = os.environ.get("REFCOMP_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "refcomp"


def _usable(folder: Path) -> bool:
    """Create `folder` (0700) if needed; refuse one others own or may write."""
    known = _state["checked"].get(folder)
    if known is not None:
        return known
    ok = True
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            ok = False
            _log.warning("refcomp disk cache %s belongs to another user: not used", folder)
        elif st.st_mode & 0o022:
            ok = False
            _log.warning("refcomp disk cache %s is writable by others: not used", folder)
    except OSError as e:
        ok = False
        _log.warning("refcomp disk cache %s cannot be used: %s", folder, e)
    _state["checked"][folder] = ok
    return ok


def _path(key: str) -> tuple[Path, bytes]:
    digest = hashlib.sha256(key.encode()).digest()
    return directory() / f"{digest.hex()[:40]}.bin", digest


def get(key: str) -> Optional[bytes]:
    """The payload stored under `key`, or None (absent, disabled, or not valid)."""
    if not enabled() or not _usable(directory()):
        return None
    path, digest = _path(key)
    try:
        data = path.read_bytes()
    except OSError:
        COUNTERS["misses"] += 1
        return None
    payload = _check(data, digest)
    if payload is None:
        COUNTERS["rejected"] += 1
        _log.warning("refcomp disk cache entry %s is not valid: ignored and rebuilt", path.name)
        try:
            path.unlink()
        except OSError:
            pass
        return None
    COUNTERS["hits"] += 1
    try:
        os.utime(path)  # least recently used goes first
    except OSError:
        pass
    return payload


def _check(data: bytes, digest: bytes) -> Optional[bytes]:
    if len(data) < _HEADER.size:
        return None
    magic, fmt, key_digest, length, payload_digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if (magic != _MAGIC or fmt != FORMAT or key_digest != digest or length != len(payload)
            or hashlib.sha256(payload).digest() != payload_digest):
        return None
    return payload


def put(key: str, payload: bytes) -> None:
    """Store `payload` under `key` atomically; errors only warn (the cache is optional)."""
    folder = directory()
    if not enabled() or not _usable(folder):
        return
    path, digest = _path(key)
    header = _HEADER.pack(_MAGIC, FORMAT, digest, len(payload), hashlib.sha256(payload).digest())
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".bin")
        with os.fdopen(fd, "wb") as f:
            f.write(header + payload)
        os.replace(tmp, path)
        COUNTERS["writes"] += 1
    except OSError as e:
        _log.warning("refcomp disk cache write failed: %s", e)
        return
    _enforce_cap(folder)


def _enforce_cap(folder: Path) -> None:
    cap = int(float(os.environ.get("REFCOMP_CACHE_MAX_MB", "512")) * 1024 * 1024)
    try:
        entries = [(p.stat().st_mtime, p.stat().st_size, p) for p in folder.glob("*.bin")]
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= cap:
            break
        try:
            p.unlink()
            total -= size
            COUNTERS["evicted"] += 1
        except OSError:
            pass
