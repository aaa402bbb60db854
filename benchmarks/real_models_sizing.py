"""How long ``real_models.py --device cuda`` takes on one GPU, before it runs, and what to trim so it
fits a wall-clock limit (issue 33: the benchmark sized to run in <= 6 minutes on one H100).

The time model, per model and batch, in seconds (every constant below says where it comes from):

    model built and moved to the GPU         BUILD_S
    capture + h200 search + check            CAPTURE_S + time_budget + CHECK_S   (the h200 pricing)
    inductor                                 C                                   (Dynamo + Inductor)
    freezing                                 C_freezing                          (Inductor, freezing)
    tensor_eqsat                             C + time_budget + guard + CHECK_S   (search, guard, Inductor)
    inductor_again                           CACHE_HIT * C                       (served from the cache)
    timing                                   6 arms x (runs + warmup) x eager ms x batch

plus FIRST_COMPILE_S once per process (Inductor's start-up, paid by the first compile). ``C`` is
the warm Inductor compile of the model recorded on an NVIDIA H200 (PyTorch 2.11, 16 CPU cores;
``calibration/h200-2026-11b/torch_backend_hf.json`` and ``torch_backend.json``) where it was
recorded, else the recorded compile of the nearest recorded architecture scaled by the model's FX
calls (compile work grows with the graph; the FX calls are the h200 column of
docs/results-real.md). The compile time does not depend on the batch (the same graph, other
static shapes); the run time is bounded by batch x the recorded batch-1 eager time. Inductor's
compiles run on the host CPU, so an H100 machine of the same kind takes the same time; the GPU's
speed only enters through the timing, which is a small part.

Trimming (``trim``), in this order until the estimate fits, each step reported: (1) timed runs
per arm down to 10 (5 blocks); (2) the search budget down to 2 s; (3) batch sizes after the first,
the most expensive model's first; (4) the ``inductor_again`` arm (with Inductor's caches on, the
GPU default, it is served from the first compile's cache, so it adds little to the noise
estimate there); (5) the pricing pass for the recorded ``h200`` profile (on a GPU the backend arm
searches and measures for the local ``cuda`` target itself; the h200 column comes from the CPU's
``--no-time`` run, the same search on any machine); (6) the search budget down to 1 s. A model is
never dropped: if the plan does not fit after all of these, it says so and runs every model.

With the defaults (8 models, batch 1, search 3 s, 20 runs in 5 blocks) the estimate is about 7.6
minutes; trimmed for 6 minutes it is about 6 minutes (``--batch 1 8`` trims batch 8 away first).
Five of the eight compile times are derived, not recorded, and the cache-hit fraction is assumed:
the estimate is good to a minute or so, and a GPU run's JSON (``compile_s`` per arm, ``wall_s``
per model) is what to correct these constants with.

Alternatives rejected: measuring a first model and extrapolating (the compile time differs 2x
between architectures, and the first compile pays Inductor's start-up); cutting Inductor arms
(the comparison against Inductor with freezing is what the benchmark is for).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_COMPILE_S = 6.7
"""Inductor's start-up in a fresh process: HF ResNet-50's first compile took 18.0 s, its second
(with freezing, warm) 11.3 s (torch_backend_hf.json)."""
BUILD_S = 2.0
"""Building a model from its config with random weights and moving it to the GPU (not recorded
apart: the recorded run's 138 s less its recorded compiles leaves 25 s for four models' builds
and timings)."""
CAPTURE_S = 2.0
"""A Dynamo capture without a compile (the analysis pass). Not recorded apart; the recorded
backend-with-eager compiles (3.7-19 s) bound capture, translation and an 8 s search together."""
CHECK_S = 1.0
"""The backend's numeric check of a rewritten graph on the GPU (not recorded apart; a few forward
passes of milliseconds each)."""
GUARD_S_PER_RUN = 0.045
"""The backend's guard on the GPU per timed run (``guard_runs`` = the benchmark's runs): recorded
0.4-1.8 s for 40 runs (torch_backend*.json, ``seconds.guard``), the largest taken."""
CACHE_HIT = 0.25
"""Fraction of a compile that a second compile of the same FX graph costs with Inductor's caches
on (the GPU default): Dynamo's capture and the cache lookup remain. An assumption (not recorded):
the recorded backend arm that handed Inductor the original graph (HF ResNet-50, 3.8 s against
18.0 s) is consistent with it."""
ARMS_TIMED = 6
"""Arms of the timing: inductor twice, eager, freezing, tensor_eqsat, inductor_again."""
WARMUP = 5
"""Untimed runs per arm (``time_callables``' default)."""


@dataclass(frozen=True)
class ModelTime:
    """One model's recorded or derived H200 figures.

    compile_s: warm Inductor compile (s). freezing_s: with ``freezing=True`` (s). eager_ms: one
    batch-1 eager forward (ms). source: where the figures come from.
    """

    compile_s: float
    freezing_s: float
    eager_ms: float
    source: str


def _derived(base: str, base_s: float, base_calls: int, calls: int, eager_ms: float) -> ModelTime:
    """A model whose compile was not recorded: ``base``'s recorded compile scaled by FX calls."""
    c = round(base_s * calls / base_calls, 1)
    return ModelTime(c, c, eager_ms, f"{base}'s x {calls}/{base_calls} FX calls")


# Recorded (torch_backend_hf.json, torch_backend.json; H200, batch 1): ResNet-50 (HF) compile
# 18.0 s first / 11.3 s with freezing (warm), eager 3.79 ms, 173 FX calls; BERT-base 11.0 s,
# eager 5.29 ms, 356 FX calls; the Llama-style decoder 9.5 s / 9.6 s, eager 8.86 ms; GPT-2 eager
# 6.58 ms; EfficientNet-B0 eager 16.4 ms; ConvNeXt-T eager 2.65 ms; MobileNet-v3-Large (torchvision,
# the nearest to v2) eager 3.43 ms; ViT-B/16's eager time is BERT's scaled by FX calls.
H200: dict[str, ModelTime] = {
    "resnet50": ModelTime(11.3, 11.3, 3.79, "recorded (warm compile = the freezing compile)"),
    "convnext_t": _derived("ResNet-50", 11.3, 173, 180, 2.65),
    "mobilenet_v2": _derived("ResNet-50", 11.3, 173, 203, 3.43),
    "efficientnet_b0": _derived("ResNet-50", 11.3, 173, 252, 16.4),
    "bert": ModelTime(11.0, 11.0, 5.29, "recorded (freezing as default)"),
    "vit": _derived("BERT", 11.0, 356, 367, 5.45),
    "gpt2": _derived("BERT", 11.0, 356, 570, 6.58),
    "llama": ModelTime(9.5, 9.6, 8.86, "recorded"),
}

MIN_RUNS = 10
"""Trimming never takes the timed runs per arm below this."""
MIN_BLOCKS = 5
BUDGET_STEPS_S = (2.0, 1.0)
"""The search budgets trimming goes down to: the first early, the last after everything else
(searches that converge stop before their budget; the estimate counts the whole budget)."""


def run_seconds(
    model: str, batch: int, *, time_budget: float, runs: int, h200_pass: bool = True, again_arm: bool = True
) -> dict[str, float]:
    """The estimate for one model and batch, by part (seconds; see the module docstring).

    h200_pass / again_arm: whether the h200 pricing pass and the ``inductor_again`` arm run.
    Raises KeyError for a model without figures.
    """
    m = H200[model]
    arms = ARMS_TIMED - (0 if again_arm else 1)
    return {
        "build": BUILD_S,
        "h200": CAPTURE_S + time_budget + CHECK_S if h200_pass else 0.0,
        "inductor": m.compile_s,
        "freezing": m.freezing_s,
        "tensor_eqsat": m.compile_s + time_budget + GUARD_S_PER_RUN * runs + CHECK_S,
        "inductor_again": CACHE_HIT * m.compile_s if again_arm else 0.0,
        "timing": arms * (runs + WARMUP) * m.eager_ms * batch / 1000,
    }


@dataclass
class Plan:
    """What ``real_models.py`` will run: (model, batch) pairs, the search budget and timed runs,
    the estimate, and what was trimmed to fit ``max_s`` (None: no limit)."""

    runs: list[tuple[str, int]]
    time_budget: float
    timed_runs: int
    blocks: int
    max_s: float | None = None
    h200_pass: bool = True
    again_arm: bool = True
    trimmed: list[str] = field(default_factory=list)

    def parts(self, model: str, batch: int) -> dict[str, float]:
        return run_seconds(model, batch, time_budget=self.time_budget, runs=self.timed_runs,
                           h200_pass=self.h200_pass, again_arm=self.again_arm)  # fmt: skip

    def seconds(self, model: str, batch: int) -> float:
        return sum(self.parts(model, batch).values())

    @property
    def total_s(self) -> float:
        return FIRST_COMPILE_S + sum(self.seconds(m, b) for m, b in self.runs)

    @property
    def fits(self) -> bool:
        return self.max_s is None or self.total_s <= self.max_s

    def lines(self) -> list[str]:
        """The estimate, printed at start: per model and batch, the total, what was trimmed."""
        out = ["# estimate on one H200/H100 (calibration h200-2026-11b; real_models_sizing.py):"]
        for m, b in self.runs:
            parts = self.parts(m, b)
            detail = ", ".join(f"{k} {v:.0f}" for k, v in parts.items() if v)
            out.append(f"#   {m} b{b}: {sum(parts.values()):.0f} s ({detail}; {H200[m].source})")
        limit = "" if self.max_s is None else f" (limit {self.max_s / 60:g} min)"
        out.append(
            f"#   total {self.total_s / 60:.1f} min{limit} with Inductor's start-up {FIRST_COMPILE_S:g} s; "
            f"search {self.time_budget:g} s, {self.timed_runs} runs in {self.blocks} blocks"
        )
        out += [f"#   trimmed: {t}" for t in self.trimmed]
        if self.max_s is not None and not self.fits:
            over = f"{self.total_s / 60:.1f} min > {self.max_s / 60:g} min"
            out.append(f"#   does NOT fit: {over}, nothing left to trim but models (none is dropped)")
        return out


def trim(plan: Plan) -> Plan:
    """Trim ``plan`` in place until it fits (module docstring), recording each step; returns it."""
    if plan.fits:
        return plan
    if plan.timed_runs > MIN_RUNS or plan.blocks > MIN_BLOCKS:
        old = (plan.timed_runs, plan.blocks)
        plan.timed_runs, plan.blocks = min(plan.timed_runs, MIN_RUNS), min(plan.blocks, MIN_BLOCKS)
        plan.trimmed.append(f"timed runs {old[0]} in {old[1]} blocks -> {plan.timed_runs} in {plan.blocks}")
    _budget(plan, BUDGET_STEPS_S[0])
    first: dict[str, int] = {}
    for m, b in plan.runs:
        first.setdefault(m, b)
    extra = sorted(
        ((m, b) for m, b in plan.runs if b != first[m]), key=lambda mb: -plan.seconds(*mb)
    )  # the most expensive first
    for m, b in extra:
        if plan.fits:
            break
        plan.runs.remove((m, b))
        plan.trimmed.append(f"{m} batch {b} not run ({plan.seconds(m, b):.0f} s; batch {first[m]} is)")
    if not plan.fits and plan.again_arm:
        plan.again_arm = False
        plan.trimmed.append("the inductor_again arm (between-compiles noise) not run")
    if not plan.fits and plan.h200_pass:
        plan.h200_pass = False
        plan.trimmed.append("the h200 pricing pass not run (the cuda target is searched and measured)")
    _budget(plan, BUDGET_STEPS_S[-1])
    return plan


def _budget(plan: Plan, seconds: float) -> None:
    if not plan.fits and plan.time_budget > seconds:
        plan.trimmed.append(f"search budget {plan.time_budget:g} s -> {seconds:g} s")
        plan.time_budget = seconds
