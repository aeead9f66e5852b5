"""Masked-diffusion math: schedules, SUBS, objectives (MDLM, D3PM, SEDD, AR, MLM)."""

from dnadiff.diffusion.schedules import SCHEDULES, Schedule, build_schedule

__all__ = ["SCHEDULES", "Schedule", "build_schedule"]
