"""Classification heads for fine-tuning a backbone on labelled DNA (pooling, RC conjoining)."""

from dnadiff.heads.classifier import ClassificationHead, SequenceClassifier, default_conjoin
from dnadiff.heads.pooling import POOLINGS, pool, reverse_complement_padded
from dnadiff.heads.saved import load_classifier_dir

__all__ = ["ClassificationHead", "SequenceClassifier", "default_conjoin", "POOLINGS", "pool",
           "reverse_complement_padded", "load_classifier_dir"]
