"""--threads of every computing command and the default thread count (dnadiff/threads.py)."""

from __future__ import annotations

import os

import pytest
import torch

import dnadiff.machine
from dnadiff.cli import COMPUTE_COMMANDS, build_parser, main, start_threads
from dnadiff.errors import DnadiffError
from dnadiff.threads import (
    CHILD_ENV_VARS,
    apply_threads,
    choose_threads,
    default_threads,
    env_threads,
    free_cores,
)

# the required arguments of each computing command (values never read: parsing only)
ARGV = {
    "train": ["experiments/tiny_dna_mdlm"],
    "eval": ["MODEL"],
    "sample": ["MODEL"],
    "finetune": ["experiments/tiny_finetune"],
    "metrics": ["x.fa", "--reference", "ref.fa"],
    "demo": [],
    "design": ["MODEL", "--reward", "gc", "--out", "x.fa"],
    "design-finetune": ["MODEL", "--reward", "gc", "--method", "drakes", "--kl-weight", "0.1", "--out", "ft"],
    "distill": ["MODEL", "--steps", "8", "--out", "student"],
    "edit": ["MODEL", "--in", "x.fa", "--reward", "gc", "--max-edits", "2", "--out", "e.fa"],
}


@pytest.fixture
def machine(monkeypatch):
    """A 2-core machine with no OMP_NUM_THREADS; set `.load` to the 1-minute load average."""

    class Machine:
        load = 0.0

    m = Machine()
    monkeypatch.setattr(dnadiff.machine, "available_cores", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (m.load, m.load, m.load))
    for var in CHILD_ENV_VARS:  # set, then removed: monkeypatch puts the real values back afterwards
        monkeypatch.setenv(var, "1")
        monkeypatch.delenv(var)
    return m


@pytest.mark.parametrize("cores, load, expected", [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 13.0, 1),  # the busy 2-core machine: 1
    (8, 2.3, 6), (8, 2.6, 5), (4, 3.6, 1), (4, 0.0, 4), (1, 0.0, 1),
])
def test_free_cores_are_the_cores_minus_the_load_rounded_and_at_least_one(cores, load, expected):
    assert free_cores(cores, load) == expected


def test_free_cores_without_a_load_average_counts_every_core(monkeypatch):
    def no_load():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", no_load)
    assert free_cores(cores=3) == 3


def test_omp_num_threads_is_read_as_openmp_reads_it():
    assert env_threads({}) is None and env_threads({"OMP_NUM_THREADS": " "}) is None
    assert env_threads({"OMP_NUM_THREADS": "3"}) == 3
    assert env_threads({"OMP_NUM_THREADS": "4,2"}) == 4  # nested parallelism: the first level
    for bad in ("0", "abc", "-1", "2.5"):
        with pytest.raises(DnadiffError, match="OMP_NUM_THREADS"):
            env_threads({"OMP_NUM_THREADS": bad})


def test_default_is_omp_num_threads_else_the_free_cores_shared_by_the_processes(machine, monkeypatch):
    machine.load = 13.0
    assert default_threads() == 1  # busy: never more than one thread
    machine.load = 0.1
    assert default_threads() == 2 and default_threads(per_process=2) == 1 and default_threads(per_process=4) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "5")  # explicit: honoured whatever the load
    assert default_threads() == 5 and default_threads(per_process=2) == 5
    machine.load = 13.0
    assert default_threads() == 5
    assert choose_threads(3) == 3  # --threads comes first
    with pytest.raises(DnadiffError, match="--threads"):
        choose_threads(0)


def test_apply_threads_sets_torch_numba_and_the_given_environment():
    env: dict[str, str] = {}
    before = torch.get_num_threads()
    assert apply_threads(3, env) == before
    assert torch.get_num_threads() == 3
    assert env == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"}
    assert apply_threads(1) == 3 and torch.get_num_threads() == 1
    with pytest.raises(DnadiffError, match="threads"):
        apply_threads(0)


def test_apply_threads_sets_numba_threads_when_numba_is_imported():
    numba = pytest.importorskip("numba")
    pool = numba.config.NUMBA_NUM_THREADS
    apply_threads(1)
    assert numba.get_num_threads() == 1
    apply_threads(pool + 5)  # more than numba's pool: its whole pool
    assert numba.get_num_threads() == pool and torch.get_num_threads() == pool + 5
    apply_threads(1)


@pytest.mark.parametrize("command", COMPUTE_COMMANDS)
def test_every_computing_command_takes_threads_and_applies_it_at_start(command, machine):
    args = build_parser().parse_args([command, *ARGV[command], "--threads", "3"])
    assert args.threads == 3
    start_threads(args)
    assert torch.get_num_threads() == 3
    assert all(os.environ[var] == "3" for var in CHILD_ENV_VARS)  # for child processes
    if command in ("train", "finetune", "demo"):  # the run applies and records train.threads
        assert args.overrides[-1] == "train.threads=3"
    else:
        assert not hasattr(args, "overrides")


@pytest.mark.parametrize("command", ["sample", "train"])
def test_without_threads_a_busy_machine_gets_one_thread_and_the_environment_is_left_alone(command, machine):
    machine.load = 13.0
    torch.set_num_threads(2)
    args = build_parser().parse_args([command, *ARGV[command]])
    assert args.threads is None
    start_threads(args)
    assert torch.get_num_threads() == 1
    assert not any(var in os.environ for var in CHILD_ENV_VARS)
    assert getattr(args, "overrides", []) == []  # train: train.threads of the config (null: the same default)
    machine.load = 0.2  # idle: both cores
    start_threads(build_parser().parse_args([command, *ARGV[command]]))
    assert torch.get_num_threads() == 2


def test_omp_num_threads_is_honoured_by_the_commands(machine, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    machine.load = 13.0
    start_threads(build_parser().parse_args(["eval", "MODEL"]))
    assert torch.get_num_threads() == 2


def test_configs_takes_no_threads(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["configs", "--threads", "2"])
    assert exc.value.code == 2


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_a_bad_thread_count_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sample", "MODEL", "--threads", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--threads: must be a positive number of threads" in err and "Traceback" not in err


def test_a_bad_omp_num_threads_is_one_line(machine, monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    assert main(["sample", "no_such_model"]) == 2
    assert capsys.readouterr().err == "error: OMP_NUM_THREADS: must be a positive number of threads, got 'many'\n"


def test_print_config_shows_the_threads_of_a_training_run(machine, capsys):
    assert main(["train", "experiments/tiny_dna_mdlm", "--threads", "2", "--print-config"]) == 0
    assert "  threads: 2\n" in capsys.readouterr().out
    assert main(["finetune", "experiments/tiny_finetune", "--threads", "3", "--print-config"]) == 0
    assert "  threads: 3\n" in capsys.readouterr().out


def test_help_documents_the_default(capsys):
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--threads N" in out and "OMP_NUM_THREADS" in out and "1-minute load average" in out
