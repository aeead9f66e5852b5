"""How `dnadiff train` fits a count model (a backbone whose `neural` is False): the fit registered under
the backbone's name, `(cfg, tokenizer) -> (model, metrics, config to save)`; training.run wraps it in a
run directory. The fits live here, above the data and model-directory code they use, while the count
models themselves are backbones (backbones/markov.py)."""

from dnadiff.registry import Registry

COUNT_FITS = Registry("count model fit")  # filled by the imports of dnadiff/baselines/__init__.py
