"""What RC-symmetric sampling changes for a given MDLM: its denoiser with and without strand averaging.

    python benchmarks/rc_symmetric_check.py runs/cpu_hour/caduceus_mdlm/model --out results/rc_symmetric_check.json

`dnadiff sample --rc-symmetric` averages the denoiser's predictions for a sequence and for its reverse
complement (samplers/wrappers.py). For an RC-equivariant backbone (Caduceus-PS) the two agree by
construction, so the sampler's output should not change; for a plain one (Caduceus-PH, Mamba, DiT)
they differ. This measures it instead of sampling a whole table row (2x the network calls of
ancestral sampling): on --num random DNA sequences of --length bases, each masked at rate t for
t in --times, the largest absolute difference between the two denoisers' probabilities and their mean
total-variation distance per masked position; then --num sequences drawn with the ancestral sampler
(--steps steps, the same seed) with and without strand averaging, and how many came out identical.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a dnadiff model directory (a bidirectional DNA model)")
    ap.add_argument("--num", type=int, default=8)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--times", default="0.1,0.5,0.9")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="write the JSON here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    import dnadiff
    from dnadiff.errors import DnadiffError
    from dnadiff.samplers import rc_symmetric
    from dnadiff.samplers.rng import SeedStream
    from dnadiff.utils import format_table, portable_paths, write_json

    t0 = time.time()
    try:
        model = dnadiff.load(args.model)
    except DnadiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    model.backbone.eval()
    tok = model.tokenizer
    plain = model.denoiser
    averaged = rc_symmetric(plain, tok.complement_map(), mask_id=tok.mask_id)
    g = torch.Generator().manual_seed(args.seed)
    content = torch.tensor(list(tok.content_ids))
    x0 = content[torch.randint(0, len(content), (args.num, args.length), generator=g)]
    rows = []
    with torch.no_grad():
        for t in (float(v) for v in args.times.split(",")):
            masked = torch.rand(x0.shape, generator=g) < t
            xt = torch.where(masked, torch.full_like(x0, tok.mask_id), x0)
            tt = torch.full((args.num,), t)
            logits = plain(xt, tt).float()
            logits[..., tok.mask_id] = float("-inf")  # as the wrapper and SUBS: never predict [MASK]
            p = logits.softmax(-1)[masked]  # (masked positions, V)
            q = averaged(xt, tt).exp()[masked]  # the wrapper returns log-probabilities
            rows.append({"t": t, "masked positions": int(masked.sum()),
                         "max |p - p_rc|": float((p - q).abs().max()),
                         "mean TV": float(0.5 * (p - q).abs().sum(-1).mean())})
        same = []
        for rc in (False, True):
            same.append(model.generate(args.num, args.length, sampler="ancestral", steps=args.steps,
                                       generator=SeedStream(args.seed), rc_symmetric=rc))
    identical = int((same[0] == same[1]).all(dim=1).sum())
    agree = float((same[0] == same[1]).double().mean())
    out = {"command": "python benchmarks/rc_symmetric_check.py " + " ".join(argv or sys.argv[1:]),
           "model": args.model, "rcps": bool(getattr(model.backbone.config, "rcps", False)), "denoiser": rows,
           "ancestral_samples": {"num": args.num, "length": args.length, "steps": args.steps, "seed": args.seed,
                                 "identical_sequences": identical, "agreeing_positions": agree},
           "wall_seconds": round(time.time() - t0, 1)}
    print(format_table(rows))
    print(f"ancestral, {args.steps} steps, seed {args.seed}: {identical} of {args.num} sequences identical with and "
          f"without strand averaging ({agree:.4%} of positions agree)")
    if args.out:
        write_json(args.out, portable_paths(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
