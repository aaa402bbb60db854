"""Small PyTorch models for the backend's tests (random init, seeded by the caller)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """A private disk cache, an empty memory cache and a reset Dynamo for every test of a module
    that imports this fixture."""
    import tensor_eqsat.torch as te_torch
    from tensor_eqsat.torch.dynamo_backend import graph_cache

    monkeypatch.setenv("TENSOR_EQSAT_CACHE_DIR", str(tmp_path / "cache"))
    graph_cache(None).clear_memory()
    torch._dynamo.reset()
    torch.manual_seed(0)
    te_torch.backend.reports.clear()
    yield
    torch._dynamo.reset()


class BasicBlock(nn.Module):
    """ResNet's basic block (two 3x3 convs, batch norm, in-place ReLU, identity shortcut)."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


class ResNeXtBlock(nn.Module):
    """ResNeXt's bottleneck: 1x1, grouped 3x3 (cardinality ``groups``), 1x1, projection shortcut."""

    def __init__(
        self, cin: int = 16, width: int = 16, cout: int = 32, groups: int = 4, stride: int = 1
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.down(x))


class InvertedResidual(nn.Module):
    """MobileNet-v2's inverted residual: 1x1 expand, depthwise 3x3, 1x1 project, ReLU6."""

    def __init__(self, c: int = 8, expand: int = 4) -> None:
        super().__init__()
        hidden = c * expand
        self.block = nn.Sequential(
            nn.Conv2d(c, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, c, 1, bias=False),
            nn.BatchNorm2d(c),
        )

    def forward(self, x):
        return x + self.block(x)


class Attention(nn.Module):
    """Self-attention written out: separate Q, K and V projections, softmax, output projection."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.dim = heads, dim
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        h, hd = self.heads, d // self.heads
        q = self.q(x).view(b, s, h, hd).transpose(1, 2)
        k = self.k(x).view(b, s, h, hd).transpose(1, 2)
        v = self.v(x).view(b, s, h, hd).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / hd**0.5, dim=-1)
        return self.o((att @ v).transpose(1, 2).reshape(b, s, d))


class WithUnmodelledOp(nn.Module):
    """A linear, an op the IR lacks (``torch.cumsum``), a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        return self.b(torch.cumsum(torch.relu(self.a(x)), dim=-1))


class Noisy(nn.Module):
    """Adds fresh noise: a random op."""

    def forward(self, x):
        return torch.relu(x) + torch.randn_like(x)


class InPlaceOnInput(nn.Module):
    """Updates its input in place."""

    def forward(self, x):
        x.mul_(2.0)
        return torch.relu(x)


def hf_models():
    """Tiny random-init HuggingFace BERT, GPT-2 and ViT (configs built here, nothing downloaded)."""
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, ViTConfig, ViTModel

    bert = BertModel(
        BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=64, max_position_embeddings=64)
    )  # fmt: skip
    gpt2 = GPT2Model(GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64))
    vit = ViTModel(
        ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64),
        add_pooling_layer=False,
    )  # fmt: skip
    ids = torch.randint(0, 100, (1, 16))
    return {
        "bert": (bert.eval(), (ids,)),
        "gpt2": (gpt2.eval(), (ids,)),
        "vit": (vit.eval(), (torch.randn(1, 3, 32, 32),)),
    }


class ScalarArithmetic(nn.Module):
    """Additions and subtractions of Python numbers on both sides, as GPT-2's GELU writes them."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(x + 0.044715)) - 3 + (2.0 - x)


FAST = {
    "then": "eager",
    "time_budget": 5,
    "cost_model": "roofline:cpu",
    "search": {"search": "saturate", "node_limit": 300},
    "guard": False,
}
"""Backend settings for quick tests: a small saturation priced by the CPU roofline, run eagerly, no guard."""


def run(model, x, **options):
    """``model`` (put in eval mode) eager and through the backend with :data:`FAST` updated by
    ``options``: (compiled output, eager output, the backend's reports)."""
    import tensor_eqsat.torch as te_torch

    model.eval()
    compiled = torch.compile(model, backend="tensor_eqsat", dynamic=False, options={**FAST, **options})
    with torch.no_grad():
        expected = model(x)
        got = compiled(x)
    return got, expected, list(te_torch.backend.reports)


def close(a, b, tol=1e-5):
    """Whether ``a`` is within ``tol`` of ``b``, relative to ``b``'s largest magnitude (at least 1)."""
    return (a - b).abs().max().item() <= tol * max(1.0, b.abs().max().item())


def run_at(compiled, model, shapes):
    """(compiled output, eager output) on a random input of each shape, in order, with no
    gradients recorded; a FallbackWarning is an error."""
    import warnings

    import tensor_eqsat.torch as te_torch

    out = []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", te_torch.FallbackWarning)
        for shape in shapes:
            x = torch.randn(*shape)
            out.append((compiled(x), model(x)))
    return out


def capture(fn, *inputs):
    """The Dynamo FX graph of ``fn`` and its example inputs."""
    torch._dynamo.reset()
    out: list = []

    def grab(gm, example_inputs):
        out.append((gm, list(example_inputs)))
        return gm

    with torch.no_grad():
        torch.compile(fn, backend=grab, dynamic=False, fullgraph=True)(*inputs)
    torch._dynamo.reset()
    return out[0]
