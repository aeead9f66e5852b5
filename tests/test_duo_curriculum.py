"""DUO's Gaussian-guided curriculum for the udlm objective (dnadiff/training/duo_curriculum.py): the τ schedule,
the soft input at τ -> 0 against the discrete draw and the plain udlm estimate, the marginal of the Gaussian
latent's argmax (χ²), the curriculum's noise range, gradients through the soft input, the options' checks, and
`dnadiff train` with the curriculum on and off (curriculum_steps=0 bit-identical to plain udlm training)."""

from __future__ import annotations

import csv
import math

import pytest
import torch
from safetensors.torch import load_file
from scipy.stats import chisquare

from dnadiff.backbones import build_backbone
from dnadiff.config import RunConfig
from dnadiff.config_options import load_config
from dnadiff.diffusion import build_objective, build_schedule
from dnadiff.diffusion.base import real_mask
from dnadiff.diffusion.soft_input import call_soft, onehot_lookup, token_embedding
from dnadiff.diffusion.udlm import data_index
from dnadiff.errors import DnadiffError
from dnadiff.model import Denoiser
from dnadiff.training.dcd import alpha_of_nu, nu_of_alpha
from dnadiff.training.duo_curriculum import (
    curriculum_loss,
    curriculum_tau,
    dalpha_dnu,
    gamma_alpha,
    training_loss,
    vp_latent,
)

V, IDS = 12, [7, 8, 9, 10]  # the DNA tokenizer: A C G T are the data tokens
SCHEDULE = build_schedule("loglinear", eps=1e-3)


def udlm(**options):
    return build_objective("udlm", schedule=SCHEDULE, mask_id=3, vocab_size=V, data_ids=IDS, pad_policy="visible",
                           **options)


def batch(seed: int = 0) -> torch.Tensor:
    x0 = torch.randint(7, 11, (4, 24), generator=torch.Generator().manual_seed(seed))
    x0[0, -3:] = 4  # [PAD]s: never noised, never scored
    x0[1, 5] = 11  # N: visible
    return x0


def denoiser(preset: str = "tiny", name: str = "caduceus") -> Denoiser:
    torch.manual_seed(0)
    return Denoiser(build_backbone(name, preset=preset, vocab_size=V))


def test_tau_follows_duos_schedule_and_the_curriculum_ends():
    tau = (0.1, 0.01)
    assert [curriculum_tau(s, 10, tau, 5) for s in (0, 4, 5)] == [0.1, 0.1, 0.1]
    assert math.isclose(curriculum_tau(6, 10, tau, 5), 10 ** (-1 - 1 / 5))  # log10 τ linear in the step
    assert math.isclose(curriculum_tau(9, 10, tau, 5), 10 ** (-1 - 4 / 5))
    assert curriculum_tau(10, 10, tau, 5) is None and curriculum_tau(0, 0, tau, 0) is None
    assert curriculum_tau(3, 4, tau, 4) == 0.1  # no anneal phase: τ stays
    obj = udlm(curriculum_steps=200_000)
    assert obj.curriculum_anneal_start == 100_000 and obj.curriculum_tau == (0.1, 0.01)  # the reference's defaults


@pytest.mark.parametrize("gamma", [None, (-3.5, -1.75)])
def test_soft_input_at_zero_temperature_is_the_discrete_draw_and_the_loss_the_plain_udlm_estimate(gamma):
    opts = {} if gamma is None else {"curriculum_gamma_min": gamma[0], "curriculum_gamma_max": gamma[1]}
    obj, den, x0 = udlm(curriculum_steps=5, **opts), denoiser(), batch()
    out, (z_t, soft) = curriculum_loss(obj, den, x0, None, 1e-30, generator=torch.Generator().manual_seed(3),
                                       return_inputs=True)
    assert torch.equal(soft, torch.nn.functional.one_hot(z_t, V).to(soft.dtype))  # softmax(w/τ) -> one_hot(argmax w)
    assert torch.equal(z_t[0, -3:], x0[0, -3:]) and int(z_t[1, 5]) == 11  # pads and N untouched
    assert 0 < float((z_t != x0).double().mean()) < 1
    # the same draws by hand: t, then ε; the discrete z_t through the ids; the udlm integrand at z_t
    g = torch.Generator().manual_seed(3)
    t = obj.sample_t(4, generator=g)
    x_idx = data_index(x0, obj.data_ids, V)
    active = real_mask(x0, None) & (x_idx >= 0)
    if gamma is None:
        nu, alpha_dalpha = nu_of_alpha(SCHEDULE.alpha(t.double()), 4), None
    else:
        nu, alpha, dalpha = gamma_alpha(t, gamma, 4)
        alpha_dalpha = (alpha, dalpha)
    w = vp_latent(x_idx.clamp_min(0), nu, 4, g)
    assert torch.equal(z_t, torch.where(active, obj.data_ids[w.argmax(-1)], x0))
    ref = obj.nelbo(den(z_t, t), x_idx, z_t, t, active, alpha_dalpha=alpha_dalpha, prior=gamma is None)
    assert torch.equal(out.nll, ref.nll) and torch.equal(out.num_tokens, ref.num_tokens)
    if gamma is None:  # the run's schedule: the plain udlm loss at these (t, z_t)
        plain = obj.nelbo(den(z_t, t), x_idx, z_t, t, active)
        assert torch.equal(out.loss, plain.loss) and math.isfinite(float(out.loss))
    _, (_, soft_t) = curriculum_loss(obj, den, x0, None, 1.0, generator=torch.Generator().manual_seed(3),
                                     return_inputs=True)
    assert float((soft_t - soft).abs().max()) > 0.1  # a warm τ does relax the input


@pytest.mark.parametrize("alpha", [0.15, 0.5, 0.9])
def test_argmax_of_the_gaussian_latent_has_the_uniform_noise_marginal(alpha):
    n, N = 40_000, 4
    g = torch.Generator().manual_seed(int(alpha * 100))
    x = torch.randint(0, N, (n, 1), generator=g)
    z = vp_latent(x, nu_of_alpha(torch.tensor(alpha, dtype=torch.float64), N).expand(n), N, g).argmax(-1)
    # counts of (x, z) against q(z | x) = α x + (1 - α)/N (the duality of §3, dcd's operator inverted)
    counts = torch.bincount((x * N + z).reshape(-1), minlength=N * N).double()
    q = alpha * torch.eye(N, dtype=torch.float64) + (1 - alpha) / N
    expected = (torch.bincount(x.reshape(-1), minlength=N).double()[:, None] * q).reshape(-1)
    assert chisquare(counts.numpy(), expected.numpy()).pvalue > 1e-3
    wrong = (alpha + 0.03) * torch.eye(N, dtype=torch.float64) + (1 - alpha - 0.03) / N
    wrong_exp = (torch.bincount(x.reshape(-1), minlength=N).double()[:, None] * wrong).reshape(-1)
    assert chisquare(counts.numpy(), wrong_exp.numpy()).pvalue < 1e-6  # the test can tell 0.03 apart


def test_the_curriculum_noise_range_maps_t_to_the_gaussian_log_snr():
    t = torch.tensor([0.0, 0.3, 1.0], dtype=torch.float64)
    nu, alpha, dalpha = gamma_alpha(t, (-3.5, -1.75), 4)
    assert torch.allclose(nu, torch.exp(-0.5 * (-3.5 + 1.75 * t)))  # ν = α̃/σ̃, α̃² = sigmoid(-γ)
    assert torch.allclose(alpha, alpha_of_nu(nu, 4)) and bool((alpha.diff() < 0).all())
    h = 1e-5  # α'_t against a central difference of T(ν(t))
    num = (gamma_alpha(t + h, (-3.5, -1.75), 4)[1] - gamma_alpha(t - h, (-3.5, -1.75), 4)[1]) / (2 * h)
    assert torch.allclose(dalpha, num, rtol=1e-5, atol=1e-9) and bool((dalpha < 0).all())
    nus = torch.tensor([0.1, 0.7, 2.0, 4.0], dtype=torch.float64)  # (T is clamped at 0 below ν = 0)
    for N in (2, 4, 50257):
        fd = (alpha_of_nu(nus + 1e-5, N) - alpha_of_nu(nus - 1e-5, N)) / 2e-5
        assert torch.allclose(dalpha_dnu(nus, N), fd, rtol=1e-5, atol=1e-9)
    # N = 2 in closed form: T(ν) = 2Φ(ν/√2) - 1, T'(0) = √2 φ(0) = 1/√π
    assert math.isclose(float(dalpha_dnu(torch.tensor(0.0, dtype=torch.float64), 2)), 1 / math.sqrt(math.pi),
                        rel_tol=1e-9)


def test_gradients_reach_the_embedding_through_the_soft_input():
    # DiT: its output layer is not tied to the embedding, so a row's gradient comes from the input side only
    obj, den, x0 = udlm(curriculum_steps=5), denoiser("tiny", "dit"), torch.full((4, 24), 7)
    x0[:, ::2] = 8  # A and C only
    with torch.no_grad():  # DiT's zero-initialised output and modulation layers would pass no gradient back
        for p in den.backbone.parameters():
            if not bool(p.any()):
                p.normal_(0.0, 0.05, generator=torch.Generator().manual_seed(1))
    emb = token_embedding(den.backbone, V)
    t = torch.full((4,), 0.02)  # α ≈ 0.98: z_t is (almost) x0
    grads = {}
    for tau in (1e-30, 1.0):
        den.backbone.zero_grad()
        out, (z_t, _) = curriculum_loss(obj, den, x0, None, tau, t=t, generator=torch.Generator().manual_seed(0),
                                        return_inputs=True)
        out.loss.backward()
        assert not bool((z_t == 10).any())  # T is nowhere in the input ids
        grads[tau] = emb.weight.grad[10].abs().sum()
    assert float(grads[1e-30]) == 0.0 and float(grads[1.0]) > 0  # T's row learns only through the soft mass

    rcps = onehot_lookup(denoiser("tiny").backbone)  # RCPS Caduceus: both strands read the one-hot
    ids = batch()
    w = torch.nn.functional.one_hot(ids, V).double().requires_grad_(True)
    assert torch.allclose(rcps.forward_onehot(w.to(rcps.weight.dtype)), rcps(ids), atol=1e-6)
    den = denoiser("tiny")
    (grad,) = torch.autograd.grad(call_soft(den, ids, w, torch.full((4,), 0.5)).sum(), w)
    assert float(grad[:, :, 7:11].abs().min()) > 0  # every data column of every position, both strands


def test_options_are_checked():
    for opts, msg in (({"curriculum_steps": -1}, "curriculum_steps must be an integer >= 0"),
                      ({"curriculum_tau": 0.0}, "curriculum_tau must be a number > 0"),
                      ({"curriculum_steps": 10, "curriculum_anneal_start": 11}, "curriculum_anneal_start must be"),
                      ({"curriculum_gamma_min": -3.5}, "go together"),
                      ({"curriculum_gamma_min": -1.0, "curriculum_gamma_max": -2.0}, "must be < curriculum_gamma_max")):
        with pytest.raises(DnadiffError, match=msg):
            udlm(**opts)


def test_training_loss_is_the_plain_loss_outside_the_curriculum():
    den, x0 = denoiser(), batch()
    for obj, step in ((udlm(), 0), (udlm(curriculum_steps=0), 0), (udlm(curriculum_steps=3), 3)):
        torch.manual_seed(11)
        got = training_loss(obj, den, x0, None, step=step)
        torch.manual_seed(11)
        ref = udlm().loss(den, x0)
        assert torch.equal(got.nll, ref.nll) and torch.equal(got.loss, ref.loss)
    torch.manual_seed(11)
    cur = training_loss(udlm(curriculum_steps=3), den, x0, None, step=2)
    assert not torch.equal(cur.nll, ref.nll)  # in the curriculum: other draws, a soft input


@pytest.mark.training
def test_dnadiff_train_with_the_curriculum(tmp_path):
    from dnadiff.training import train

    fast = ["objective=udlm", "data.seq_len=32", "train.batch_size=4", "train.val_batches=1", "train.warmup_steps=0",
            "train.threads=1", "train.progress=false", "train.max_steps=4", "train.val_every=4", "train.ckpt_every=4",
            "train.log_every=1"]
    weights, losses = {}, {}
    for name, extra in (("plain", []), ("zero", ["objective.options.curriculum_steps=0"]),
                        ("duo", ["objective.options.curriculum_steps=3"])):
        cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm",
                          [*fast, f"name={name}", f"out_dir={tmp_path}", *extra])
        res = train(cfg)
        weights[name] = load_file(str(res.model_dir / "model.safetensors"))
        rows = list(csv.DictReader(open(res.run_dir / "logs" / "metrics.csv")))
        losses[name] = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    assert weights["plain"].keys() == weights["zero"].keys()
    assert all(torch.equal(weights["plain"][k], weights["zero"][k]) for k in weights["plain"])  # bit-identical
    assert losses["plain"] == losses["zero"] and len(losses["duo"]) == 4
    assert all(math.isfinite(v) and 0 < v < 20 for v in losses["duo"])
    assert losses["duo"][:3] != losses["plain"][:3] and losses["duo"][3] != losses["plain"][3]
    assert any(not torch.equal(weights["plain"][k], weights["duo"][k]) for k in weights["plain"])
