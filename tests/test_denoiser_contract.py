"""The denoiser contract as types (dnadiff/denoiser.py): the protocols, the one wrapper base that forwards
them, the explicit call counter, and no probing of denoiser members by attribute name in the package."""

import re
from pathlib import Path

import pytest
import torch

from dnadiff.backbones import build_backbone
from dnadiff.denoiser import (
    CountingDenoiser,
    Denoiser,
    DenoiserWrapper,
    FunctionDenoiser,
    IncrementalDenoiser,
    as_denoiser,
)
from dnadiff.errors import DnadiffError
from dnadiff.model import Denoiser as ModelDenoiser
from dnadiff.model import SuppressTokens
from dnadiff.samplers import guided, rc_symmetric
from dnadiff.tokenizers import DNATokenizer

PACKAGE = Path(__file__).resolve().parent.parent / "dnadiff"
V = 12


def _fn(x_t, t):
    return torch.nn.functional.one_hot(x_t, V).float()


def test_a_bare_function_is_a_time_conditioned_denoiser():
    assert not isinstance(_fn, Denoiser)
    d = as_denoiser(_fn)
    assert isinstance(d, FunctionDenoiser) and isinstance(d, Denoiser) and d.time_conditioned is True
    assert not isinstance(d, IncrementalDenoiser)
    assert as_denoiser(d) is d
    x = torch.tensor([[7, 8, 9]])
    assert torch.equal(d(x, torch.zeros(1)), _fn(x, None))


def test_the_model_denoiser_is_incremental_and_declares_its_time_input():
    dit = ModelDenoiser(build_backbone("dit", preset="tiny", vocab_size=V))
    causal = ModelDenoiser(build_backbone("mamba", preset="tiny", vocab_size=V))
    assert isinstance(dit, IncrementalDenoiser) and isinstance(causal, IncrementalDenoiser)
    assert dit.time_conditioned == dit.backbone.time_conditioned
    assert dit.allocate_cache(2, 8) is None  # bidirectional: no incremental decoding
    assert causal.allocate_cache(2, 8) is not None


def test_the_counter_counts_calls_steps_and_rows_and_forwards_the_rest():
    causal = ModelDenoiser(build_backbone("mamba", preset="tiny", vocab_size=V)).eval()
    counter = CountingDenoiser(causal)
    assert isinstance(counter, DenoiserWrapper) and isinstance(counter, IncrementalDenoiser)
    assert counter.time_conditioned is causal.time_conditioned
    x = torch.randint(7, 11, (3, 5))
    with torch.no_grad():
        full = counter(x, torch.zeros(3))
        cache = counter.allocate_cache(3, 5)
        first = counter.step(x[:, 0], cache)
    assert (counter.calls, counter.rows) == (2, 6)
    torch.testing.assert_close(first, full[:, 0], rtol=1e-4, atol=1e-4)
    bare = CountingDenoiser(_fn)
    bare(x, torch.zeros(3))
    assert (bare.calls, bare.rows, bare.time_conditioned, bare.allocate_cache(3, 5)) == (1, 3, True, None)


def test_output_changing_wrappers_do_not_forward_steps():
    tok = DNATokenizer()
    causal = ModelDenoiser(build_backbone("mamba", preset="tiny", vocab_size=tok.vocab_size))
    rc = rc_symmetric(causal, tok.complement_map(), tok.mask_id)
    cfg = guided(causal, _fn, 1.0, tok.mask_id)
    assert rc.allocate_cache(2, 4) is None and cfg.allocate_cache(2, 4) is None
    assert rc.time_conditioned is causal.time_conditioned
    assert cfg.time_conditioned is True  # the bare function may read t
    suppress = SuppressTokens(causal, [0, 1])
    assert suppress.time_conditioned is causal.time_conditioned and suppress.allocate_cache(2, 4) is not None
    assert CountingDenoiser(rc).allocate_cache(2, 4) is None


def test_no_denoiser_member_is_probed_by_name():
    """`getattr(denoiser, "time_conditioned", default)` and the like: the types say what a denoiser has."""
    probe = re.compile(r"getattr\(\s*[\w.]*(denoiser|cond|uncond|inner|counter|counting)[\w.]*\s*,\s*"
                       r"[\"'](time_conditioned|allocate_cache|step|calls|rows|denoiser)[\"']")
    found = [f"{p.relative_to(PACKAGE.parent)}:{i}" for p in sorted(PACKAGE.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if probe.search(line)]
    assert found == []


def test_backbone_capabilities_are_declared_and_read_in_one_place():
    """Issue 50: what a backbone can do (time input, labels, incremental decoding) is read once, by
    `capabilities_of`, from what its class declares; model.py and sampling.py probe nothing by name."""
    from dnadiff.backbones.conditioning import ClassConditional
    from dnadiff.backbones.markov import MarkovChain, MarkovConfig
    from dnadiff.denoiser import capabilities_of
    from dnadiff.samplers import SAMPLERS

    caduceus = capabilities_of(build_backbone("caduceus", preset="tiny", vocab_size=V))
    assert (caduceus.time_conditioned, caduceus.num_classes, caduceus.is_causal) == (False, 0, False)
    mamba = build_backbone("mamba", preset="tiny", vocab_size=V, cond_dim=8)
    assert capabilities_of(mamba).is_causal and capabilities_of(mamba).incremental
    labelled = capabilities_of(ClassConditional(mamba, 3))
    assert labelled.conditional and labelled.num_classes == 3 and labelled.is_causal
    chain = capabilities_of(MarkovChain(MarkovConfig(vocab_size=V, order=2)))
    assert chain.is_causal and not chain.incremental and not chain.conditional
    assert [n for n in SAMPLERS.names() if SAMPLERS.get(n).posterior_cfg] == ["udlm"]  # D-CFG, declared
    probe = re.compile(r"(getattr|hasattr)\(\s*(self\.backbone|backbone|smp|sampler)\s*,\s*"
                       r"[\"'](num_classes|time_conditioned|allocate_cache|step|with_cfg)[\"']")
    found = [f"{name}:{i}" for name in ("model.py", "sampling.py")
             for i, line in enumerate((PACKAGE / name).read_text(encoding="utf-8").splitlines(), 1)
             if probe.search(line)]
    assert found == []


CAPABILITIES = ("num_classes", "time_conditioned", "takes_labels", "cond_dim", "allocate_cache", "step", "step_many",
                "forward_soft", "forward_onehot", "takes_embeddings", "progress_steps")


def test_capabilities_are_read_only_by_capabilities_of():
    """Issue 50 §2: the optional capabilities (incremental cache and step_many, soft input, labels and cond, time
    input) are read by `capabilities_of` alone; below training/ nothing probes them by name (eval/oracle.py
    reads a classifier's class count, not a backbone's), and samplers declare `progress_steps`."""
    from dnadiff.backbones.conditioning import ClassConditional
    from dnadiff.backbones.rcps import RCPSEmbedding
    from dnadiff.denoiser import capabilities_of
    from dnadiff.samplers import build_sampler

    mamba = build_backbone("mamba", preset="tiny", vocab_size=V, cond_dim=8)
    caps = capabilities_of(mamba)
    assert (caps.step_many, caps.step_takes_cond, caps.cond_dim, caps.takes_embeddings) == (True, True, 8, True)
    labelled = ClassConditional(mamba, 3)
    assert labelled.allocate_cache(2, 4) is not None  # its step passes the label as cond
    assert not capabilities_of(labelled).step_takes_cond and not capabilities_of(labelled).step_many
    assert capabilities_of(RCPSEmbedding(V, 8, DNATokenizer().complement_map(V))).forward_onehot
    assert not capabilities_of(build_backbone("hyena", preset="tiny", vocab_size=V)).takes_embeddings
    assert capabilities_of(_fn).forward_soft is False and capabilities_of(_fn).max_length is None
    assert capabilities_of(build_backbone("hyena", preset="tiny", vocab_size=V)).max_length == 1026
    assert build_sampler("first_hitting").progress_steps(10) == 10  # one call per token
    assert build_sampler("ancestral", steps=7).progress_steps(10) == 7
    probe = re.compile(r"(getattr|hasattr)\(\s*[\w.]+\s*,\s*[\"'](" + "|".join(CAPABILITIES) + r")[\"']")
    skip = {"denoiser.py", "eval/oracle.py"}
    found = [f"{rel}:{i}" for p in sorted(PACKAGE.rglob("*.py"))
             if (rel := p.relative_to(PACKAGE).as_posix()) not in skip and rel.split("/")[0] not in (
                 "training", "commands", "finetune", "finetune_reward", "classifier_tuning", "reward_tuning")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if probe.search(line)]
    assert found == []


def test_the_chain_declares_layout_cache_guidance_and_plaid_in_one_place():
    """Issue 50 §2: block diffusion's layout and KV cache and plaid's network are read down a denoiser's chain by
    `network_capabilities` / `chain_of` from what each layer declares; bd3lm.py, block_attention.py and
    plaid_net.py probe no attribute by name. A plain function says nothing of causality (None: the stream)."""
    from dnadiff.backbones.dit import DiTKVCache
    from dnadiff.denoiser import NetworkCapabilities, capabilities_of, chain_of, network_capabilities
    from dnadiff.diffusion.bd3lm import block_layout, network_is_causal
    from dnadiff.diffusion.plaid_net import plaid_parts

    dit = ModelDenoiser(build_backbone("dit", preset="tiny", vocab_size=V))
    mamba = ModelDenoiser(build_backbone("mamba", preset="tiny", vocab_size=V))
    caps = network_capabilities(dit)
    assert (caps.is_causal, caps.takes_attn_mask, caps.guided) == (False, True, False)
    assert isinstance(caps.new_kv_cache(), DiTKVCache) and block_layout(dit) == "attention"
    assert (capabilities_of(dit.backbone).takes_attn_mask, capabilities_of(dit).takes_attn_mask) == (True, None)
    assert network_capabilities(mamba) == NetworkCapabilities(True, False, None, False)
    assert block_layout(mamba) == "stream" and capabilities_of(mamba.backbone).declares_causal
    assert network_capabilities(_fn) == NetworkCapabilities(None, False, None, False)
    assert network_is_causal(CountingDenoiser(_fn)) is None and block_layout(CountingDenoiser(_fn)) == "stream"
    assert not capabilities_of(_fn).declares_causal and capabilities_of(_fn).takes_attn_mask is None
    cfg = CountingDenoiser(guided(dit, dit, 1.0, 3))
    assert network_capabilities(cfg).guided and capabilities_of(cfg.denoiser).guided and not capabilities_of(dit).guided
    assert network_capabilities(cfg).is_causal is False and network_capabilities(cfg).takes_attn_mask
    counted = CountingDenoiser(SuppressTokens(mamba, [2, 0]))
    layers = list(chain_of(counted))
    assert layers[:4] == [counted, counted.denoiser, mamba, mamba.backbone]
    assert capabilities_of(counted.denoiser).suppressed == (0, 2)
    assert [capabilities_of(x).relays_network for x in layers[:4]] == [True, True, True, False]
    assert network_is_causal(counted) is True and network_capabilities(counted).new_kv_cache is None

    class Net:  # a plaid network (not a Denoiser: as_denoiser holds it in a FunctionDenoiser), suppressed, counted
        def plaid_predict(self, z, g, t, self_cond=None, attention_mask=None):
            return z

    net = Net()
    counter = CountingDenoiser(SuppressTokens(CountingDenoiser(net), [1]))
    assert isinstance(counter.denoiser.denoiser.denoiser, FunctionDenoiser) and capabilities_of(net).plaid
    assert plaid_parts(counter) == (net, [1], counter)
    for refused in (guided(net, net, 1.0), rc_symmetric(net, [1, 0])):
        with pytest.raises(DnadiffError, match="plaid network"):
            plaid_parts(refused)
    probe = re.compile(r"(getattr|hasattr)\(\s*[\w.]+\s*,\s*[\"'](is_causal|takes_attn_mask|new_kv_cache|uncond|"
                       r"plaid_predict|banned|time_input|labels|backbone|denoiser)[\"']")
    found = [f"{name}:{i}" for name in ("diffusion/bd3lm.py", "samplers/block_attention.py", "diffusion/plaid_net.py")
             for i, line in enumerate((PACKAGE / name).read_text(encoding="utf-8").splitlines(), 1)
             if probe.search(line)]
    assert found == []
