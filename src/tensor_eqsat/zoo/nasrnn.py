"""NASRNN as TENSAT builds it (``src/nasrnn.rs``): the cell Zoph & Le found, unrolled 5 steps.

Per step, with x the step's input and h the state: eight "combine" terms
``c_k = x·Wa_k + h·Wb_k`` (16 fresh [hidden, hidden] weights per step, no bias), then

    m0 = relu(c0) + sigmoid(c3)      m1 = sigmoid(c1) + tanh(c2)
    m2 = sigmoid(c4) ⊙ tanh(c5)      m3 = sigmoid(c6) ⊙ relu(c7)
    m4 = sigmoid(m1) + tanh(m2)      m5 = tanh(m0) ⊙ tanh(m3)
    m6 = tanh(m4) ⊙ tanh(m5)         h' = tanh(m6)

The initial state is a **weight** [1, hidden] (TENSAT's choice), the inputs are one [1, hidden]
tensor per step and the root is the final state. Each step's 8 matmuls share x and 8 share h,
which is what TENSAT's multi-pattern rule R4 batches.
"""

from __future__ import annotations

from tensor_eqsat.ir.graph import Graph, Tensor
from tensor_eqsat.zoo.params import positive


def _combine(g: Graph, x: Tensor, h: Tensor, hidden: int) -> Tensor:
    w1 = g.weight((hidden, hidden))
    w2 = g.weight((hidden, hidden))
    t1 = g.matmul(x, w1)
    t2 = g.matmul(h, w2)
    return g.ewadd(t1, t2)


def _cell(g: Graph, h: Tensor, x: Tensor, hidden: int) -> Tensor:
    c = [_combine(g, x, h, hidden) for _ in range(8)]
    m0 = g.ewadd(g.relu(c[0]), g.sigmoid(c[3]))
    m1 = g.ewadd(g.sigmoid(c[1]), g.tanh(c[2]))
    m2 = g.ewmul(g.sigmoid(c[4]), g.tanh(c[5]))
    m3 = g.ewmul(g.sigmoid(c[6]), g.relu(c[7]))
    m4 = g.ewadd(g.sigmoid(m1), g.tanh(m2))
    m5 = g.ewmul(g.tanh(m0), g.tanh(m3))
    m6 = g.ewmul(g.tanh(m4), g.tanh(m5))
    return g.tanh(m6)


def nasrnn(*, batch: int = 1, steps: int = 5, hidden: int = 512) -> Graph:
    """NASRNN unrolled over ``steps`` time steps (see the module docstring).

    batch: rows of every input and of the initial state. Default 1.
    steps: time steps. Default 5.
    hidden: state and input width. Default 512.

    Ops at the defaults: 80 matmul, 55 ewadd, 20 ewmul, 10 relu, 25 sigmoid, 40 tanh; 81 weights.

    >>> g = nasrnn(steps=1, hidden=4)
    >>> sum(g.op_counts().values()), len(g.weights()), g.shape_of(g.outputs[0])
    (46, 17, (1, 4))
    """
    positive("nasrnn", batch=batch, steps=steps, hidden=hidden)
    g = Graph()
    xs = [g.input((batch, hidden)) for _ in range(steps)]
    state = g.weight((batch, hidden))
    for x in xs:
        state = _cell(g, state, x, hidden)
    g.output(state)
    return g
