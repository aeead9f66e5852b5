"""The judges of the generation tables (issue 46), shared by the pipelines that re-judge their rows:

- the classifier two-sample test (dnadiff.eval.auroc_columns: a strand-averaged CNN and a k-mer LR tell a row's
  sequences from held-out real ones, k-fold; AUROC ± Hanley-McNeil SE, exact binomial p-value of the accuracy).
  Every table keeps a real row judged the same way against the same reference: the real-vs-real floor, what an
  indistinguishable generator gets. A row too small for the folds, or a row of an older JSON, shows "—".
- the DHS neural evaluation oracle (pipelines/dhs_oracles.py --roles neural: ORACLES/neural_oracle, a ConvJudge
  on half_b, role evaluation) beside the k-mer LR evaluation oracle, when its folder exists.

    cols = disc_columns(samples, reference)          # {"disc_auroc_cnn": ..., "disc_se_cnn": ..., "disc_p_cnn": ...}
    cells = disc_cells(row)                          # {"CNN AUROC ± SE (p)": "0.712 ± 0.031 (p 2e-05)", ...}
"""

from __future__ import annotations

import math
from pathlib import Path

JUDGES = (("cnn", "CNN"), ("kmer_lr", "k-mer LR"))
NEURAL_FOLDER = "neural_oracle"  # dhs_oracles.NEURAL's folder (not imported: dhs_oracles pulls in training)


def disc_note(what: str = "the row's sequences (its seeds pooled)") -> str:
    """The tables' note on the discriminator columns; `what` says which sequences one test reads."""
    return ("Discriminator columns (issue 46; classifier two-sample test, Lopez-Paz & Oquab, ICLR 2017): 5-fold "
            "out-of-fold AUROC ± Hanley-McNeil SE of a small CNN (one-hot, both strands) and of a k-mer LR (k 3-6) "
            f"telling {what} from as many held-out real ones, and the exact binomial p-value of their accuracy; "
            "0.5 = indistinguishable; the real row, judged the same way against the same reference, is the "
            "real-vs-real floor. —: too few sequences for the folds, or a table written before the column existed.")


def disc_columns(samples: list[str], reference: list[str], settings=None) -> dict:
    """The row's {"disc_auroc_<judge>", "disc_se_<judge>", "disc_p_<judge>"} (dnadiff.eval.auroc_columns, seed 0),
    {} when the sets are too few for the folds; `settings` (DiscriminatorSettings) a smaller judge in tests."""
    from dnadiff.eval import auroc_columns

    return auroc_columns(list(samples), list(reference), settings=settings)


def judge_fastas(sets: list[tuple[dict, list]], reference: list[str], settings=None) -> None:
    """Adds disc_columns to each (row, its FASTA files) of `sets`: the files' sequences pooled vs `reference`."""
    from dnadiff.data import read_fasta

    for row, paths in sets:
        row.update(disc_columns([s for p in paths for _, s in read_fasta(p)], reference, settings))


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def disc_cell(row: dict, judge: str) -> str:
    """'AUROC ± SE (p P)' of one judge, or '—' when the row has none."""
    a, se, p = (row.get(f"disc_{k}_{judge}") for k in ("auroc", "se", "p"))
    if not _num(a):
        return "—"
    return f"{a:.3f}" + (f" ± {se:.3f}" if _num(se) else "") + (f" (p {p:.2g})" if _num(p) else "")


def disc_cells(row: dict) -> dict[str, str]:
    """{"CNN AUROC ± SE (p)": ..., "k-mer LR AUROC ± SE (p)": ...} of a row (— where missing)."""
    return {f"{label} AUROC ± SE (p)": disc_cell(row, judge) for judge, label in JUDGES}


def floor_line(real_row: dict | None, what: str) -> str:
    """One line naming the real-vs-real floor of a table (its real row's AUROCs)."""
    cells = disc_cells(real_row or {})
    return (f"Real-vs-real floor ({what}): " + "; ".join(f"{k.split(' AUROC')[0]} {v}" for k, v in cells.items())
            + " (0.5 = indistinguishable).")


def neural_oracle(oracles_dir: str | None):
    """(ConvJudge, its folder) of ORACLES/neural_oracle when it exists, else (None, None)."""
    if not oracles_dir or not (Path(oracles_dir) / NEURAL_FOLDER / "classifier.json").is_file():
        return None, None
    from dnadiff.eval import load_oracle

    folder = str(Path(oracles_dir) / NEURAL_FOLDER)
    return load_oracle(folder)[0], folder


def target_rate_of(oracle, samples: list[str], targets: list, classes: list[str]) -> float:
    """The target-cell-type rate of `samples` (argmax of the oracle = the target), as dnadiff.eval.target_rate."""
    from dnadiff.eval import predict_proba, target_rate

    return target_rate(predict_proba(oracle, samples), targets, classes)["rate"]


def success_rate(oracle, samples: list[str], k: int) -> float | None:
    """The share of `samples` whose argmax under `oracle` is class k (dhs_design's success); None without one."""
    if oracle is None:
        return None
    from dnadiff.eval import predict_proba

    return float((predict_proba(oracle, samples).argmax(axis=1) == k).mean())


def realistic_rule(neural: bool) -> str:
    """Which judge the success / realistic rule uses (printed in the tables' notes, recorded in the JSON)."""
    return ("success and realistic success: argmax of the k-mer LR evaluation oracle (eval_oracle) is the target; "
            + ("the neural evaluation oracle (neural_oracle, a CNN on half_b) gives the 'neural' columns beside it"
               if neural else "no neural evaluation oracle in the oracles folder (pipelines/dhs_oracles.py "
               "--roles neural makes it): no neural columns"))


def neural_section(neural_dir: str | None, metric_table) -> list[str]:
    """The dhs_benchmark section of target rates under the neural evaluation oracle; a line saying how to make
    the oracle where the run (or an older JSON) had none."""
    return ["## Target-cell-type rate under the neural evaluation oracle (CNN on half_b; issue 46)", "",
            metric_table("target_neural") if neural_dir else
            "— (no neural_oracle in the oracles folder: `python pipelines/dhs_oracles.py --roles neural` makes it)", ""]


def judges_note(rule: str | None, real_row: dict | None, what: str) -> str:
    """dhs_design's note: which judge its success rules use (an older JSON's: the k-mer LR), the discriminator
    columns and their real-vs-real floor."""
    return (f"Judges: {rule or realistic_rule(False)}. " + disc_note("the row's designs") + " "
            + floor_line(real_row, what))
