"""Stop a training run where Lightning's Trainer is built and look at what it was asked for: the settings
dnadiff hands to Lightning (devices, precision, progress bars, ...) checked without training."""

from __future__ import annotations


class Stopped(Exception):
    """Raised by a stand-in to end the run under test at the point the test looks at."""


def record_trainer_kwargs(monkeypatch) -> dict:
    """Replaces lightning.Trainer (for the rest of the test) by a stand-in that records the keyword arguments
    it is built with into the returned dict, then raises Stopped."""
    import lightning

    seen: dict = {}

    def fake_trainer(**kwargs):
        seen.update(kwargs)
        raise Stopped

    monkeypatch.setattr(lightning, "Trainer", fake_trainer)
    return seen
