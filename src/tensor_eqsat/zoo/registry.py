"""The model registry: the paper's 13 benchmark models by name, with their metadata.

``get(name, **params)`` builds a model; parameters override the builder's defaults (the paper's
values), so ``get("vit-base", layers=2, hidden=64)`` is a small ViT. ``names()`` lists the
models in the paper's table order and ``info(name)`` returns a :class:`ModelInfo`.

``k_multi`` is the number of runner iterations in which TENSAT's multi-pattern rules run in the
TENSAT baseline. For the nine TENSAT models it is the value of the paper's artifact
(``run_exp_main.sh``). For ViT-Base/Large/Huge and TT the paper chose k_multi by raising it
until the e-graph saturated or hit the 2,000-node limit, a procedure that can be run with the
saturation runner (:mod:`tensor_eqsat.search.runner`) but has not been run on these
definitions yet. Their values here (2, 2, 1 and 2) are **provisional**: they are the ones
printed in the paper's Table 2 for the paper's own, unpublished definitions of these models, and
``k_multi_provisional`` is True until they are re-derived on these definitions.

``rule_set`` is the other per-model fact ``optimize()`` reads: the paper's rules, or for NASRNN
the variant in which one multi-pattern rule is replaced (for the paper's searches: ``auto`` uses
the paper's rules on every model, :func:`~tensor_eqsat.optimize.rule_set_for`).

Alternatives rejected: a registration decorator in every builder module (the table would be
spread over 10 files) and one builder per name for the ViT sizes (three copies of one
function; presets over ``vit`` say the same thing in data).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tensor_eqsat.ir.graph import Graph
from tensor_eqsat.zoo.bert import bert
from tensor_eqsat.zoo.inception import inceptionv3
from tensor_eqsat.zoo.mobilenet import mobilenetv2
from tensor_eqsat.zoo.nasnet import nasneta
from tensor_eqsat.zoo.nasrnn import nasrnn
from tensor_eqsat.zoo.params import ZooError
from tensor_eqsat.zoo.resnet import resnet50, resnext50
from tensor_eqsat.zoo.squeezenet import squeezenet
from tensor_eqsat.zoo.transducer import transformer_transducer
from tensor_eqsat.zoo.vgg import vgg
from tensor_eqsat.zoo.vit import PRESETS, vit


@dataclass(frozen=True)
class ModelInfo:
    """One benchmark model: how to build it and what the experiments need to know about it.

    name: registry name (``tensor-eqsat show NAME``).
    title: the model's usual name.
    builder: the builder function; ``presets`` are passed to it before the caller's parameters.
    k_multi: iterations with multi-pattern rules in the TENSAT baseline (see the module docstring).
    k_multi_provisional: True while k_multi is not yet derived by the paper's method on this
        definition.
    tensat: True for the nine models rebuilt exactly as TENSAT builds them.
    reference: where the definition comes from.
    presets: builder parameters fixed by this entry (e.g. the ViT size).
    rule_set: the rule set ``optimize()`` uses for this model by default in a search other than
        ``auto`` (``mcts``, ``saturate``: the paper's). Default ``taso`` (the paper's 139 rules);
        NASRNN uses ``taso-nasrnn``, in which the paper replaced one multi-pattern rule (TASO
        could not run its result). ``auto`` uses ``taso`` on every model.
    """

    name: str
    title: str
    builder: Callable[..., Graph]
    k_multi: int
    reference: str
    tensat: bool = True
    k_multi_provisional: bool = False
    presets: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    rule_set: str = "taso"

    def defaults(self) -> dict[str, Any]:
        """The parameters the default model is built with (builder defaults, then presets)."""
        sig = inspect.signature(self.builder)
        out = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
        out.update(self.presets)
        return out

    def build(self, **params: Any) -> Graph:
        """Build the model; ``params`` override the defaults. Raises ZooError on unknown names."""
        known = self.defaults()
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ZooError(
                self.name, f"unknown parameter(s) {', '.join(unknown)} (parameters: {', '.join(known)})"
            )
        try:
            return self.builder(**{**self.presets, **params})
        except ZooError as exc:
            if exc.model == self.name:
                raise
            # A shared builder (``vit`` for the three ViT sizes) names itself; name the entry.
            raise ZooError(self.name, exc.detail) from None


_TENSAT = "TENSAT (Yang et al. 2021), as built or loaded by its optimizer"

_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("bert", "BERT (TENSAT's attention stack)", bert, 1, _TENSAT + " (src/bert.rs)"),
    ModelInfo("inceptionv3", "Inception-v3", inceptionv3, 2, _TENSAT + " (model/inceptionv3.model)"),
    ModelInfo("mobilenetv2", "MobileNet-v2", mobilenetv2, 1, _TENSAT + " (model/mobilenetv2.model)"),
    ModelInfo("nasneta", "NASNet-A", nasneta, 1, _TENSAT + " (src/nasneta.rs)"),
    ModelInfo("nasrnn", "NASRNN", nasrnn, 3, _TENSAT + " (src/nasrnn.rs)", rule_set="taso-nasrnn"),
    ModelInfo("resnet50", "ResNet-50 (no stem)", resnet50, 4, _TENSAT + " (src/resnet50.rs)"),
    ModelInfo("resnext50", "ResNeXt-50 32x4d", resnext50, 4, _TENSAT + " (src/resnext50.rs)"),
    ModelInfo("squeezenet", "SqueezeNet 1.1", squeezenet, 3, _TENSAT + " (model/squeezenet.model)"),
    ModelInfo("vgg", "VGG-19", vgg, 1, _TENSAT + " (model/vgg.model)"),
    ModelInfo(
        "tt",
        "Transformer-Transducer",
        transformer_transducer,
        2,
        "Zhang et al. 2020, arXiv:2002.02562",
        tensat=False,
        k_multi_provisional=True,
    ),
    *(
        ModelInfo(
            name,
            f"ViT-{name.split('-')[1].capitalize()}/{preset['patch']}",
            vit,
            k,
            "Dosovitskiy et al. 2021, arXiv:2010.11929",
            tensat=False,
            k_multi_provisional=True,
            presets=MappingProxyType(dict(preset)),
        )
        for name, preset, k in (
            ("vit-base", PRESETS["vit-base"], 2),
            ("vit-large", PRESETS["vit-large"], 2),
            ("vit-huge", PRESETS["vit-huge"], 1),
        )
    ),
)

_BY_NAME: dict[str, ModelInfo] = {m.name: m for m in _MODELS}


def names() -> list[str]:
    """Registered model names, in the paper's table order.

    >>> names()[:3], len(names())
    (['bert', 'inceptionv3', 'mobilenetv2'], 13)
    """
    return [m.name for m in _MODELS]


def info(name: str) -> ModelInfo:
    """The :class:`ModelInfo` of a model; raises ZooError naming the known models otherwise.

    >>> info("resnet50").k_multi
    4
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ZooError(name, f"no such model (models: {', '.join(names())})") from None


def get(name: str, **params: Any) -> Graph:
    """Build model ``name``; ``params`` override its defaults (see each builder's docstring).

    >>> g = get("nasrnn", steps=2, hidden=8)
    >>> g.op_counts()["matmul"]
    32
    """
    return info(name).build(**params)
