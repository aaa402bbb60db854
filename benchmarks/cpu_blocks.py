"""PyTorch blocks exported to ONNX for the CPU benchmarks (issue 14's two models and more).

    PYTHONPATH=src python benchmarks/cpu_blocks.py [--out benchmarks/out/onnx]

writes ``mbconv_se.onnx`` (a MobileNet-style inverted residual with squeeze-excitation),
``inception_block.onnx`` (an Inception-style block), ``transformer_block.onnx`` (pre-norm
attention + GELU MLP) and ``conv_block.onnx`` (two residual conv layers), exported by
``torch.onnx`` (dynamo), weights seeded. Other benchmarks call :func:`export_all`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "onnx"


class MBConvSE(nn.Module):
    """Inverted residual: 1x1 expand, 3x3 depthwise, squeeze-excitation, 1x1 project, residual."""

    def __init__(self, c: int = 32, expand: int = 4, se: int = 8) -> None:
        super().__init__()
        e = c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e), nn.ReLU())
        self.dw = nn.Sequential(
            nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False), nn.BatchNorm2d(e), nn.ReLU()
        )
        self.se1 = nn.Conv2d(e, se, 1)
        self.se2 = nn.Conv2d(se, e, 1)
        self.project = nn.Sequential(nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(self.expand(x))
        s = torch.sigmoid(self.se2(torch.relu(self.se1(y.mean((2, 3), keepdim=True)))))
        return x + self.project(y * s)


class InceptionBlock(nn.Module):
    """Four branches (1x1; 1x1-3x3; 1x1-3x3-3x3; pool-1x1) concatenated."""

    def __init__(self, c: int = 64) -> None:
        super().__init__()

        def cbr(i: int, o: int, k: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, k, padding=k // 2, bias=False), nn.BatchNorm2d(o), nn.ReLU())

        self.b1 = cbr(c, 32, 1)
        self.b2 = nn.Sequential(cbr(c, 24, 1), cbr(24, 32, 3))
        self.b3 = nn.Sequential(cbr(c, 24, 1), cbr(24, 32, 3), cbr(32, 32, 3))
        self.b4 = nn.Sequential(nn.AvgPool2d(3, 1, 1), cbr(c, 32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class ConvBlock(nn.Module):
    """Two 3x3 conv layers with batch norm and a residual, as in ResNet's basic block."""

    def __init__(self, c: int = 64) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


class TransformerBlock(nn.Module):
    """Pre-norm multi-head attention and a GELU MLP, each with a residual."""

    def __init__(self, d: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln1(x)
        x = x + self.att(y, y, y, need_weights=False)[0]
        return x + self.ff(self.ln2(x))


BLOCKS: dict[str, tuple[type[nn.Module], tuple[int, ...]]] = {
    "mbconv_se": (MBConvSE, (1, 32, 56, 56)),
    "inception_block": (InceptionBlock, (1, 64, 28, 28)),
    "conv_block": (ConvBlock, (1, 64, 28, 28)),
    "transformer_block": (TransformerBlock, (1, 64, 128)),
}
"""Block name -> (module class, input shape)."""


def export_all(out: Path = DEFAULT_OUT, names: list[str] | None = None) -> dict[str, Path]:
    """Export the blocks (seeded weights, eval mode) to ``out/NAME.onnx``; existing files are kept."""
    from tensor_eqsat.io.from_torch import torch_to_onnx
    from tensor_eqsat.io.onnx_export import save_model

    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names or list(BLOCKS):
        cls, shape = BLOCKS[name]
        path = out / f"{name}.onnx"
        if not path.exists():
            torch.manual_seed(0)
            module = cls().eval()
            with torch.no_grad():
                for p in module.parameters():
                    p.add_(0.1 * torch.randn_like(p))
                for m in module.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.running_mean.uniform_(-0.5, 0.5)
                        m.running_var.uniform_(0.5, 1.5)
            save_model(torch_to_onnx(module, torch.randn(*shape)), path)
        paths[name] = path
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    for name, path in export_all(args.out).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
