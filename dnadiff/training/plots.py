"""Loss curve PNG from the CSV log (rendered in memory, then written atomically)."""

from __future__ import annotations

import csv
import io
import os


def plot_loss_curve(csv_path, png_path, title: str = "") -> bool:
    if not os.path.isfile(csv_path):
        return False
    steps, losses, vsteps, vlosses = [], [], [], []
    with open(csv_path) as fh:
        for row in csv.DictReader(fh):
            if row.get("train/loss"):
                steps.append(int(row["step"]))
                losses.append(float(row["train/loss"]))
            if row.get("val/nats_per_token"):
                vsteps.append(int(row["step"]))
                vlosses.append(float(row["val/nats_per_token"]))
    if not steps:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dnadiff.utils import atomic_write  # local: tests monkeypatch dnadiff.utils.atomic_write

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, losses, label="train loss (nats/token)", lw=1)
    if vsteps:
        ax.plot(vsteps, vlosses, "o-", label="valid bound (nats/token, EMA)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("nats per token")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    # drawn in memory first: the temporary file beside the PNG exists only while the finished bytes
    # are copied, so a process killed while matplotlib renders leaves no empty `.loss_curve.png.*.tmp`
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=100)
    finally:
        plt.close(fig)
    atomic_write(png_path, png.getvalue())
    return True
