"""Parallel planning for :class:`~tensor_eqsat.search.mcts.Mcts` (``MctsConfig.workers`` > 1).

Two published schemes, chosen by ``MctsConfig.parallel``:

* **Root parallelism** (the default; Cazenave & Jouandeau 2007, "On the parallelization of
  UCT"; Chaslot, Winands & van den Herik 2008, "Parallel Monte-Carlo tree search"):
  :func:`plan_root` sends the step's state to each of W workers once, each grows its own tree
  with its share of the budget (:func:`_plan_tree`, the sequential planner) from a seed drawn
  here, and returns only its root's statistics; visits and value sums are added per action, the
  lowest cost reached is the minimum over the trees, and the action is chosen from these as the
  sequential search chooses it. One task per worker
  and step: a SqueezeNet simulation is 8-9 ms of work, and a task per simulation adds about
  2 ms of pickling (the state out, the child back), the pool's round trip and a wait for each
  batch's slowest simulation, so it cannot pay; a whole tree per task costs one state transfer
  per worker and step. Chaslot et al. found root parallelism the
  strongest of the three schemes for Go; its price is that the trees share no statistics (each
  is shallower than one tree of the whole budget).
* **Tree parallelism with WU-UCT's unobserved visits** (Liu et al., ICLR 2020, the scheme the
  paper's artifact was built on): :func:`simulate_batch` selects up to W leaves of one tree in a
  row in this process, each in-flight simulation counting as a visit in the exploration term of
  every edge on its path (``_Node.pending``) so the leaves differ; each expansion step and its
  rollout run as a task (:func:`_expand_and_rollout`); results are backed up in selection order.
  It keeps the sequential search's statistics and allows subtree reuse, but ships two states per
  simulation, so it pays only when a simulation is long (an ILP reward).

Leaf parallelism (W rollouts of one leaf) was rejected: the expansion step stays serial. Every
random choice is drawn in this process, tasks get seeds, and results are combined in a fixed
order, so a run depends on the seed and W only, not on timing or on where the tasks run
(:func:`worker_pool`: a process pool, or Ray tasks on a local instance or a cluster).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, replace

from tensor_eqsat.search.mcts import (
    Backend,
    Environment,
    Mcts,
    MctsConfig,
    StepPlan,
    StepResult,
    _Node,
)
from tensor_eqsat.workers import kill_workers, kill_workers_on_sigterm, process_pool

log = logging.getLogger(__name__)


@contextmanager
def worker_pool(config: MctsConfig, env: Environment) -> Iterator[Executor]:
    """The executor ``config.backend`` names, with ``config.pool_workers`` workers (``workers``,
    at most the budget; a warning is logged when that is fewer), each set up with
    ``env.worker_initializer()`` (if the environment has one) to receive ``env``'s states; shut
    down (a Ray instance started here too) on exit. ConfigError if the Ray extra is missing.

    A process pool's workers exit with this process, even when it is killed (SIGKILL or an
    unhandled SIGTERM), and SIGTERM kills them first (see :mod:`tensor_eqsat.workers`); they
    ignore Ctrl-C, which reaches a terminal's whole process group: a KeyboardInterrupt (or an
    error) in the block kills them instead of waiting for their tasks."""
    init = getattr(env, "worker_initializer", None)
    fn, args = init() if init is not None else (None, ())
    n = config.pool_workers
    if n < config.workers:
        log.warning(
            "MctsConfig.workers %d is more than the budget of %d simulations per step: starting %d "
            "worker processes (the others would have nothing to do; the run is unchanged)",
            config.workers,
            config.budget,
            n,
        )
    if config.backend is Backend.RAY:
        from tensor_eqsat.search.ray_executor import RayExecutor

        with RayExecutor(n, address=config.address, initializer=fn, initargs=args) as ray:
            yield ray
    else:
        pool = process_pool(n, fn, args, ignore_sigint=True)
        try:
            with kill_workers_on_sigterm(pool):
                yield pool
        except BaseException:
            # Ctrl-C (or an error): the workers are killed, not joined. Joining them waits for
            # their tasks, and a second Ctrl-C during that join left the pool's threads
            # half shut down, which the interpreter then waited for forever at exit.
            kill_workers(pool)
            raise
        try:
            pool.shutdown(wait=True)
        except BaseException:
            kill_workers(pool)
            raise


# ---------------------------------------------------------------------------- root parallelism


@dataclass(frozen=True)
class _RootStats:
    """What a worker's tree reports: its root's per-action statistics and the plan's counters."""

    visits: list[int]
    value: list[float]
    best: list[float]
    reward: list[float]
    saturated: list[bool]
    done: list[bool]
    expanded: list[bool]
    simulations: int
    tree_nodes: int
    max_depth: int
    pruned_root: int
    aborted: bool
    cpu_seconds: float


def shares(budget: int, workers: int) -> list[int]:
    """Each worker's simulations when root parallelism splits ``budget`` (the first ones get
    the remainder).

    >>> shares(128, 3)
    [43, 43, 42]
    """
    return [budget // workers + (i < budget % workers) for i in range(workers)]


def plan_root(
    search: Mcts,
    env: Environment,
    deadline: float | None,
    progress: Callable[[int, int], None] | None,
) -> tuple[StepPlan, _Node]:
    """One planning step by root parallelism (see the module docstring): W trees in the
    workers, their root statistics summed in worker order, the action chosen from the sums."""
    assert search._pool is not None
    cfg = search.config
    t0 = time.perf_counter()
    w = cfg.workers
    # W seeds every step, whatever the shares, so the draws depend on the seed and W only.
    seeds = [int(s) for s in search.rng.integers(2**63, size=w)]
    limit = cfg.plan_time_limit
    if deadline is not None:
        left = max(deadline - t0, 1e-6)
        limit = left if limit is None else min(limit, left)
    futures = []
    for share, seed in zip(shares(cfg.budget, w), seeds, strict=True):
        if share == 0:
            continue
        tree = replace(cfg, budget=share, workers=1, backend=Backend.PROCESS, address=None, time_limit=None)
        futures.append(search._pool.submit(_plan_tree, env, tree, seed, limit))
    if progress is not None:
        done = 0
        for future in as_completed(futures):
            done += future.result().simulations
            progress(min(done, cfg.budget), cfg.budget)
    stats = [f.result() for f in futures]
    n = env.num_actions
    root = _Node(None, env.cost(), n, frozenset())
    reward = [0.0] * n
    for s in stats:
        for a in range(n):
            if s.saturated[a]:
                root.mark_saturated(a)
            if s.visits[a]:
                if root.visits[a] == 0:
                    root.n_visited += 1
                    reward[a] = s.reward[a]
                root.visits[a] += s.visits[a]
                root.visits_total += s.visits[a]
                root.value[a] += s.value[a]
                root.best[a] = min(root.best[a], s.best[a])
            if s.expanded[a] and root.children[a] is None:
                root.children[a] = _Node(None, 0.0, 0, frozenset())
            root.done[a] = root.done[a] or s.done[a]
    root.reward = reward
    action = None if root.all_saturated() else search._final_action(root)
    children = root.child_stats()
    plan = StepPlan(
        action=action,
        simulations=sum(s.simulations for s in stats),
        inherited_visits=0,
        tree_nodes=sum(s.tree_nodes for s in stats),
        max_depth=max(s.max_depth for s in stats),
        pruned_root=stats[0].pruned_root,
        aborted=any(s.aborted for s in stats),
        seconds=time.perf_counter() - t0,
        children=children,
        worker_seconds=tuple(s.cpu_seconds for s in stats),
    )
    return plan, root


def _plan_tree(env: Environment, config: MctsConfig, seed: int, seconds: float | None) -> _RootStats:
    """A worker's tree: the sequential planner on ``env`` with ``config`` (its share of the
    budget), seeded by ``seed``, for at most ``seconds`` (a time, not a deadline: a remote
    machine's clock is not this one's)."""
    cpu = time.thread_time()
    search = Mcts(config, seed=seed)
    deadline = None if seconds is None else time.perf_counter() + seconds
    plan, root = search._plan(env, None, deadline, None)
    cpu = time.thread_time() - cpu
    return _RootStats(
        visits=list(root.visits),
        value=list(root.value),
        best=list(root.best),
        reward=list(root.reward),
        saturated=list(root.saturated),
        done=list(root.done),
        expanded=[c is not None for c in root.children],
        simulations=plan.simulations,
        tree_nodes=plan.tree_nodes,
        max_depth=plan.max_depth,
        pruned_root=plan.pruned_root,
        aborted=plan.aborted,
        cpu_seconds=cpu,
    )


# ---------------------------------------------------------------------------- tree parallelism


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
            search._backpropagate(path, *g)
        else:
            node.children[action] = _Node(env, result.cost, n_actions, pruned)
            search._backpropagate(path, *g)
        completed += 1
    return completed, depth, aborted


def _expand_and_rollout(
    env: Environment, action: int, seed: int, config: MctsConfig
) -> tuple[StepResult, Environment | None, frozenset[int], tuple[float, float]]:
    """A worker's half of a simulation from the leaf state ``env``: the expansion step, the new
    child's pruned actions, and a rollout from it with a generator seeded by ``seed``.

    Returns (step result, the child's state or None if the step was terminal or changed nothing,
    its pruned actions, the rollout's return and lowest cost)."""
    search = Mcts(config, seed=seed)
    env = env.copy()  # an executor that does not pickle (threads) must not touch the tree's state
    result = env.step(action)
    if result.done:
        return result, None, frozenset(), (0.0, math.inf)
    if not result.changed:
        return result, None, frozenset(), search._rollout(env, result.cost, frozenset(range(env.num_actions)))
    pruned = env.pruned_actions() if config.prune_actions else frozenset()
    child = env.copy()
    return result, child, pruned, search._rollout(env, result.cost, pruned)
