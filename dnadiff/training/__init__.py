"""Training (the only package that imports lightning): `train(cfg, resume=False, overwrite=False)`."""


def train(*args, **kwargs):
    from dnadiff.training.run import train as _train

    return _train(*args, **kwargs)


__all__ = ["train"]
