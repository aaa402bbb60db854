"""Reusing the previous planning tree: what MCTS already computed from the state it moved to.

Each real step plans with a fresh tree (the paper's runs keep no subtree), yet the real step
reaches exactly the state of the chosen root child, whose subtree holds expansions already
computed from that state. When the environment confirms the two states are the same with the same
ids (``same_state``; a step time limit cutting one application short is the only way they
differ), that child becomes the new root's *twin*: the root takes its pruned actions, and each
expansion of an action the twin already expanded takes the outcome from it (child state, cost,
pruned actions; terminal or unchanged) instead of applying the rule and pricing the state again.
The new child's twin is the old one, so reuse goes down the tree. Random draws are the same, so
the search is too. The links into the old tree are dropped after planning, so only one earlier
tree is ever kept alive.

Rejected: keeping the subtree's statistics (``MctsConfig.subtree_reuse``) changes the search;
caching states by content hash would reuse across branches but costs a hash per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensor_eqsat.search.mcts import Environment, Mcts, _Node


def twin_of(root: _Node, action: int, env: Environment) -> _Node | None:
    """The planning tree's child for the applied ``action`` if it holds ``env``'s state with the
    same ids; None if the environment cannot tell (no ``same_state``) or it does not."""
    child = root.children[action]
    same: Any = getattr(env, "same_state", None)
    if child is None or child.env is None or same is None or not same(child.env):
        return None
    return child


def expand_known(mcts: Mcts, node: _Node, action: int, path: list[tuple[_Node, int]], known: _Node) -> None:
    """``Mcts._expand`` of ``action`` at ``node`` with the step's outcome ``known`` from the twin.

    How ``_expand`` made ``known`` tells the outcome: no state and no pruned action for a
    terminal step, no state and every action pruned for a step that changed nothing."""
    assert node.env is not None
    node_type = type(node)
    n = len(node.children)
    path.append((node, action))
    node.reward[action] = mcts._reward(node.cost, known.cost)
    done = known.env is None and not known.pruned
    node.done[action] = done
    if done:
        node.children[action] = node_type(None, known.cost, n, frozenset())
        mcts._backpropagate(path, 0.0)
        return
    if known.env is None:  # the step changed nothing: roll out from the node's own state
        child = node_type(None, known.cost, n, frozenset(range(n)))
        node.mark_saturated(action)
        start = node.env.copy()
    else:
        child = node_type(known.env, known.cost, n, known.pruned)
        child.twin = known
        start = known.env.copy()
    node.children[action] = child
    mcts._backpropagate(path, *mcts._rollout(start, known.cost, child.pruned))


def forget(root: _Node) -> None:
    """Drop every link into the previous tree (after planning)."""
    stack = [root]
    while stack:
        node = stack.pop()
        node.twin = None
        stack.extend(c for c in node.children if c is not None)
