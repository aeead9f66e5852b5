"""Records that hold (issue 32, item 9): results/ names no path of the machine it was made on (paths are
relative to the repository or `$DNADIFF_DATA/...`), the pipelines write them so through
dnadiff.utils.portable_paths, and a run records `model.init_from` as an absolute path."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import yaml

from dnadiff.config import RunConfig, load_config, save_config
from dnadiff.utils import REPO_ROOT, portable_paths

REPO = Path(__file__).resolve().parent.parent
# an absolute path of a machine: /work/..., /root/..., /tmp/..., /home/... not inside a relative path
MACHINE_PATH = re.compile(r"(?<![\w.$~-])/(?:work|root|tmp|home)/[^\s\"'`)|,;]*")
TEXT_SUFFIXES = (".json", ".md", ".csv", ".tsv", ".txt")


def test_results_hold_no_absolute_machine_paths():
    found = []
    for f in sorted((REPO / "results").rglob("*")):
        if f.is_file() and f.suffix in TEXT_SUFFIXES:
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                found += [f"{f.relative_to(REPO)}:{i}: {m}" for m in MACHINE_PATH.findall(line)]
    assert not found, f"{len(found)} absolute machine paths in results/, e.g.\n" + "\n".join(found[:10])


def test_machine_path_pattern_finds_what_the_scan_is_for():
    assert MACHINE_PATH.findall('"model_dir": "/work/main/runs/x/model"') == ["/work/main/runs/x/model"]
    assert MACHINE_PATH.findall("--out /tmp/bench/t.json`") == ["/tmp/bench/t.json"]
    assert MACHINE_PATH.findall("`/root/.cache/x` and /home/u/y") == ["/root/.cache/x", "/home/u/y"]
    assert MACHINE_PATH.findall("$DNADIFF_DATA/hg19/chr22.fa runs/x/model $TMPDIR/tmp/x ../work/y") == []


def test_portable_paths_rewrites_repository_data_temp_and_home(monkeypatch, tmp_path):
    repo, data = tmp_path / "checkout", tmp_path / "shared" / "data"
    repo.mkdir()
    data.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    temp = os.path.realpath(tempfile.gettempdir())  # tmp_path is usually inside it: then $TMPDIR/...
    record = {
        "command": f"python pipelines/x.py --out {repo}/results/x.json --genome {data}/hg19/chr22.fa.gz",
        "model_dir": f"{repo}/runs/a/model",
        "repo": str(repo),
        "data": [f"data.fasta={data}/hg19/chr22.fa.gz", str(data)],
        "sibling": f"{repo}2/runs/a",  # another folder whose name starts like the repository's: not inside it
        "inside_other": f"/elsewhere{repo}/x",  # the repository's path inside another path: left alone
        "home": f"{tmp_path / 'home'}/.cache/x",
        "n": 3, "ok": True, "none": None,
        f"{repo}/key": 1,
    }
    out = portable_paths(record, repo=repo, data=data)
    assert out == {
        "command": "python pipelines/x.py --out results/x.json --genome $DNADIFF_DATA/hg19/chr22.fa.gz",
        "model_dir": "runs/a/model",
        "repo": ".",
        "data": ["data.fasta=$DNADIFF_DATA/hg19/chr22.fa.gz", "$DNADIFF_DATA"],
        "sibling": f"{repo}2/runs/a".replace(temp + "/", "$TMPDIR/"),
        "inside_other": f"/elsewhere{repo}/x",
        "home": "~/.cache/x",
        "n": 3, "ok": True, "none": None,
        "key": 1,
    }
    assert not out["sibling"].startswith("2/")  # /checkout2 is not /checkout
    assert portable_paths(f"{temp}/bench/t.json", repo=repo, data=data) == "$TMPDIR/bench/t.json"
    # the data root from $DNADIFF_DATA when none is given; text as well as mappings
    monkeypatch.setenv("DNADIFF_DATA", str(data))
    assert portable_paths(f"see {data}/benchmarks/x and {repo}/README.md", repo=repo) == \
        "see $DNADIFF_DATA/benchmarks/x and README.md"
    # by default the repository is the checkout holding the package
    assert portable_paths(f"{REPO_ROOT}/results/a.md") == "results/a.md"
    assert Path(REPO_ROOT) == REPO


def test_pipelines_and_benchmarks_write_results_through_portable_paths():
    """Every script that writes a results JSON/markdown wraps what it writes in portable_paths (the pipelines
    through the harness's common.write_results, the benchmarks through _common.save, which do)."""
    writers = []
    harness_call = r"\bcommon\.write_(results|report)\(|\b_common\.(print_and_save|save|finish)\("
    for folder in ("pipelines", "benchmarks"):
        for f in sorted((REPO / folder).glob("*.py")):
            text = f.read_text(encoding="utf-8")
            if re.search(r"\bwrite_json\(|\batomic_write\(|" + harness_call, text):
                harness = re.search(harness_call, text) is not None
                writers.append((f.name, "portable_paths(" in text or harness))
    assert ("cpu_hour.py", True) in writers and ("sampling.py", True) in writers
    assert ("_common.py", True) in writers and ("backbones.py", True) in writers and ("ema_vs_raw.py", True) in writers
    # a pipeline whose page moved to a sibling (X_report.py) writes there
    for name in ("cpu_hour.py", "dna_perplexity_report.py", "genomic_benchmarks_recipe.py",
                 "genomic_benchmarks_report.py", "guided_design.py", "reward_finetuning.py", "sample_quality.py",
                 "text_lm_report.py", "dhs_benchmark.py", "dhs_design.py", "infill.py", "data_scale.py",
                 "records_memory.py", "sample_batch.py", "rc_symmetric_check.py", "train_throughput.py"):
        assert (name, True) in writers, name


def test_run_config_records_init_from_as_an_absolute_path(tmp_path, monkeypatch):
    (tmp_path / "runs" / "pre" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", ["model.init_from=runs/pre/model"])
    assert cfg.model.init_from == str(tmp_path / "runs" / "pre" / "model")
    save_config(cfg, tmp_path / "config.yaml")  # what a run directory records
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["model"]["init_from"] == \
        str(tmp_path / "runs" / "pre" / "model")
    # a Hub id (no such local folder) stays as given; so does no init_from
    assert load_config(RunConfig, "experiments/tiny_dna_mdlm", ["model.init_from=org/name"]).model.init_from == \
        "org/name"
    assert load_config(RunConfig, "experiments/tiny_dna_mdlm").model.init_from is None
    from dnadiff.classifier_tuning import load_finetune_config

    ft = load_finetune_config("experiments/tiny_finetune", ["model.init_from=./runs/pre/model"])
    assert ft.model.init_from == str(tmp_path / "runs" / "pre" / "model")
