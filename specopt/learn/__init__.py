"""scikit-learn style estimators built on specopt's routes (needs scikit-learn)."""
from .itml import ITML, ITMLSupervised, KernelITML, LowRankITML  # noqa: F401
from .transformation import MultitaskTransformationSVM, RampFeatures, TransformationSVM  # noqa: F401
from .embedding import (  # noqa: F401
    KernelPCAEmbedding,
    MinimumVolumeEmbedding,
    SemidefiniteEmbedding,
)
from .completion import NuclearNormCompletion, SpectralMatrixCompletion  # noqa: F401
from .psdboost import PSDBoostMetric  # noqa: F401
from .relative_comparison import RelativeComparisonMetric  # noqa: F401
