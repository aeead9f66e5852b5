"""Golden samples (issue 50 §6): each registered sampler, and the wrappers and options around it (strand
averaging, class labels, classifier-free guidance, templates, batches, the output cache), gives for a fixed
seed on a fixed-weight model exactly the samples and NFE counts stored before the sampling path was
refactored (tests/data/golden_samples.json, written by tests/helpers/golden_samples.py from that code).
A changed hash means the samples changed: a refactor must not, a science change regenerates nothing but
says so in its commit."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.golden_samples import GOLDEN, all_cases, run_case

STORED = json.loads(GOLDEN.read_text())["cases"]


@pytest.mark.parametrize("name", sorted(STORED))
def test_sampler_output_is_bit_identical_to_the_stored_one(name):
    torch.set_num_threads(1)
    got = run_case(STORED[name]["case"])
    want = STORED[name]["expect"]
    assert got["first_row"] == want["first_row"], name
    assert got == want, name


def test_every_registered_sampler_has_a_golden_case():
    """A new sampler adds its case: `python tests/helpers/golden_samples.py --add` (existing ones are kept)."""
    missing = sorted(set(all_cases()) - set(STORED))
    assert not missing, f"no golden samples for {missing}: run python tests/helpers/golden_samples.py --add"


def test_the_golden_cases_tell_the_wrappers_apart():
    """The cases are not degenerate: strand averaging, guidance and labels each change the samples."""
    sha = {name: STORED[name]["expect"]["sha256"] for name in STORED}
    for variant in ("ancestral+time", "ancestral+rc_symmetric", "ancestral+label", "remdm+temperature"):
        assert sha[variant] != sha["ancestral"], variant
    assert sha["ancestral+cfg"] != sha["ancestral+label"] and sha["udlm+cfg"] != sha["udlm"]
    assert STORED["ancestral+cfg"]["expect"]["nfe_total"] == 2 * STORED["ancestral+label"]["expect"]["nfe_total"]
    assert len(set(sha.values())) >= len(sha) - 3  # analytic = ancestral for MDLM; cached and cache=True too
