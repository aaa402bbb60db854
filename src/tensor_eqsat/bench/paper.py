"""The paper's published results, for comparing a sweep with them.

:data:`PAPER_TABLE2_A100` is the paper's Table 2 (NVIDIA A100, ``paper/paper.tex``,
``tab:comprehensive_mcts_results`` and its continuation): for each model and configuration, the
mean and standard deviation over five runs of the runtime speedup (%) and the mean optimization
time (s). Runtimes there were measured by TASO on the GPU; a sweep here prices graphs with a cost
model, so only relative results (rankings of configurations, MCTS-vs-TENSAT gains) are
comparable, never absolute milliseconds. The paper's optimization times also count different
things for MCTS and TENSAT (``reference/paper-artifact.md`` §4.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple


class PaperCell(NamedTuple):
    """One (model, configuration) of the paper's Table 2."""

    speedup_mean: float
    speedup_std: float
    opt_time_s: float


PAPER_TABLE2_A100: Mapping[tuple[str, str], PaperCell] = MappingProxyType(
    {
        ("bert", "dcf-dcf"): PaperCell(-0.16, 0.16, 43.0),
        ("bert", "dcf-ilp"): PaperCell(0.72, 1.55, 41.6),
        ("bert", "ocf-ocf"): PaperCell(-0.1, 0.22, 46.6),
        ("bert", "ocf-ilp"): PaperCell(14.63, 7.65, 43.8),
        ("bert", "ilp-ilp"): PaperCell(18.2, 3.92, 1178.6),
        ("bert", "tensat"): PaperCell(18.27, 0.33, 1.14),
        ("inceptionv3", "dcf-dcf"): PaperCell(-0.05, 0.3, 3.0),
        ("inceptionv3", "dcf-ilp"): PaperCell(0.51, 0.47, 3.0),
        ("inceptionv3", "ocf-ocf"): PaperCell(1.06, 1.68, 3.0),
        ("inceptionv3", "ocf-ilp"): PaperCell(-0.01, 1.15, 3.4),
        ("inceptionv3", "ilp-ilp"): PaperCell(0.25, 0.26, 3.0),
        ("inceptionv3", "tensat"): PaperCell(0.36, 0.56, 0.89),
        ("mobilenetv2", "dcf-dcf"): PaperCell(4.05, 2.55, 1149.8),
        ("mobilenetv2", "dcf-ilp"): PaperCell(2.94, 11.3, 992.0),
        ("mobilenetv2", "ocf-ocf"): PaperCell(-3.61, 1.06, 419.4),
        ("mobilenetv2", "ocf-ilp"): PaperCell(-0.36, 1.6, 387.6),
        ("mobilenetv2", "ilp-ilp"): PaperCell(4.16, 2.03, 754.0),
        ("mobilenetv2", "tensat"): PaperCell(1.52, 1.0, 0.93),
        ("nasneta", "dcf-dcf"): PaperCell(18.29, 4.07, 898.0),
        ("nasneta", "dcf-ilp"): PaperCell(21.46, 3.55, 777.6),
        ("nasneta", "ocf-ocf"): PaperCell(16.55, 0.18, 1043.6),
        ("nasneta", "ocf-ilp"): PaperCell(17.71, 0.5, 1114.4),
        ("nasneta", "ilp-ilp"): PaperCell(19.62, 0.29, 305.0),
        ("nasneta", "tensat"): PaperCell(11.18, 0.08, 0.45),
        ("nasrnn", "dcf-dcf"): PaperCell(9.75, 5.49, 102.2),
        ("nasrnn", "dcf-ilp"): PaperCell(39.96, 1.22, 107.6),
        ("nasrnn", "ocf-ocf"): PaperCell(20.65, 17.77, 200.8),
        ("nasrnn", "ocf-ilp"): PaperCell(41.19, 3.5, 114.6),
        ("nasrnn", "ilp-ilp"): PaperCell(42.07, 3.91, 2782.0),
        ("nasrnn", "tensat"): PaperCell(36.92, 4.24, 9.36),
        ("resnet50", "dcf-dcf"): PaperCell(-0.23, 0.26, 9.6),
        ("resnet50", "dcf-ilp"): PaperCell(-1.24, 17.8, 9.8),
        ("resnet50", "ocf-ocf"): PaperCell(2.52, 6.21, 10.0),
        ("resnet50", "ocf-ilp"): PaperCell(3.6, 8.25, 10.0),
        ("resnet50", "ilp-ilp"): PaperCell(-0.22, 0.97, 23.2),
        ("resnet50", "tensat"): PaperCell(0.43, 0.94, 2.96),
        ("resnext50", "dcf-dcf"): PaperCell(72.69, 9.4, 38.2),
        ("resnext50", "dcf-ilp"): PaperCell(72.99, 11.9, 38.8),
        ("resnext50", "ocf-ocf"): PaperCell(78.06, 0.19, 97.6),
        ("resnext50", "ocf-ilp"): PaperCell(77.84, 1.09, 101.4),
        ("resnext50", "ilp-ilp"): PaperCell(74.2, 9.54, 138.6),
        ("resnext50", "tensat"): PaperCell(66.87, 15.36, 2.69),
        ("squeezenet", "dcf-dcf"): PaperCell(56.41, 0.95, 283.4),
        ("squeezenet", "dcf-ilp"): PaperCell(47.39, 7.05, 108.4),
        ("squeezenet", "ocf-ocf"): PaperCell(47.23, 6.6, 260.8),
        ("squeezenet", "ocf-ilp"): PaperCell(48.16, 8.77, 337.0),
        ("squeezenet", "ilp-ilp"): PaperCell(50.66, 6.01, 1450.8),
        ("squeezenet", "tensat"): PaperCell(46.02, 0.91, 1.55),
        ("vgg", "dcf-dcf"): PaperCell(39.72, 0.14, 1.0),
        ("vgg", "dcf-ilp"): PaperCell(39.63, 0.11, 1.0),
        ("vgg", "ocf-ocf"): PaperCell(39.69, 0.35, 1.0),
        ("vgg", "ocf-ilp"): PaperCell(39.69, 0.12, 1.0),
        ("vgg", "ilp-ilp"): PaperCell(39.21, 0.73, 1.0),
        ("vgg", "tensat"): PaperCell(39.58, 0.34, 0.06),
        ("tt", "dcf-dcf"): PaperCell(-123.81, 5.35, 1202.33),
        ("tt", "dcf-ilp"): PaperCell(9.68, 4.93, 1363.0),
        ("tt", "ocf-ocf"): PaperCell(8.06, 1.21, 436.2),
        ("tt", "ocf-ilp"): PaperCell(13.02, 1.78, 577.0),
        ("tt", "ilp-ilp"): PaperCell(14.18, 0.19, 2080.8),
        ("tt", "tensat"): PaperCell(13.29, 1.67, 1.35),
        ("vit-base", "dcf-dcf"): PaperCell(2.2, 0.21, 110.6),
        ("vit-base", "dcf-ilp"): PaperCell(8.34, 2.85, 115.0),
        ("vit-base", "ocf-ocf"): PaperCell(-0.12, 0.2, 60.6),
        ("vit-base", "ocf-ilp"): PaperCell(14.6, 0.05, 61.0),
        ("vit-base", "ilp-ilp"): PaperCell(14.48, 0.08, 97.8),
        ("vit-base", "tensat"): PaperCell(14.47, 0.12, 0.61),
        ("vit-large", "dcf-dcf"): PaperCell(15.24, 0.02, 53.4),
        ("vit-large", "dcf-ilp"): PaperCell(6.6, 0.03, 54.2),
        ("vit-large", "ocf-ocf"): PaperCell(-0.2, 0.11, 52.2),
        ("vit-large", "ocf-ilp"): PaperCell(9.69, 0.58, 56.4),
        ("vit-large", "ilp-ilp"): PaperCell(10.77, 0.15, 35.0),
        ("vit-large", "tensat"): PaperCell(10.61, 0.09, 0.69),
        ("vit-huge", "dcf-dcf"): PaperCell(28.48, 0.07, 60.8),
        ("vit-huge", "dcf-ilp"): PaperCell(0.02, 0.04, 69.8),
        ("vit-huge", "ocf-ocf"): PaperCell(-0.06, 0.03, 62.2),
        ("vit-huge", "ocf-ilp"): PaperCell(0.82, 1.83, 62.8),
        ("vit-huge", "ilp-ilp"): PaperCell(4.14, 0.07, 76.6),
        ("vit-huge", "tensat"): PaperCell(0.02, 0.05, 0.49),
    }
)
"""(zoo model name, configuration name) -> the paper's numbers (A100)."""
