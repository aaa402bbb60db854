"""Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words"), inference.

No public artifact defines the paper's ViT graphs (../reference/paper-artifact.md §3.2), so this
follows the ViT paper and its reference code; every choice is listed here.

* Input [batch, 3, 224, 224]. Patch embedding = conv P×P, stride P, VALID, with a bias [D, 1, 1];
  reshape [B, D, N] and transpose (0, 2, 1) to N = (224/P)² tokens [B, N, D].
* A learned class token is concatenated in front (token axis) and a learned position embedding
  [1, N+1, D] is added (broadcast ``ewadd``).
* L pre-norm blocks: ``x = x + MSA(LN(x)); x = x + MLP(LN(x))``. MSA has separate biased Q, K,
  V projections, heads h (d_k = D/h), Q divided by √d_k before ``Q·Kᵀ`` (as the reference code
  scales the query), softmax on the last axis, a biased output projection. MLP: dense D→M + bias,
  exact (erf) GELU, dense M→D + bias. Layer norms use eps 1e-6, as the reference code does.
* Final layer norm over all tokens, the class token taken with ``split`` on the token axis, a
  reshape to [B, D] and a linear head D→classes with bias (the fine-tuning head; no pre-logits
  layer).
* No dropout (inference).

Presets (the paper's Table 1): Base 16×16 patches, D 768, L 12, h 12, M 3072; Large 16, 1024, 24,
16, 4096; Huge 14, 1280, 32, 16, 5120 (224/14 = 16 patches per side, 257 tokens). Parameter
counts at batch 1 and 1000 classes: 86,567,656 / 304,326,632 / 632,045,800, as published.

The graph IR has no broadcast-to-batch op, so for batch > 1 the class-token weight is stored
pre-tiled as [batch, 1, D]; a deployment fills every row with the one learned token. At the
paper's batch 1 this is exactly the model.
"""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.zoo.params import positive, require
from tensor_eqsat.zoo.transformer import dense, layer_norm, self_attention

LN_EPS = 1e-6


def vit(
    *,
    batch: int = 1,
    image: int = 224,
    patch: int = 16,
    hidden: int = 768,
    layers: int = 12,
    heads: int = 12,
    mlp: int = 3072,
    classes: int = 1000,
    channels: int = 3,
) -> Graph:
    """A Vision Transformer for inference (see the module docstring); defaults are ViT-Base/16.

    batch: images. Default 1.
    image: input height and width; must be a multiple of ``patch``. Default 224.
    patch: patch size (conv kernel and stride). Default 16.
    hidden: model width D. Default 768.
    layers: encoder blocks L. Default 12.
    heads: attention heads; must divide ``hidden``. Default 12.
    mlp: MLP hidden width M. Default 3072.
    classes: outputs of the linear head. Default 1000.
    channels: input image channels. Default 3.

    >>> g = vit(image=8, patch=4, hidden=8, layers=1, heads=2, mlp=16, classes=3)
    >>> g.shape_of(g.outputs[0]), g.op_counts()["softmax"]
    ((1, 3), 1)
    """
    positive(
        "vit",
        batch=batch,
        image=image,
        patch=patch,
        hidden=hidden,
        layers=layers,
        heads=heads,
        mlp=mlp,
        classes=classes,
        channels=channels,
    )
    require("vit", image % patch == 0, f"image {image} must be a multiple of patch {patch}")
    require("vit", hidden % heads == 0, f"heads {heads} must divide hidden {hidden}")
    side = image // patch
    tokens = side * side + 1
    g = Graph()
    x = g.input((batch, channels, image, image), name="image")
    w = g.weight((hidden, channels, patch, patch), name="patch_embed.weight")
    x = g.conv2d(x, w, stride=(patch, patch), padding="valid")
    x = g.ewadd(x, g.weight((hidden, 1, 1), name="patch_embed.bias"))
    x = g.transpose(g.reshape(x, (batch, hidden, side * side)), (0, 2, 1))
    cls = g.weight((batch, 1, hidden), name="cls_token")
    x = g.concat([cls, x], axis=1)
    x = g.ewadd(x, g.weight((1, tokens, hidden), name="pos_embed"))
    for i in range(layers):
        name = f"blocks.{i}"
        y = self_attention(g, layer_norm(g, x, f"{name}.norm1", LN_EPS), heads, f"{name}.attn")
        x = g.ewadd(x, y)
        y = dense(g, layer_norm(g, x, f"{name}.norm2", LN_EPS), mlp, f"{name}.mlp.fc1")
        y = dense(g, g.gelu(y), hidden, f"{name}.mlp.fc2")
        x = g.ewadd(x, y)
    x = layer_norm(g, x, "norm", LN_EPS)
    cls_out = g.split(x, axis=1, sizes=(1, tokens - 1))[0]
    cls_out = g.reshape(cls_out, (batch, hidden))
    g.output(dense(g, cls_out, classes, "head"))
    return g


PRESETS: dict[str, dict[str, int]] = {
    "vit-base": {"patch": 16, "hidden": 768, "layers": 12, "heads": 12, "mlp": 3072},
    "vit-large": {"patch": 16, "hidden": 1024, "layers": 24, "heads": 16, "mlp": 4096},
    "vit-huge": {"patch": 14, "hidden": 1280, "layers": 32, "heads": 16, "mlp": 5120},
}
"""The paper's three sizes (Dosovitskiy et al. Table 1) as ``vit`` parameters."""
