"""scikit-learn style estimators built on specopt's routes (needs scikit-learn: the "learn" extra).

- Metric learning: :class:`PSDBoostMetric` (matrix generation), :class:`ITML`,
  :class:`ITMLSupervised`, :class:`KernelITML`, :class:`LowRankITML` (Bregman projections),
  :class:`RelativeComparisonMetric` (dual coordinate descent).
- Embedding and completion: :class:`MinimumVolumeEmbedding`, :class:`SemidefiniteEmbedding`,
  :class:`KernelPCAEmbedding`, :class:`SpectralMatrixCompletion`, :class:`NuclearNormCompletion`
  (iterated SDP).
- Transformation learning: :class:`RampFeatures`, :class:`TransformationSVM`,
  :class:`MultitaskTransformationSVM`.
"""

from .completion import NuclearNormCompletion, SpectralMatrixCompletion
from .embedding import KernelPCAEmbedding, MinimumVolumeEmbedding, SemidefiniteEmbedding
from .itml import ITML, ITMLSupervised, KernelITML, LowRankITML
from .psdboost import PSDBoostMetric
from .relative_comparison import RelativeComparisonMetric
from .transformation import MultitaskTransformationSVM, RampFeatures, TransformationSVM

__all__ = [
    "ITML",
    "ITMLSupervised",
    "KernelITML",
    "KernelPCAEmbedding",
    "LowRankITML",
    "MinimumVolumeEmbedding",
    "MultitaskTransformationSVM",
    "NuclearNormCompletion",
    "PSDBoostMetric",
    "RampFeatures",
    "RelativeComparisonMetric",
    "SemidefiniteEmbedding",
    "SpectralMatrixCompletion",
    "TransformationSVM",
]
