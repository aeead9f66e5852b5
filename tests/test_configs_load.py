from pathlib import Path

import pytest
import yaml

from dnadiff.config import CONFIG_ROOT, RunConfig, load_config, to_dict

CONFIGS = sorted(p for p in Path(CONFIG_ROOT).rglob("*.yaml") if "finetune" not in p.name and "text" not in p.parts)


def test_configs_folder_is_the_shipped_one():
    top = Path(__file__).resolve().parent.parent / "configs"
    assert top.resolve() == Path(CONFIG_ROOT).resolve()
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(CONFIG_ROOT)))
def test_every_yaml_loads(path):
    cfg = load_config(RunConfig, path)
    assert isinstance(cfg, RunConfig)
    # every value the file itself sets is the loaded one (its defaults come first; data paths as written)
    loaded = to_dict(load_config(RunConfig, path, resolve_paths=False))
    own = yaml.safe_load(path.read_text())
    own.pop("defaults", None)
    for key, value in _leaves(own):
        got = loaded
        for part in key:
            got = got[part]
        assert got == value, ".".join(key)


def _leaves(tree: dict, prefix: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


def test_defaults_compose():
    cfg = load_config(RunConfig, "experiments/tiny_dna_mdlm")
    assert cfg.model.backbone == "caduceus" and cfg.model.preset == "tiny"
    assert cfg.objective.name == "mdlm" and cfg.data.seq_len == 128  # the file wins over its defaults
    paper = load_config(RunConfig, "experiments/paper_dna_mdlm")
    assert paper.model.preset == "dna-467k" and paper.train.batch_size * paper.train.accumulate == 1024
