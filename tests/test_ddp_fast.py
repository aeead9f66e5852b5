"""DDP's training arithmetic on two simulated ranks, in one process and a few seconds (issue 50 §6).

tests/test_ddp.py launches real gloo ranks (slow); this module runs the same per-rank logic directly:
each rank's data sampler (StreamSampler, through StreamDataModule.train_dataloader), its per-micro-batch
reseed (DiffusionLitModule._seed_step, keyed on the global micro-batch G = micro_step * W + rank), its
training_step, and DDP's gradient averaging; against one process taking two micro-batches per optimizer
step (Lightning's accumulate: each micro-batch loss scaled by 1/2). 2 ranks x 4 windows must equal
1 process x 2 micro-batches of 4: the same windows per G, the same noise per G, the same losses exactly,
weights equal up to float summation order.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch

from dnadiff.backbones import build_backbone
from dnadiff.config import RunConfig, load_config
from dnadiff.tokenizers import build_tokenizer
from dnadiff.training.datamodule import StreamDataModule
from dnadiff.training.module import DiffusionLitModule

OVERRIDES = ["train.max_steps=3", "train.batch_size=4", "data.seq_len=32", "train.warmup_steps=1",
             "train.val_batches=1", "train.ema=0", "train.threads=1"]


def _module(cfg, tok, rank: int, world: int, backbone=None) -> DiffusionLitModule:
    if backbone is None:
        torch.manual_seed(0)
        backbone = build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size)
    module = DiffusionLitModule(cfg, copy.deepcopy(backbone), tok)
    module._trainer = SimpleNamespace(global_rank=rank, world_size=world, global_step=0)
    module.log = lambda *a, **k: None  # no Lightning logger outside a fit
    return module


def _batches(cfg, tok, rank: int, world: int):
    dm = StreamDataModule(cfg, tok)
    dm.trainer = SimpleNamespace(global_rank=rank, world_size=world)
    dm.setup("fit")
    return iter(dm.train_dataloader())


def test_per_step_reseed_differs_between_ranks():
    """With the old reseed (seed, micro-step) both ranks drew the same times and masks."""
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [])
    tok = build_tokenizer("dna")
    module = DiffusionLitModule(cfg, build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size), tok)
    draws = {}
    for rank in (0, 1):
        module._trainer = SimpleNamespace(global_rank=rank, world_size=2)
        module.micro_step = 5
        module._seed_step()
        draws[rank] = torch.rand(8)
    assert not torch.equal(draws[0], draws[1])
    module._trainer = SimpleNamespace(global_rank=0, world_size=1)
    module.micro_step = 11  # 1 process: micro-batch 11 is rank 1's 6th micro-batch (G = 5 * 2 + 1)
    module._seed_step()
    assert torch.equal(torch.rand(8), draws[1])


def test_two_simulated_ranks_equal_one_process_with_accumulate_two():
    tok = build_tokenizer("dna")
    ddp_cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", OVERRIDES)
    single_cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm", [*OVERRIDES, "train.accumulate=2"])
    torch.manual_seed(0)
    init = build_backbone("caduceus", preset="tiny", vocab_size=tok.vocab_size)

    ranks = [_module(ddp_cfg, tok, r, 2, init) for r in (0, 1)]
    rank_opts = [m.configure_optimizers()["optimizer"] for m in ranks]
    rank_data = [_batches(ddp_cfg, tok, r, 2) for r in (0, 1)]
    single = _module(single_cfg, tok, 0, 1, init)
    single_opt = single.configure_optimizers()["optimizer"]
    single_data = _batches(single_cfg, tok, 0, 1)

    ddp_loss, single_loss, ddp_windows, single_windows = {}, {}, {}, {}
    for step in range(3):
        for m in (*ranks, single):
            m._trainer.global_step = step  # the optimizer steps taken (Lightning's trainer.global_step)
        for r, (m, data) in enumerate(zip(ranks, rank_data)):  # each rank: its own micro-batch G = 2·step + r
            batch = next(data)
            g = m.global_micro_step()
            ddp_windows[g] = batch["sample_index"].tolist()
            loss = m.training_step(batch, step)
            ddp_loss[g] = float(loss)
            loss.backward()
        for pa, pb in zip(*(m.backbone.parameters() for m in ranks)):  # DDP: all-reduce mean of the gradients
            if pa.grad is not None:
                mean = (pa.grad + pb.grad) / 2
                pa.grad, pb.grad = mean.clone(), mean.clone()
        for opt in rank_opts:
            opt.step()
            opt.zero_grad()
        for _ in range(2):  # one process: two micro-batches, each loss / accumulate
            batch = next(single_data)
            g = single.global_micro_step()
            single_windows[g] = batch["sample_index"].tolist()
            loss = single.training_step(batch, step)
            single_loss[g] = float(loss)
            (loss / 2).backward()
        single_opt.step()
        single_opt.zero_grad()

    assert sorted(ddp_windows) == sorted(single_windows) == list(range(6))
    for g in range(6):  # rank g % 2 took windows 4G .. 4G + 3, as the one process did
        assert ddp_windows[g] == single_windows[g] == list(range(4 * g, 4 * g + 4)), g
    assert ddp_loss[0] == single_loss[0] and ddp_loss[1] == single_loss[1]  # same init, data and noise
    assert max(abs(ddp_loss[g] - single_loss[g]) for g in range(6)) < 1e-5
    a, b = dict(ranks[0].backbone.named_parameters()), dict(single.backbone.named_parameters())
    assert all(torch.equal(a[k], dict(ranks[1].backbone.named_parameters())[k]) for k in a)  # ranks in sync
    changed = max(float((a[k] - init.state_dict()[k]).abs().max()) for k in a)
    assert changed > 1e-4  # three steps moved the weights
    dw = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
    assert dw < 1e-5, dw
