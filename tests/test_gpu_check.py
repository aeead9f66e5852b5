"""benchmarks/gpu_check.py in its CPU mode, so the GPU check cannot rot.

The default run leaves out the `demo` check (`dnadiff demo` alone takes over a minute on this CPU and
has its own tests); the slow test runs every check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.scripts import load_script

REPO = Path(__file__).resolve().parent.parent
gpu_check = load_script(REPO / "benchmarks" / "gpu_check.py", "gpu_check")


def _run(tmp_path, checks: str) -> dict:
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--device", "cpu", "--tiny", "--out", str(out), "--checks", checks]) == 0
    res = json.loads(out.read_text())
    assert res["all_pass"] and (tmp_path / "gpu_check.md").is_file()
    return res


@pytest.mark.training
def test_gpu_check_cpu_tiny(tmp_path):
    res = _run(tmp_path, "scan,train,ddp1,fsdp1,sampler")
    rows = {(r["check"], r.get("model") or r.get("sampler")): r for r in res["checks"]}
    scan = rows[("scan", None)]
    assert scan["fwd_max_abs"] < 1e-4 and scan["grad_max_rel"] < 1e-4
    assert {m for c, m in rows if c == "train"} == {"caduceus:tiny", "dit:tiny", "hyena:tiny"}
    assert rows[("ddp1", None)]["max_abs_weight_diff"] == 0.0  # DDP with one process is the plain run
    assert "GPUs only" in rows[("fsdp1", None)]["result"]
    from dnadiff.samplers import SAMPLERS

    assert {m for c, m in rows if c == "sampler"} == set(SAMPLERS.names())


def test_gpu_check_rejects_unknown_checks(tmp_path, capsys):
    assert gpu_check.main(["--device", "cpu", "--tiny", "--out", str(tmp_path / "x.json"),
                           "--checks", "scan,nope"]) == 2
    assert "unknown nope" in capsys.readouterr().err


@pytest.mark.training
@pytest.mark.slow
def test_gpu_check_cpu_tiny_with_demo(tmp_path):
    res = _run(tmp_path, ",".join(gpu_check.CHECKS))
    assert [r for r in res["checks"] if r["check"] == "demo"][0]["returncode"] == 0


def test_fsdp1_reload_nll_is_per_token_nats(tmp_path):
    """The GPU-only fsdp1 check scores the reloaded model with `nll_per_token` (it called `.mean()` on the
    LossOutput): on a tiny model it is the per-sequence NLL over the token count, finite and positive."""
    import torch

    import dnadiff
    from helpers.cli_model import tiny_model_dir

    model = dnadiff.load(tiny_model_dir(tmp_path))
    x = torch.randint(7, 11, (2, 32))
    torch.manual_seed(1)  # the bound draws its masking times from the global generator: same seed, same draw
    got = gpu_check.nll_per_token(model, x)
    torch.manual_seed(1)
    out = model.nll(x)
    assert got == pytest.approx(float((out.nll / out.num_tokens).mean())) and 0 < got < 20


def test_gpu_check_kernels_row_without_the_cuda_extra(tmp_path, monkeypatch):
    from helpers.fake_kernels import install

    install(monkeypatch, {}, absent=("mamba_ssm", "causal_conv1d"))
    res = _run(tmp_path, "kernels")
    (row,) = res["checks"]
    assert row["case"] == "not installed" and row["pass"]


def test_gpu_check_kernels_compares_the_kernel_path(tmp_path, fake_kernels):
    """With (stand-in) kernels importable the check really compares: Caduceus-PS forward and gradients,
    the cached AR step, and times both paths; every comparison runs through the kernels."""
    res = _run(tmp_path, "kernels")
    rows = {r["case"]: r for r in res["checks"]}
    assert set(fake_kernels.names()) == {"causal_conv1d_fn", "selective_scan_fn", "causal_conv1d_update",
                                         "selective_state_update"}
    fp32 = rows["caduceus:tiny fp32 B2 L64"]
    assert fp32["fwd_max_rel"] < 1e-5 and fp32["grad_max_rel"] < 1e-4
    assert rows["mamba:tiny cached AR step, 64 tokens"]["fwd_max_rel"] < 1e-5
    assert rows["caduceus:tiny bf16 fwd+bwd B2 L64"]["kernels_ms"] > 0
