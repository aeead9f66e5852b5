"""`dnadiff design`: guidance strengths default from the reward's range, and exact classifier
guidance states its cost and refuses a run of hours."""

from __future__ import annotations

import json
import time

import pytest
import torch

from dnadiff.cli import main
from dnadiff.errors import DnadiffError
from dnadiff.guidance import cg_rows_per_design, default_strength
from dnadiff.guidance.rewards import build_reward, rc_averaged, reward_unit
from dnadiff.samplers import build_sampler


def slow_reward(x):
    """A user reward that takes 50 ms per call."""
    time.sleep(0.05)
    return (x == 8).double().mean(1)


def test_reward_units():
    assert reward_unit(build_reward("gc"), 200) == pytest.approx(1 / 200)
    assert reward_unit(build_reward("gc:0.4"), 50) == pytest.approx(1 / 50)
    assert reward_unit(rc_averaged(build_reward("gc")), 10) == pytest.approx(0.1)
    assert reward_unit(build_reward("motif:TATA"), 200) == 1.0
    assert reward_unit(build_reward("test_design_strength:slow_reward"), 200) is None


def test_default_strengths():
    gc = build_reward("gc")
    opts = {}
    assert default_strength("smc", gc, 200, opts, "gc") == {"alpha": pytest.approx(0.005)}
    opts = {}
    assert default_strength("cg", gc, 200, opts, "gc") == {"scale": pytest.approx(200.0)}
    opts = {"alpha": 2.0}
    assert default_strength("smc", gc, 200, opts, "gc") == {} and opts == {"alpha": 2.0}  # the user's value stays
    assert default_strength("svdd", gc, 200, {}, "gc") == {}
    with pytest.raises(DnadiffError, match="--option alpha=VALUE"):
        default_strength("smc", build_reward("test_design_strength:slow_reward"), 200, {}, "m:f")


def test_cg_rows_per_design():
    class Linear:  # α(t) = 1 − t: a position is still masked at t with probability t
        def alpha(self, t):
            return 1.0 - t

    sampler = build_sampler("ancestral", steps=4, eps=1e-5)
    ts = torch.linspace(1.0, 1e-5, 5, dtype=torch.float64)[:-1]  # the sampler's grid without its end
    assert cg_rows_per_design(Linear(), sampler, 4, 10) == pytest.approx(40 * float(ts.sum()), rel=1e-12)
    assert cg_rows_per_design(Linear(), sampler, 4, 10) == pytest.approx(100.0, rel=1e-4)  # 40 · (1 + .75 + .5 + .25)


def test_smc_default_moves_gc(model, tmp_path):
    out = {}
    for method in ("none", "smc"):
        argv = ["design", model, "--reward", "gc", "--method", method, "--num", "4", "--length", "24", "--steps", "12",
                "--out", str(tmp_path / f"{method}.fa"), "-q"]
        assert main(argv) == 0
        out[method] = json.loads((tmp_path / f"{method}.json").read_text())
    assert out["smc"]["default_options"] == {"alpha": pytest.approx(1 / 24)}
    assert out["smc"]["summary"]["reward_mean"] > out["none"]["summary"]["reward_mean"] + 0.1


def test_exact_cg_refuses_hours(model, tmp_path, capsys):
    argv = ["design", model, "--reward", "test_design_strength:slow_reward", "--method", "cg", "--option", "scale=1",
            "--num", "400", "--length", "64", "--steps", "64", "--out", str(tmp_path / "d.fa")]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "reward rows per design" in lines[0] and "estimated" in lines[0]  # the cost, stated up front
    err = lines[-1]  # then the refusal, one line
    assert err.startswith("error: --method cg: about") and "reward rows per design" in err and "--allow-slow" in err
    assert "Traceback" not in "".join(lines) and not (tmp_path / "d.fa").exists()
