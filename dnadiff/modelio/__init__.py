"""Model I/O in one place, below the model (dnadiff/model.py builds a DiffusionModel from what it reads):

    source = resolve("runs/tiny/model")      # source.py: a folder or a cached Hub id, its format, once
    parts = read_model(source)               # read.py: config, backbone, tokenizer, metrics
    save(model, "out/model")                 # model_dir.py: the dnadiff model directory (atomic)
    push(model_or_dir, "org/name")           # push.py: stage, model card, upload

hub.py resolves Hub ids in the local Hugging Face cache (huggingface_hub is imported only inside its
functions and push's). Official formats are registered in backbones/formats.py (`CHECKPOINT_FORMATS`).
"""

from dnadiff.modelio.model_dir import save
from dnadiff.modelio.push import push_to_hub as push
from dnadiff.modelio.read import ModelParts, read_backbone, read_backbone_noted, read_model
from dnadiff.modelio.source import ModelSource, resolve

__all__ = ["ModelParts", "ModelSource", "push", "read_backbone", "read_backbone_noted", "read_model", "resolve",
           "save"]
