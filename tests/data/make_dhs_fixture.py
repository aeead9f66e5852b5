"""Cut the DHS test fixture (tests/data/dhs/dhs_fixture.txt) from the real DNA-Diffusion table.

The table is `dnadiffusion/data/K562_hESCT0_HepG2_GM12878_12k_sequences_per_group.txt` of the
`dnadiffusion` 0.0.0.dev0 wheel (MIT; sha256 dnadiff.data.dhs.DHS_SHA256). The fixture keeps the header
line and, for each split (data_label) x cell type (TAG), PER_GROUP rows drawn with numpy's
default_rng(SEED), in the table's row order, all 19 columns unchanged: 12 groups x 25 = 300 rows.
Running this again gives a byte-identical file.

    python tests/data/make_dhs_fixture.py dnadiffusion-0.0.0.dev0-py3-none-any.whl   # or the .txt
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

from dnadiff.data.dhs import DHS_SHA256
from dnadiff.data.dhs_fetch import read_source

HERE = Path(__file__).resolve().parent
PER_GROUP = 25
SEED = 0


def cut(data: bytes) -> bytes:
    lines = data.decode("utf-8").rstrip("\n").split("\n")
    header = lines[0].split("\t")
    tag, label = header.index("TAG"), header.index("data_label")
    groups: dict[tuple[str, str], list[int]] = {}
    for i, line in enumerate(lines[1:], start=1):
        fields = line.split("\t")
        groups.setdefault((fields[label], fields[tag]), []).append(i)
    rng = np.random.default_rng(SEED)
    keep = []
    for key in sorted(groups):
        keep += rng.choice(groups[key], size=PER_GROUP, replace=False).tolist()
    return ("\n".join([lines[0]] + [lines[i] for i in sorted(keep)]) + "\n").encode("utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="the dnadiffusion wheel, or the table's .txt")
    args = ap.parse_args()
    data, where = read_source(args.source)
    if hashlib.sha256(data).hexdigest() != DHS_SHA256:
        raise SystemExit(f"{where}: not the pinned DHS table (sha256 differs)")
    out = HERE / "dhs" / "dhs_fixture.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(cut(data))
    print(f"wrote {out} (sha256 {hashlib.sha256(out.read_bytes()).hexdigest()})")


if __name__ == "__main__":
    main()
