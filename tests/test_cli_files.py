"""File modes follow the umask, OS faults give one line and no
partial files, failures leave nothing new, genome indexes go to a cache, samples and their
statistics are written as a pair."""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat

import pytest

import dnadiff.utils as utils
from dnadiff.cli import main
from dnadiff.data import bundled_genome, read_fasta


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda m: os.umask(m)
    os.umask(old)


# ----------------------------------------------------------------------------- modes


def test_atomic_write_follows_the_umask(tmp_path, umask):
    umask(0o022)
    utils.atomic_write(tmp_path / "a.txt", "x")
    assert _mode(tmp_path / "a.txt") == 0o644  # before the fix: 0o600 (mkstemp's mode leaked)
    umask(0o027)
    utils.atomic_write(tmp_path / "b.txt", "x")
    assert _mode(tmp_path / "b.txt") == 0o640


def test_command_outputs_are_group_readable(model, tmp_path, umask):
    umask(0o022)
    out = tmp_path / "s.fa"
    assert main(["sample", model, "-n", "1", "--length", "8", "--steps", "2", "--out", str(out)]) == 0
    assert _mode(out) == 0o644 and _mode(tmp_path / "s.json") == 0o644
    assert _mode(model) == 0o755 and _mode(os.path.join(model, "model.safetensors")) == 0o644


# ----------------------------------------------------------------------------- OS faults


def _fault(code):
    def raiser(*a, **k):
        raise OSError(code, os.strerror(code))
    return raiser


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_sample_os_fault_is_one_line_and_leaves_nothing(model, tmp_path, capsys, monkeypatch, code):
    out = tmp_path / "o" / "s.fa"
    out.parent.mkdir()
    monkeypatch.setattr(os, "fsync", _fault(code))  # the disk fills (or turns read-only) while writing
    assert main(["sample", model, "-n", "1", "--length", "8", "--steps", "2", "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and str(out) in err and os.strerror(code) in err
    assert list(out.parent.iterdir()) == []  # no samples, no statistics, no temp files



@pytest.mark.parametrize("existing", [False, True])
def test_metrics_on_a_full_disk_is_one_line_and_leaves_no_folder(tmp_path, capsys, monkeypatch, existing):
    samples = tmp_path / "s.fa"
    samples.write_text(">a\nACGTACGTACGTACGTAAGGCCTT\n>b\nTTGCAGCATGCATGCATGCAACGT\n")
    reference = tmp_path / "r.fa"
    reference.write_text("".join(f">r{i}\n{'ACGTTGCAAGCTTCGA' * 3}\n" for i in range(8)))
    out = tmp_path / "m"
    if existing:  # a folder the user made: it keeps what it held
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    monkeypatch.setattr(os, "fsync", _fault(errno.ENOSPC))  # the disk fills while the outputs are written
    assert main(["metrics", str(samples), "--reference", str(reference), "--out", str(out), "--no-motifs",
                 "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and os.strerror(errno.ENOSPC) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["m", "r.fa", "s.fa"] if existing else ["r.fa", "s.fa"])
    if existing:
        assert [p.name for p in out.iterdir()] == ["notes.txt"]
    monkeypatch.undo()
    assert main(["metrics", str(samples), "--reference", str(reference), "--out", str(out), "--no-motifs",
                 "-q"]) == 0
    assert {"metrics.json", "kmer_scatter.png", "gc_histogram.png"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "metrics.json").read_text())["plots"][0] == str(out / "kmer_scatter.png")

def test_read_only_output_folder_is_one_line(model, tmp_path, capsys, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "mkstemp", _fault(errno.EROFS))
    out = tmp_path / "e.json"
    recs = tmp_path / "r.fa"
    recs.write_text(">a\nACGTACGTAC\n")
    assert main(["eval", model, "--records", str(recs), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"error: --out {out}: cannot write in {tmp_path} (Read-only file system)"  # before the work
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.fa"]


def test_training_on_a_full_disk_is_one_line_and_leaves_no_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "fsync", _fault(errno.ENOSPC))
    rc = main(["train", "experiments/tiny_dna_mdlm", f"out_dir={tmp_path}", "data.seq_len=32", "train.batch_size=2",
               "train.max_steps=2", "train.ckpt_every=1", "train.val_every=100", "train.progress=false", "-q"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "No space left on device" in err and str(tmp_path) in err
    assert list(tmp_path.iterdir()) == []  # before: 9 files of a half-made run


# ----------------------------------------------------------------------------- genome indexes in the cache


@pytest.fixture
def small_genome(tmp_path, monkeypatch):
    """(data folder, its 60-kb FASTA g.fa of real chr22 bases, the cache folder DNADIFF_CACHE points at)."""
    from dnadiff.data import format_fasta

    cache = tmp_path / "cache"
    monkeypatch.setenv("DNADIFF_CACHE", str(cache))
    data = tmp_path / "data"
    data.mkdir()
    fasta, _ = bundled_genome()
    seq = gzip.open(fasta, "rt").read().split("\n", 1)[1].replace("\n", "").upper()
    start = seq.index("ACGT" if "ACGT" in seq else "A")
    path = data / "g.fa"  # real bases, not the N gap at the chromosome start
    path.write_text(format_fasta([("chr22", seq[start:start + 60_000])]))
    return data, path, cache


def test_eval_with_a_malformed_bed_leaves_no_file(model, small_genome, tmp_path, capsys):
    data, genome, cache = small_genome
    bed = data / "bad.bed"
    bed.write_text("chr22\t100\tnotanumber\ttest\n")
    assert main(["eval", model, "--fasta", str(genome), "--bed", str(bed), "--out", str(tmp_path / "e.json")]) == 2
    assert "start/end must be integers" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == ["bad.bed", "g.fa"]  # before: g.fa.fai appeared here
    assert not cache.exists() and not (tmp_path / "e.json").exists()


def test_genome_index_goes_to_the_cache_not_beside_the_genome(model, small_genome, capsys):
    data, genome, cache = small_genome
    (data / "r.bed").write_text("chr22\t0\t20000\ttrain\nchr22\t20000\t40000\ttest\n")
    os.chmod(data, 0o555)  # a read-only data folder (root ignores the bits; the listing below is the check)
    try:
        assert main(["eval", model, "--fasta", str(genome), "--bed", str(data / "r.bed"), "--max-windows", "2",
                     "--seq-len", "32"]) == 0
    finally:
        os.chmod(data, 0o755)
    assert sorted(p.name for p in data.iterdir()) == ["g.fa", "r.bed"]
    assert [p.name for p in cache.rglob("*.fai")] == ["g.fa.fai"]


def test_eval_empty_requests_are_refused(model, tmp_path, capsys):
    recs = tmp_path / "r.fa"
    recs.write_text(">a\nACGTACGTAC\n")
    for flag in ("--max-windows", "--seq-len", "--quadrature", "--T"):
        assert main(["eval", model, "--records", str(recs), flag, "0"]) == 2
        assert f"{flag} must be positive" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the pair


def test_pair_killed_before_commit_keeps_both_old_and_cleans_temps(tmp_path, monkeypatch):
    fa, js = tmp_path / "x.fa", tmp_path / "x.json"
    fa.write_text("old fa")
    js.write_text("old json")
    real = utils.atomic_write

    def killed(path, data):  # the kill lands while the journal is written
        raise KeyboardInterrupt

    monkeypatch.setattr(utils, "atomic_write", killed)
    with pytest.raises(KeyboardInterrupt):
        utils.write_together([(fa, "new fa"), (js, "new json")])
    monkeypatch.setattr(utils, "atomic_write", real)
    assert fa.read_text() == "old fa" and js.read_text() == "old json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.fa", "x.json"]


def test_pair_killed_between_renames_is_rolled_forward(tmp_path, monkeypatch):
    fa, js = tmp_path / "x.fa", tmp_path / "x.json"
    fa.write_text("old fa")
    js.write_text("old json")
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if str(dst) == str(js):  # killed after the samples were renamed, before the statistics
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        utils.write_together([(fa, "new fa"), (js, "new json")])
    monkeypatch.setattr(os, "replace", real_replace)
    assert fa.read_text() == "new fa" and js.read_text() == "old json"  # the torn state a kill leaves...
    utils.recover_together([fa, js])  # ...which the next run completes before anything else
    assert fa.read_text() == "new fa" and js.read_text() == "new json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.fa", "x.json"]


def test_next_sample_run_cleans_stale_temps(model, tmp_path):
    out = tmp_path / "x.fa"
    (tmp_path / ".x.fa.abc123.tmp").write_text("half")
    (tmp_path / ".x.json.def456.tmp").write_text("half")
    assert main(["sample", model, "-n", "2", "--length", "8", "--steps", "2", "--out", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.fa", "x.json"]
    stats = json.loads((tmp_path / "x.json").read_text())
    assert stats["num"] == len(read_fasta(out)) == 2


@pytest.mark.subprocess
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_kill_signal_between_the_renames_waits_until_both_are_new(tmp_path, signame):
    """A real kill signal (Ctrl-C, `kill PID`) arriving between the two renames is held until both
    files are new: the process dies with old+old or new+new, never new samples beside old statistics."""
    import signal
    import subprocess
    import sys

    fa, js = tmp_path / "x.fa", tmp_path / "x.json"
    fa.write_text("old fa")
    js.write_text("old json")
    script = f"""
import os, signal, time
from dnadiff import utils
# a shell's background job inherits SIGINT ignored, and Python then keeps it ignored: restore Ctrl-C
signal.signal(signal.SIGINT, signal.default_int_handler)
real = os.replace
def replace(src, dst):
    real(src, dst)
    if str(dst) == {str(fa)!r}:  # the samples are renamed: now the kill arrives
        os.kill(os.getpid(), signal.{signame})
        time.sleep(0.5)
os.replace = replace
utils.write_together([({str(fa)!r}, "new fa"), ({str(js)!r}, "new json")])
print("survived")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "survived" not in out.stdout  # the signal did kill it, after the renames
    if signame == "SIGTERM":
        assert out.returncode == -signal.SIGTERM
    assert fa.read_text() == "new fa" and js.read_text() == "new json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.fa", "x.json"]
