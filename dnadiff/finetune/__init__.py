"""Deprecated alias: this package was renamed dnadiff.classifier_tuning (issue 50: package names that say what
they hold). `from dnadiff.finetune import run_finetune` and `import dnadiff.finetune.runs` still give the new
package's objects, with a DeprecationWarning; nothing in dnadiff imports this name."""

from dnadiff.classifier_tuning import __all__  # noqa: F401  (the same public names)
from dnadiff.lazy import moved_package

__getattr__ = moved_package(__name__, "dnadiff.classifier_tuning",
                            {n: f"dnadiff.classifier_tuning.{n}" for n in
                             ("config", "kmer_lr", "kmer_settings", "protocol", "runs")})
