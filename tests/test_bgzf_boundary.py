"""A window starting exactly on a BGZF block boundary (uncompressed offset 65536) must read.

pyfaidx/Biopython compute a virtual offset with within-block offset 65536 there and raise
"Require 0 <= within_block_offset < 2**16"; a 25-minute CPU training run died on such a window of
the shared chr22 (chr22:29652348-29652476)."""

from __future__ import annotations

import random


def test_fetch_across_a_bgzf_block_boundary(tmp_path):
    from Bio import bgzf

    from dnadiff.data.fasta import Genome

    rng = random.Random(0)
    seq = "".join(rng.choice("ACGT") for _ in range(200000))
    path = tmp_path / "g.fa.gz"
    with bgzf.BgzfWriter(str(path), "wb") as w:  # 60-bp lines: base 64459 sits at byte 3 + 64459 + 1074 = 65536
        w.write((">c\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n").encode())
    g = Genome(path)
    for start in (64458, 64459, 64460):
        assert g.fetch("c", start, start + 50) == seq[start:start + 50]
