"""What a result was measured on: one helper for every table, JSON and benchmark of dnadiff.

    machine_info()      {"host", "platform", "python", "torch", "device", "cpus", "physical_cores",
                         "torch_threads", "load_average"}   (JSON)
    describe_machine()  "vm (x86_64, CPU, 2 physical cores), torch 2.13.0+cpu, 2 threads"  (tables)
    load_average()      "load average 0.52, 0.61, 0.40 (1, 5, 15 min) on 2 CPUs"
    memory_kib(field)   VmRSS / VmHWM of a process (KiB); reset_peak_memory() starts a new VmHWM
    available_cores()   physical cores this process may run on (the default thread count)
"""

from __future__ import annotations

import os
import platform


def available_cores() -> int:
    """Physical cores among the CPUs this process may run on (its affinity mask, e.g. a cgroup/taskset).

    Hyper-threads of one core share its floating-point units, so one torch thread per physical
    core is the fast setting; more threads than that oversubscribe a shared machine.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    cores = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{base}/physical_package_id") as fh:
                pkg = fh.read().strip()
            with open(f"{base}/core_id") as fh:
                core = fh.read().strip()
            cores.add((pkg, core))
        except OSError:
            cores.add(("cpu", str(cpu)))  # no topology (containers, macOS): count logical CPUs
    return max(1, len(cores))


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    return "CPU"


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # not on every platform
        return None


def machine_info() -> dict:
    """The machine as a JSON-able dict (host, OS, Python, torch, device, CPUs, threads, load now)."""
    import torch

    return {"host": platform.node(), "platform": platform.platform(), "arch": platform.machine(),
            "python": platform.python_version(), "torch": torch.__version__, "device": _device(),
            "cpus": os.cpu_count(), "physical_cores": available_cores(), "torch_threads": torch.get_num_threads(),
            "load_average": _load()}


def describe_machine(info: dict | None = None) -> str:
    """One line for a table's header, from `machine_info()` (taken now when not given)."""
    m = info or machine_info()
    device = m["device"] if m["device"] != "CPU" else f"CPU, {m['physical_cores']} physical cores"
    return f"{m['host']} ({m['arch']}, {device}), torch {m['torch']}, {m['torch_threads']} threads"


def load_average() -> str:
    """The machine's load now, for a table footer (results measured on a shared machine say so)."""
    load = _load()
    if load is None:
        return "load average not available"
    return "load average {:.2f}, {:.2f}, {:.2f} (1, 5, 15 min) on {} CPUs".format(*load, os.cpu_count())


def memory_kib(field: str = "VmRSS", pid: int | str = "self") -> int | None:
    """A process's memory from Linux's /proc/PID/status, in KiB: "VmRSS" (resident now) or "VmHWM" (its
    peak since it started or since `reset_peak_memory`); None where /proc is missing. (A child's
    ru_maxrss starts at its parent's peak, which survives fork + exec: VmHWM is the process's own.)"""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_memory() -> None:
    """Start a new VmHWM high-water mark for this process (Linux: clear_refs 5); a no-op elsewhere."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


__all__ = ["available_cores", "machine_info", "describe_machine", "load_average", "memory_kib", "reset_peak_memory"]
