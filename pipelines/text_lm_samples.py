"""The samples of pipelines/text_lm.py (paper tab. 5): every row's samples with BOS fixed, timed, and scored by a
causal LM (gpt2-large at paper scale; on CPU a small GPT-2 trained here on the same corpus), beside real test text
under the same scorer."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch


def log(msg: str) -> None:
    print(f"[text_lm {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def test_blocks(model, data_cfg, split: str = "test", max_items: int | None = None):
    from dnadiff.data import build_text_datasets

    ds = build_text_datasets(data_cfg, model.tokenizer)[split]
    n = len(ds) if max_items is None else min(len(ds), max_items)
    return ds, n


def time_samples(model, num: int, length: int, batch: int, seed: int, **opts) -> tuple[torch.Tensor, float]:
    """Samples with the tokenizer's BOS fixed at position 0 (as every training block starts), through
    dnadiff.sample (batches of `batch`, one random stream per sequence), and the seconds per sequence."""
    import dnadiff

    tok = model.tokenizer
    template = torch.full((num, length), tok.mask_id, dtype=torch.long)
    template[:, 0] = tok.bos_id
    res = dnadiff.sample(model, num, length, template=template, batch_size=batch, seed=seed, **opts)
    return res.x, res.wall_seconds / num


def train_scorer(tok_path: str, ds, out_dir: Path, seconds: float, steps: int, batch: int, seed: int) -> str:
    """A small HF GPT-2 trained on the same corpus: the CPU stand-in for gpt2-large as scorer."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    if (out_dir / "model.safetensors").is_file():
        return str(out_dir)
    hf_tok = AutoTokenizer.from_pretrained(tok_path)
    torch.manual_seed(seed)
    L = ds.seq_len
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(hf_tok), n_positions=4 * L, n_embd=128, n_layer=4, n_head=4,
                                       bos_token_id=hf_tok.eos_token_id, eos_token_id=hf_tok.eos_token_id))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    start, step = time.time(), 0
    model.train()
    while step < steps and time.time() - start < seconds:
        idx = torch.randint(0, len(ds), (batch,), generator=g).tolist()
        x = torch.stack([ds[i]["input_ids"] for i in idx])  # (B, L) ids < len(hf_tok): no mask/pad in wrap mode
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    log(f"scorer: {step} steps in {time.time() - start:.0f} s, last loss {loss.item():.3f}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "dnadiff_scorer.json").write_text(json.dumps({"steps": step, "seconds": time.time() - start,
                                                            "last_loss": loss.item(), "batch": batch}))
    model.save_pretrained(str(out_dir))
    hf_tok.save_pretrained(str(out_dir))
    return str(out_dir)


def sample_eval(rows: dict, args, out_dir: Path) -> dict:
    """Tab. 5-style generation: samples, seconds/sequence, gen PPL and entropy."""
    import dnadiff
    from dnadiff.eval import decode_samples, generative_perplexity, load_scorer

    res: dict = {}
    mdlm = dnadiff.load(rows["mdlm"]["model_dir"], map_location=args.device)
    L = mdlm.config.data.seq_len
    if args.scale == "cpu" or args.dry_run:
        ds, _ = test_blocks(mdlm, mdlm.config.data, "train")
        scorer_path = train_scorer(str(out_dir.parent / "tokenizers" / "gpt2-like"), ds, out_dir / "scorer",
                                   args.scorer_seconds, args.scorer_steps, 16, args.seed)
    else:
        scorer_path = args.scorer
    scorer, scorer_tok = load_scorer(scorer_path, args.device)
    res["scorer"] = scorer_path
    info = Path(scorer_path) / "dnadiff_scorer.json"
    if info.is_file():
        res["scorer_training"] = json.loads(info.read_text())
    kinds = [("mdlm_ancestral", mdlm, L, dict(sampler="ancestral", steps=args.sample_steps)),
             ("mdlm_semi_ar", mdlm, args.semi_ar_mult * L,
              dict(sampler="semi_ar", steps=args.sample_steps, window=L, stride=L // 4))]
    if "ssdlm" in rows:  # tab. 5's SSD-LM row: same length, its own sampler and step count
        ssd = dnadiff.load(rows["ssdlm"]["model_dir"], map_location=args.device)
        block = ssd.objective.block_size
        kinds.append(("ssdlm_semi_ar", ssd, args.semi_ar_mult * L,
                      dict(sampler="ssdlm", steps=args.ssdlm_steps, context=max(0, L - block))))
    if "ar" in rows:
        kinds.append(("ar", dnadiff.load(rows["ar"]["model_dir"], map_location=args.device), L, {}))
    for name, model, length, opts in kinds:
        ids, sps = time_samples(model, args.num_samples, length, args.sample_batch, args.seed, **opts)
        texts = decode_samples(ids, model.tokenizer, eos_text=scorer_tok.eos_token)
        g = generative_perplexity(texts, scorer, tokenizer=scorer_tok, batch_size=8, device=args.device)
        w = generative_perplexity(texts, scorer, tokenizer=scorer_tok, batch_size=8, device=args.device,
                                  stop_at_first_eos=False)
        res[name] = {"length": length, "seconds_per_sequence": sps, "gen_ppl": g["gen_ppl"],
                     "entropy_mean": g["entropy_mean"], "scored_tokens": g["num_tokens"],
                     "gen_ppl_whole": w["gen_ppl"], "entropy_whole": w["entropy_mean"],
                     "scored_tokens_whole": w["num_tokens"], "example": texts[0][:300],
                     **({"sampler": opts} if opts else {})}
        log(f"samples {name}: L={length}, {sps:.2f} s/seq, gen ppl {g['gen_ppl']:.1f} (whole {w['gen_ppl']:.1f}), "
            f"entropy {g['entropy_mean']:.2f}")
    # reference point: real test documents under the same scorer
    ds, n = test_blocks(mdlm, mdlm.config.data, "test", args.num_samples)
    real = decode_samples(torch.stack([ds[i]["input_ids"] for i in range(n)]), mdlm.tokenizer,
                          eos_text=scorer_tok.eos_token)
    g = generative_perplexity(real, scorer, tokenizer=scorer_tok, batch_size=8, device=args.device)
    w = generative_perplexity(real, scorer, tokenizer=scorer_tok, batch_size=8, device=args.device,
                              stop_at_first_eos=False)
    res["real_test_text"] = {"length": L, "gen_ppl": g["gen_ppl"], "entropy_mean": g["entropy_mean"],
                             "scored_tokens": g["num_tokens"], "gen_ppl_whole": w["gen_ppl"],
                             "entropy_whole": w["entropy_mean"], "scored_tokens_whole": w["num_tokens"]}
    return res
