"""PyTorch integration: the ``tensor_eqsat`` backend of ``torch.compile`` and :func:`optimize_module`.

Needs the ``torch`` extra. Importing this package registers the Dynamo backend ``tensor_eqsat``
(an installed package also declares it under the ``torch_dynamo_backends`` entry point, so
``torch.compile(model, backend="tensor_eqsat")`` finds it without the import)::

    import tensor_eqsat.torch
    fast = torch.compile(model, backend="tensor_eqsat", dynamic=False,
                         options={"target": "torch-cpu", "time_budget": 30, "then": "inductor"})

See docs/torch.md.
"""

from tensor_eqsat.torch.config import TorchConfig
from tensor_eqsat.torch.dynamo_backend import (
    BACKEND_NAME,
    Compiled,
    FallbackWarning,
    backend,
    optimize_module,
    register,
)
from tensor_eqsat.torch.fx_import import Unsupported, translate
from tensor_eqsat.torch.report import BackendReport

register()

__all__ = [
    "BACKEND_NAME",
    "BackendReport",
    "Compiled",
    "FallbackWarning",
    "TorchConfig",
    "Unsupported",
    "backend",
    "optimize_module",
    "register",
    "translate",
]
