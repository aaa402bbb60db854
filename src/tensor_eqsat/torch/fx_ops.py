"""The one table of FX calls the IR models: how each torch-level call becomes IR ops.

:data:`TRANSLATORS` maps a call (a function object, or ``"method:name"`` for a tensor method) to
a translator that returns the node's value (:class:`~tensor_eqsat.torch.fx_import.Ir` or
:class:`~tensor_eqsat.torch.fx_import.Seq`) or raises :class:`NotMapped` when this instance is
not exactly an IR op (a dilated conv, an average pool counting its padding, a scalar add); the
node then stays opaque. Every translation is exact: PyTorch padding becomes the IR's SAME only
where both pad the same rows and columns, a linear is ``x @ Wᵀ + b`` with ``Wᵀ`` frozen, a
subtraction is ``a + (-1)·b`` (exact in IEEE arithmetic). The calls of today's inference graphs
(activations, RMSNorm's pieces, padding, indexing, ``expand``, dtype casts) are registered in
the same table by :mod:`tensor_eqsat.torch.fx_ops_inference`.

Besides, :func:`check_sound` refuses what cannot be optimized soundly (random ops, training-mode
batch norm and dropout), and :func:`functional_form` takes an in-place op functionally when the
tensor it updates is a fresh intermediate that no view taken before the update shares (a view
taken after it reads the updated value, which is the functional result: torchvision's ConvNeXt
block ``out = stochastic_depth(scale * branch(x)); out += x``, then a permute of ``out``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tensor_eqsat.ir.ops import same_padding

if TYPE_CHECKING:
    from tensor_eqsat.ir.graph import Tensor
    from tensor_eqsat.torch.fx_import import Value, _Translator


class NotMapped(Exception):
    """This node is not exactly an IR op; it stays opaque."""


Translator = Callable[["_Translator", Any, Sequence[Any], dict[str, Any]], "Value"]

TRANSLATORS: dict[Any, Translator] = {}
"""Call (function object or ``"method:name"``) -> translator."""


def _register(*keys: Any) -> Callable[[Translator], Translator]:
    def deco(fn: Translator) -> Translator:
        for k in keys:
            if k is not None:
                TRANSLATORS[k] = fn
        return fn

    return deco


def _torch() -> Any:
    import torch

    return torch


# -- argument access ---------------------------------------------------------------------------
def _arg(args: Sequence[Any], kwargs: dict[str, Any], i: int, name: str, default: Any = None) -> Any:
    if i < len(args):
        return args[i]
    return kwargs.get(name, default)


def _value(tr: _Translator, a: Any) -> Any:
    """An argument's Value (FX nodes) or the literal itself."""
    from torch.fx.node import Node

    return tr.env[a] if isinstance(a, Node) else a


def _tensor(tr: _Translator, a: Any) -> Tensor:
    """An argument as an IR tensor: a float32, float16 or bfloat16 run-time tensor, or such a
    constant as a weight of its dtype (DESIGN.md decision 17)."""
    from tensor_eqsat.torch.fx_import import Const, Ir, ir_dtype

    torch = _torch()
    v = _value(tr, a)
    if isinstance(v, Ir):
        if ir_dtype(v.dtype) is None:
            raise NotMapped(f"dtype {v.dtype}")
        return v.tensor
    if isinstance(v, Const) and isinstance(v.value, torch.Tensor) and ir_dtype(v.value.dtype) is not None:
        return tr.weight(v.value)
    raise NotMapped("not a float32, float16 or bfloat16 tensor")


def _const(tr: _Translator, a: Any) -> Any:
    """A constant floating tensor argument's value (a frozen parameter, say)."""
    from tensor_eqsat.torch.fx_import import Const, ir_dtype

    torch = _torch()
    v = _value(tr, a)
    if isinstance(v, Const) and isinstance(v.value, torch.Tensor) and ir_dtype(v.value.dtype) is not None:
        return v.value
    raise NotMapped("not a constant float32, float16 or bfloat16 tensor")


def _literal(tr: _Translator, a: Any) -> Any:
    from tensor_eqsat.torch.fx_import import Const

    v = _value(tr, a)
    if isinstance(v, Const):
        return v.value
    from torch.fx.node import Node

    if isinstance(a, Node):
        raise NotMapped("a run-time value where a constant is needed")
    return a


def _is_tensor_arg(tr: _Translator, a: Any) -> bool:
    from tensor_eqsat.torch.fx_import import Const, Ir

    v = _value(tr, a)
    return isinstance(v, Ir) or (isinstance(v, Const) and isinstance(v.value, _torch().Tensor))


def _number(tr: _Translator, a: Any) -> float:
    v = _literal(tr, a)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise NotMapped("not a finite number")
    return float(v)


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    t = tuple(int(x) for x in v)
    if len(t) == 1:
        return (t[0], t[0])
    if len(t) != 2:
        raise NotMapped("not a 2-D window")
    return (t[0], t[1])


def _ir(value: Tensor) -> Value:
    from tensor_eqsat.torch.fx_import import Ir

    return Ir(value, getattr(_torch(), value.dtype))


def _window_padding(x: Tensor, kernel: tuple[int, int], stride: tuple[int, int], padding: Any) -> str:
    """The IR padding ("valid" or "same") that pads exactly as PyTorch's ``padding`` does."""
    if padding == "valid":
        return "valid"
    if padding == "same":
        if stride != (1, 1):
            raise NotMapped("padding='same' with a stride")
        return "same"
    ph, pw = _pair(padding)
    if (ph, pw) == (0, 0):
        return "valid"
    h, w = x.shape[2], x.shape[3]
    if same_padding(h, kernel[0], stride[0]) == (ph, ph) and same_padding(w, kernel[1], stride[1]) == (
        pw,
        pw,
    ):
        return "same"
    raise NotMapped(f"padding {padding} is not SAME or VALID for this size")


def _pad_op(tr: _Translator, x: Tensor, pad: tuple[int, int], fill: str) -> Tensor:
    """``x`` (NCHW) padded by ``pad`` rows and columns on both sides with ``fill``."""
    ph, pw = pad
    return tr.graph.add("pad", [x], pads=(0, 0, ph, pw, 0, 0, ph, pw), fill=fill)[0]


def _padded(
    tr: _Translator, x: Tensor, kernel: tuple[int, int], stride: tuple[int, int], padding: Any, fill: str
) -> tuple[Tensor, str]:
    """The window op's input and IR padding: SAME or VALID where PyTorch pads that way, else an
    explicit ``pad`` (``fill``: zeros for a conv, -inf for a max pool) and VALID, which is exact."""
    try:
        return x, _window_padding(x, kernel, stride, padding)
    except NotMapped:
        if isinstance(padding, str) or len(x.shape) != 4:
            raise
    return _pad_op(tr, x, _pair(padding), fill), "valid"


# -- soundness ---------------------------------------------------------------------------------
def _rng_calls() -> set[Any]:
    torch = _torch()
    F = torch.nn.functional
    names = ("rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
             "bernoulli", "multinomial", "normal", "poisson", "rrelu")  # fmt: skip
    out = {getattr(torch, n) for n in names if hasattr(torch, n)}
    out |= {F.rrelu, F.gumbel_softmax, F.alpha_dropout, F.feature_alpha_dropout}
    return out


_RNG_METHODS = {"bernoulli", "bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_",
                "cauchy_", "log_normal_"}  # fmt: skip


def _dropouts() -> dict[Any, int]:
    """Dropout calls -> the position of their ``training`` argument."""
    torch = _torch()
    F = torch.nn.functional
    return {F.dropout: 2, F.dropout1d: 2, F.dropout2d: 2, F.dropout3d: 2, torch.dropout: 2}


def check_sound(node: Any, tr: _Translator) -> None:
    """Raise Unsupported for a node the backend must not optimize around."""
    from tensor_eqsat.torch.fx_import import Unsupported, op_name

    torch = _torch()
    F = torch.nn.functional
    args, kwargs = node.args, node.kwargs
    if node.op == "call_method" and node.target in _RNG_METHODS:
        raise Unsupported(f"random op {node.target} at {node.name}")
    if node.op != "call_function":
        return
    target = node.target
    if target in _dropouts():
        p = _arg(args, kwargs, 1, "p", 0.5)
        training = _arg(args, kwargs, 2, "training" if target is not torch.dropout else "train", True)
        if training and p:
            raise Unsupported(f"training mode: dropout is active at {node.name}")
        return
    if target in _rng_calls():
        raise Unsupported(f"random op {op_name(node)} at {node.name}")
    if target in (F.batch_norm, torch.batch_norm) and _arg(args, kwargs, 5, "training", False):
        raise Unsupported(f"training mode: batch norm uses batch statistics at {node.name}")
    if target is operator.setitem and args and tr.storage_of(args[0]) is None:
        raise Unsupported(f"in-place assignment into a tensor at {node.name}")


_INPLACE_OPERATORS = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
    operator.imatmul: operator.matmul,
}


def _inplace_position(target: Any) -> int | None:
    """The positional index of an ``inplace`` argument of a functional call, if it has one."""
    F = _torch().nn.functional
    table = {F.relu: 1, F.relu6: 1, F.elu: 2, F.selu: 1, F.celu: 2, F.leaky_relu: 2, F.hardtanh: 3,
             F.threshold: 3, F.silu: 1, F.hardswish: 1, F.hardsigmoid: 1, F.mish: 1, F.dropout: 3,
             F.dropout1d: 3, F.dropout2d: 3, F.dropout3d: 3}  # fmt: skip
    return table.get(target)


def mutation(node: Any) -> tuple[Any, Any] | None:
    """(the argument an in-place call updates, its out-of-place call) for an in-place call, None
    for any other node. The out-of-place call is a ``torch.Tensor`` method name, a function, or
    None where there is none (``operator.setitem``, ``foo_`` without ``foo``); for a call with an
    ``inplace`` argument it is the call itself (:func:`functional_form` sets the flag)."""
    torch = _torch()
    args, kwargs = node.args, node.kwargs
    if not args:
        return None
    if node.op == "call_method" and node.target.endswith("_") and not node.target.startswith("_"):
        functional = node.target[:-1]
        return args[0], functional if hasattr(torch.Tensor, functional) else None
    if node.op != "call_function":
        return None
    if node.target is operator.setitem:
        return args[0], None
    if node.target in _INPLACE_OPERATORS:
        from tensor_eqsat.torch.fx_import import _example

        if isinstance(_example(args[0]), torch.Tensor):
            return args[0], _INPLACE_OPERATORS[node.target]
        return None
    pos = _inplace_position(node.target)
    if kwargs.get("inplace") is True or (pos is not None and len(args) > pos and args[pos] is True):
        return args[0], node.target
    name = getattr(node.target, "__name__", "")
    module = getattr(node.target, "__module__", "")
    if name.endswith("_") and not name.startswith("_") and module in ("torch", "torch._C._VariableFunctions"):
        return args[0], getattr(torch, name[:-1], None)
    return None


def functional_form(node: Any, tr: _Translator) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
    """The node's arguments as an out-of-place call, and the FX node it updates in place (None
    for an out-of-place op). The node's ``target`` is rewritten to the out-of-place call.

    The update may be of a fresh intermediate, or of a tensor computed here from constants (T5's
    ``relative_buckets += ...``: folded out of place). An update of an input, parameter or buffer
    is an effect (:meth:`~tensor_eqsat.torch.fx_import._Translator.effect`), never taken here.
    Raises Unsupported when the update has no out-of-place form, updates a frozen tensor, or
    could be seen through another name for the same memory (a view, or the in-place call's own
    result) that is read after it.
    """
    from torch.fx.node import Node

    from tensor_eqsat.torch.fx_import import Const, Unsupported

    args, kwargs = tuple(node.args), dict(node.kwargs)
    found = mutation(node)
    if found is None:
        return args, kwargs, None
    mutated, functional = found
    if not isinstance(mutated, Node):
        raise Unsupported(f"in-place op at {node.name} updates a non-tensor")
    if functional is None:
        raise Unsupported(f"in-place op {op_name_of(node)} at {node.name} has no out-of-place form")
    value = tr.env[mutated]
    if mutated.op == "placeholder" or (isinstance(value, Const) and value.source is not None):
        raise Unsupported(
            f"in-place op at {node.name} updates an input, parameter or buffer ({mutated.name})"
        )
    alias = tr.alias_read_after(mutated, node)
    if alias is not None:
        raise Unsupported(
            f"in-place op at {node.name} updates a tensor that is a view or is viewed "
            f"({mutated.name}; {alias} shares its memory and is read after the update)"
        )
    if functional is node.target:  # the ``inplace`` flag
        pos = _inplace_position(node.target)
        if kwargs.get("inplace") is True:
            kwargs["inplace"] = False
        elif pos is not None:
            args = (*args[:pos], False, *args[pos + 1 :])
    else:
        tr.retarget[node.name] = functional
    return args, kwargs, mutated


def op_name_of(node: Any) -> str:
    """The call's own name (``add_``, ``setitem``) for messages."""
    if node.op == "call_method":
        return str(node.target)
    return str(getattr(node.target, "__name__", node.target))


def foldable(node: Any) -> bool:
    """Whether a node reading only constants may be computed once now (deterministic, no effect)."""
    if node.op == "call_module":
        return False
    target = node.target
    if node.op == "call_method":
        return target not in _RNG_METHODS
    name = getattr(target, "__name__", "")
    return target not in _rng_calls() and not name.startswith("_set_grad") and "assert" not in name


# -- translation -------------------------------------------------------------------------------
def translate(node: Any, args: Sequence[Any], kwargs: dict[str, Any], tr: _Translator) -> Value | None:
    """The node's value as IR ops; NotMapped when it is not exactly one."""
    if node.op == "call_function":
        key: Any = tr.retarget.get(node.name, node.target)
    elif node.op == "call_method":
        key = f"method:{tr.retarget.get(node.name, node.target)}"
    else:
        raise NotMapped(f"{node.op} is kept as it is")
    try:
        fn = table().get(key)
    except TypeError:  # an unhashable target
        fn = None
    if fn is None:
        raise NotMapped("no translation")
    return fn(tr, node, args, kwargs)


def _build_table() -> None:
    torch = _torch()
    F = torch.nn.functional
    g = lambda tr: tr.graph  # noqa: E731

    @_register(F.linear, torch._C._nn.linear)
    def _linear(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        w = _const(tr, _arg(args, kw, 1, "weight"))
        if w.dim() != 2 or len(x.shape) < 2:
            raise NotMapped("linear on a vector")
        y = g(tr).matmul(x, tr.weight(w, "T", lambda t: t.t()))
        b = _arg(args, kw, 2, "bias")
        if b is not None:
            y = g(tr).ewadd(y, _tensor(tr, b))
        return _ir(y)

    @_register(torch.conv2d, F.conv2d)
    def _conv2d(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        w = _const(tr, _arg(args, kw, 1, "weight"))
        stride = _pair(_literal(tr, _arg(args, kw, 3, "stride", 1)))
        dilation = _pair(_literal(tr, _arg(args, kw, 5, "dilation", 1)))
        groups = int(_literal(tr, _arg(args, kw, 6, "groups", 1)))
        if dilation != (1, 1) or len(x.shape) != 4 or w.dim() != 4 or x.shape[1] != groups * w.shape[1]:
            raise NotMapped("dilated, or not a 4-D grouped conv the IR infers")
        x, padding = _padded(
            tr, x, (w.shape[2], w.shape[3]), stride, _literal(tr, _arg(args, kw, 4, "padding", 0)), "zero"
        )
        y = g(tr).conv2d(x, tr.weight(w), stride=stride, padding=padding)
        b = _arg(args, kw, 2, "bias")
        if b is not None:
            bias = _const(tr, b)
            y = g(tr).ewadd(y, tr.weight(bias, "C11", lambda t: t.reshape(-1, 1, 1)))
        return _ir(y)

    @_register(operator.matmul, torch.matmul, torch.bmm, torch.mm, "method:matmul", "method:bmm", "method:mm")
    def _matmul(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        a, b = _tensor(tr, args[0]), _tensor(tr, _arg(args, kw, 1, "other", kw.get("mat2")))
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise NotMapped("matmul with a vector")
        return _ir(g(tr).matmul(a, b))

    @_register(torch.addmm, "method:addmm")
    def _addmm(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1:
            raise NotMapped("scaled addmm")
        bias, m1, m2 = (_tensor(tr, a) for a in args[:3])
        return _ir(g(tr).ewadd(g(tr).matmul(m1, m2), bias))

    @_register(operator.add, torch.add, "method:add")
    def _add(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        a, b = args[0], _arg(args, kw, 1, "other")
        if kw.get("alpha", 1) != 1:
            raise NotMapped("scaled add")
        ta, tb = _is_tensor_arg(tr, a), _is_tensor_arg(tr, b)
        if ta and tb:
            return _ir(g(tr).ewadd(_tensor(tr, a), _tensor(tr, b)))
        # A Python number: PyTorch adds it in the tensor's dtype, as the IR adds a weight of it.
        if ta:
            x = _tensor(tr, a)
            return _ir(g(tr).ewadd(x, tr.scalar_weight(_number(tr, b), x.dtype)))
        x = _tensor(tr, b)
        return _ir(g(tr).ewadd(x, tr.scalar_weight(_number(tr, a), x.dtype)))

    @_register(operator.sub, torch.sub, "method:sub")
    def _sub(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        a, b = args[0], _arg(args, kw, 1, "other")
        if kw.get("alpha", 1) != 1:
            raise NotMapped("scaled sub")
        ta, tb = _is_tensor_arg(tr, a), _is_tensor_arg(tr, b)
        # a - b is a + (-1)·b exactly in IEEE arithmetic (negation is exact).
        if ta and tb:
            return _ir(g(tr).ewadd(_tensor(tr, a), g(tr).smul(_tensor(tr, b), -1.0)))
        if ta:
            x = _tensor(tr, a)
            return _ir(g(tr).ewadd(x, tr.scalar_weight(-_number(tr, b), x.dtype)))
        x = _tensor(tr, b)
        return _ir(g(tr).ewadd(g(tr).smul(x, -1.0), tr.scalar_weight(_number(tr, a), x.dtype)))

    @_register(operator.mul, torch.mul, "method:mul")
    def _mul(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        a, b = args[0], _arg(args, kw, 1, "other")
        ta, tb = _is_tensor_arg(tr, a), _is_tensor_arg(tr, b)
        if ta and tb:
            return _ir(g(tr).ewmul(_tensor(tr, a), _tensor(tr, b)))
        if ta:
            return _ir(g(tr).smul(_tensor(tr, a), _number(tr, b)))
        return _ir(g(tr).smul(_tensor(tr, b), _number(tr, a)))

    @_register(operator.truediv, torch.div, "method:div")
    def _div(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        other = _arg(args, kw, 1, "other")
        if kw.get("rounding_mode") is not None or _is_tensor_arg(tr, other):
            raise NotMapped("division by a tensor, or rounded")
        divisor = _number(tr, other)
        if divisor == 0:
            raise NotMapped("division by zero")
        return _ir(g(tr).sdiv(_tensor(tr, args[0]), divisor))

    @_register(operator.neg, torch.neg, "method:neg")
    def _neg(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        return _ir(g(tr).smul(_tensor(tr, args[0]), -1.0))

    def _unary(name: str) -> Translator:
        def run(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
            return _ir(getattr(g(tr), name)(_tensor(tr, args[0])))

        return run

    for name in ("relu", "tanh", "sigmoid"):
        keys = [getattr(torch, name), f"method:{name}", getattr(F, name, None)]
        _register(*keys)(_unary(name))

    @_register(F.gelu)
    def _gelu(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        approx = _literal(tr, _arg(args, kw, 1, "approximate", "none"))
        if approx not in ("none", "tanh"):
            raise NotMapped(f"gelu approximate={approx!r}")
        return _ir(g(tr).gelu(_tensor(tr, args[0]), approximate=approx))

    @_register(torch.softmax, F.softmax, "method:softmax")
    def _softmax(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        dim = _literal(tr, _arg(args, kw, 1, "dim"))
        dtype = kw.get("dtype", args[3] if F.softmax is node.target and len(args) > 3 else None)
        if dim is None or dtype is not None:
            raise NotMapped("softmax without a dim, or with a dtype")
        return _ir(g(tr).softmax(_tensor(tr, args[0]), axis=int(dim)))

    @_register(F.layer_norm, torch.layer_norm)
    def _layer_norm(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        shape = tuple(_literal(tr, _arg(args, kw, 1, "normalized_shape")))
        w, b = _arg(args, kw, 2, "weight"), _arg(args, kw, 3, "bias")
        eps = _number(tr, _arg(args, kw, 4, "eps", 1e-5))
        ones = torch.ones(shape)
        scale = tr.weight(_const(tr, w)) if w is not None else tr.weight(ones, "ones")
        bias = tr.weight(_const(tr, b)) if b is not None else tr.weight(torch.zeros(shape), "zeros")
        return _ir(g(tr).layernorm(x, scale, bias, axis=len(x.shape) - len(shape), eps=eps))

    @_register(F.batch_norm, torch.batch_norm)
    def _batch_norm(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        mean, var = (
            _const(tr, _arg(args, kw, 1, "running_mean")),
            _const(tr, _arg(args, kw, 2, "running_var")),
        )
        w, b = _arg(args, kw, 3, "weight"), _arg(args, kw, 4, "bias")
        eps = _number(tr, _arg(args, kw, 7, "eps", 1e-5))
        c = mean.shape
        scale = tr.weight(_const(tr, w)) if w is not None else tr.weight(torch.ones(c), "ones")
        bias = tr.weight(_const(tr, b)) if b is not None else tr.weight(torch.zeros(c), "zeros")
        return _ir(g(tr).batchnorm(x, scale, bias, tr.weight(mean), tr.weight(var), eps=eps))

    @_register(F.max_pool2d, torch.max_pool2d, getattr(F, "_max_pool2d", None))
    def _max_pool(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        kernel = _pair(_literal(tr, _arg(args, kw, 1, "kernel_size")))
        stride_v = _literal(tr, _arg(args, kw, 2, "stride", None))
        stride = kernel if stride_v is None or stride_v == [] or stride_v == () else _pair(stride_v)
        dilation = _pair(_literal(tr, _arg(args, kw, 4, "dilation", 1)))
        if dilation != (1, 1) or _literal(tr, _arg(args, kw, 5, "ceil_mode", False)) or len(x.shape) != 4:
            raise NotMapped("dilated or ceil-mode pooling")
        if _literal(tr, _arg(args, kw, 6, "return_indices", False)):
            raise NotMapped("pooling with indices")
        x, padding = _padded(tr, x, kernel, stride, _literal(tr, _arg(args, kw, 3, "padding", 0)), "neg_inf")
        return _ir(g(tr).poolmax(x, kernel, stride=stride, padding=padding))

    @_register(F.avg_pool2d, torch._C._nn.avg_pool2d)
    def _avg_pool(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        kernel = _pair(_literal(tr, _arg(args, kw, 1, "kernel_size")))
        stride_v = _literal(tr, _arg(args, kw, 2, "stride", None))
        stride = kernel if stride_v is None or stride_v == [] or stride_v == () else _pair(stride_v)
        pad = _pair(_literal(tr, _arg(args, kw, 3, "padding", 0)))
        if _literal(tr, _arg(args, kw, 6, "divisor_override")):
            raise NotMapped("divisor-override pooling")
        if _literal(tr, _arg(args, kw, 4, "ceil_mode", False)):
            # One window clipped to the whole unpadded input (EfficientNet's final pool, a
            # kernel wider than the map): its divisor is H * W, the spatial mean.
            if pad != (0, 0) or len(x.shape) != 4 or x.shape[2] > kernel[0] or x.shape[3] > kernel[1]:
                raise NotMapped("ceil-mode pooling")
            return _ir(g(tr).add("mean", [x], axes=(2, 3), keepdims=True)[0])
        if len(x.shape) != 4:
            raise NotMapped("not NCHW")
        if pad != (0, 0) and _literal(tr, _arg(args, kw, 5, "count_include_pad", True)):
            # Counting the padding is averaging the zero-padded input without padding.
            x = _pad_op(tr, x, pad, "zero")
            pad = (0, 0)
        padding = _window_padding(x, kernel, stride, pad)
        return _ir(g(tr).poolavg(x, kernel, stride=stride, padding=padding))

    @_register(F.adaptive_avg_pool2d, torch._C._nn.adaptive_avg_pool2d)
    def _adaptive_avg(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        out = _literal(tr, _arg(args, kw, 1, "output_size"))
        oh, ow = _pair(out)
        if len(x.shape) != 4 or x.shape[2] % oh or x.shape[3] % ow:
            raise NotMapped("adaptive pooling with uneven windows")
        kernel = (x.shape[2] // oh, x.shape[3] // ow)
        return _ir(g(tr).poolavg(x, kernel, stride=kernel, padding="valid"))

    @_register(torch.cat, torch.concat, getattr(torch, "concatenate", None))
    def _cat(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        xs = [_tensor(tr, a) for a in _arg(args, kw, 0, "tensors")]
        dim = int(_literal(tr, _arg(args, kw, 1, "dim", 0)))
        if len(xs) < 2:
            raise NotMapped("concat of one tensor")
        return _ir(g(tr).concat(xs, axis=dim))

    @_register(torch.split, "method:split", torch.chunk, "method:chunk", torch.tensor_split)
    def _split(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from tensor_eqsat.torch.fx_import import Seq, _example

        x = _tensor(tr, args[0])
        dim = int(_literal(tr, _arg(args, kw, 2, "dim", 0)))
        ev = _example(node)
        if not isinstance(ev, tuple | list) or not ev:
            raise NotMapped("unknown split outputs")
        dim = dim + len(x.shape) if dim < 0 else dim
        sizes = [tr.symtab.dim(e.shape[dim]) for e in ev]
        return Seq(tuple(_ir(t) for t in g(tr).split(x, dim, sizes)))  # type: ignore[misc]

    @_register(operator.getitem)
    def _getitem(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from tensor_eqsat.torch.fx_import import Seq

        seq, index = _value(tr, args[0]), args[1]
        if not isinstance(seq, Seq) or not isinstance(index, int):
            raise NotMapped("indexing a tensor")
        return seq.items[index]

    def _reshape_to_recorded(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        from tensor_eqsat.torch.fx_import import _example

        ev = _example(node)
        x = _tensor(tr, args[0])
        if not isinstance(ev, torch.Tensor):
            raise NotMapped("unknown result shape")
        return _ir(g(tr).reshape(x, tr.symtab.shape(ev.shape)))

    _register(
        "method:view", "method:reshape", torch.reshape, "method:flatten", torch.flatten, "method:unsqueeze",
        torch.unsqueeze, "method:squeeze", torch.squeeze, "method:unflatten", torch.unflatten,
    )(_reshape_to_recorded)  # fmt: skip

    @_register("method:permute", torch.permute)
    def _permute(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        dims = args[1:] if len(args) > 2 or (len(args) == 2 and isinstance(args[1], int)) else args[1]
        if not dims:
            dims = kw.get("dims", ())
        rank = len(x.shape)
        perm = [int(d) % rank for d in _literal(tr, tuple(dims))]
        return _ir(g(tr).transpose(x, perm))

    @_register("method:transpose", torch.transpose, "method:t", torch.t)
    def _transpose(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        x = _tensor(tr, args[0])
        rank = len(x.shape)
        if len(args) >= 3:
            d0, d1 = int(_literal(tr, args[1])) % rank, int(_literal(tr, args[2])) % rank
        elif rank == 2:
            d0, d1 = 0, 1
        else:
            raise NotMapped("t() of a non-matrix")
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return _ir(g(tr).transpose(x, perm))

    @_register(
        "method:contiguous", "method:clone", torch.clone, "method:detach", torch.detach, "method:float"
    )
    def _identity(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        if node.target in ("contiguous", "clone") and kw.get("memory_format") not in (
            None,
            torch.contiguous_format,
        ):
            raise NotMapped("a memory format")
        return _ir(_tensor(tr, args[0]))

    @_register(*_dropouts())
    def _dropout(tr: _Translator, node: Any, args: Sequence[Any], kw: dict[str, Any]) -> Value:
        return _ir(_tensor(tr, args[0]))  # check_sound refused an active dropout


def table() -> dict[Any, Translator]:
    """The translation table (built on first use: it needs torch)."""
    if not TRANSLATORS:
        from tensor_eqsat.torch import fx_ops_inference

        _build_table()
        fx_ops_inference.build()
    return TRANSLATORS


__all__ = ["TRANSLATORS", "NotMapped", "check_sound", "foldable", "functional_form", "table", "translate"]
