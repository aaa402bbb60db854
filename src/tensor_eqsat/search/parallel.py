"""Parallel simulations for :class:`~tensor_eqsat.search.mcts.Mcts` (``MctsConfig.workers`` > 1).

Tree parallelism with WU-UCT's unobserved visits (Liu et al., ICLR 2020), the scheme the
paper's artifact was built on: :func:`simulate_batch` selects up to W leaves in a row in this
process, each in-flight simulation counting as a visit in the exploration term of every edge on
its path (``_Node.pending``) so the leaves differ; the expansion steps and rollouts run in an
executor's workers (:func:`_expand_and_rollout`); results are backed up in selection order.
Every random choice is drawn here (a rollout gets a seed drawn at selection), so a run depends on
the seed and W only, not on timing. Root parallelism (independent trees, merged votes) shares no
statistics and copies every state W times; leaf parallelism (W rollouts of one leaf) leaves the
expansion step, the expensive part, serial.
"""

from __future__ import annotations

from tensor_eqsat.search.mcts import Environment, Mcts, MctsConfig, StepResult, _Node


def select(search: Mcts, root: _Node) -> tuple[str, list[tuple[_Node, int]], _Node | None, int]:
    """Selection for a batch: ``("expand", path, node, action)`` (the action reserved),
    ``("backup", ...)`` (a terminal edge, backed up already), ``("stall", ...)`` (every way
    down is in flight) or ``("abort", ...)`` (as :meth:`Mcts._simulate`)."""
    cfg = search.config
    path: list[tuple[_Node, int]] = []
    node = root
    while True:
        if node.expandable() and (
            node is root or node.no_child_available() or search.rng.random() < cfg.expand_probability
        ):
            untried = [
                a
                for a in range(len(node.children))
                if node.visits[a] == 0 and not node.saturated[a] and not node.pending[a]
            ]
            return "expand", path, node, untried[int(search.rng.integers(len(untried)))]
        if node.all_saturated():
            if cfg.terminal_saturated_nodes and path:
                parent, a = path[-1]
                parent.done[a] = True
                search._backpropagate(path, 0.0)
                return "backup", path, None, -1
            return "abort", path, None, -1
        if not any(c is not None and not node.saturated[a] for a, c in enumerate(node.children)):
            return "stall", path, None, -1
        a = search._uct_action(node)
        path.append((node, a))
        child = node.children[a]
        if node.done[a] or child is None:
            search._backpropagate(path, 0.0)
            return "backup", path, None, -1
        node = child


def simulate_batch(search: Mcts, root: _Node, k: int) -> tuple[int, int, bool]:
    """Up to ``k`` simulations at once; returns (completed, deepest path, aborted)."""
    assert search._pool is not None
    tasks: list[tuple[list[tuple[_Node, int]], _Node, int, int]] = []
    completed = 0
    depth = 0
    aborted = False
    while len(tasks) + completed < k and not root.all_saturated():
        kind, path, node, action = select(search, root)
        depth = max(depth, len(path) + (kind == "expand"))
        if kind == "expand":
            assert node is not None and node.env is not None, "expanding a terminal node"
            seed = int(search.rng.integers(2**63))
            node.n_reserved += 1
            for n, a in [*path, (node, action)]:
                n.pending[a] += 1
                n.pending_total += 1
            tasks.append((path, node, action, seed))
        elif kind == "backup":
            completed += 1
        elif kind == "stall":
            break
        else:
            aborted = True
            break
    futures = [
        search._pool.submit(_expand_and_rollout, node.env, action, seed, search.config)  # type: ignore[arg-type]
        for _, node, action, seed in tasks
    ]
    for (path, node, action, _), future in zip(tasks, futures, strict=True):
        result, env, pruned, g = future.result()
        node.n_reserved -= 1
        for n, a in [*path, (node, action)]:
            n.pending[a] -= 1
            n.pending_total -= 1
        path.append((node, action))
        node.reward[action] = search._reward(node.cost, result.cost)
        node.done[action] = result.done
        n_actions = len(node.children)
        if result.done:
            node.children[action] = _Node(None, result.cost, n_actions, frozenset())
            search._backpropagate(path, 0.0)
        elif env is None:
            node.children[action] = _Node(None, result.cost, n_actions, frozenset(range(n_actions)))
            node.mark_saturated(action)
            search._backpropagate(path, g)
        else:
            node.children[action] = _Node(env, result.cost, n_actions, pruned)
            search._backpropagate(path, g)
        completed += 1
    return completed, depth, aborted


def _expand_and_rollout(
    env: Environment, action: int, seed: int, config: MctsConfig
) -> tuple[StepResult, Environment | None, frozenset[int], float]:
    """A worker's half of a simulation from the leaf state ``env``: the expansion step, the new
    child's pruned actions, and a rollout from it with a generator seeded by ``seed``.

    Returns (step result, the child's state or None if the step was terminal or changed nothing,
    its pruned actions, the rollout's return)."""
    search = Mcts(config, seed=seed)
    env = env.copy()  # an executor that does not pickle (threads) must not touch the tree's state
    result = env.step(action)
    if result.done:
        return result, None, frozenset(), 0.0
    if not result.changed:
        return result, None, frozenset(), search._rollout(env, result.cost, frozenset(range(env.num_actions)))
    pruned = env.pruned_actions() if config.prune_actions else frozenset()
    child = env.copy()
    return result, child, pruned, search._rollout(env, result.cost, pruned)
