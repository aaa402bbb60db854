"""Benchmark: loading the built-in rule sets and verifying every rule on numbers.

Usage::

    PYTHONPATH=src python benchmarks/rules.py [--repeat 3] [--seed 0]

Prints medians over the repeats: time to parse the rule files, time (wall and CPU; the machine
may be shared) to verify all rules of the ``taso`` set plus the one rule the ``taso-nasrnn`` set
adds, the per-rule median and the slowest rules, then the rules whose numerics needed conditions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from importlib.resources import files

from tensor_eqsat.rules.loader import parse_rules
from tensor_eqsat.rules.sets import builtin_rule_files, load_rule_set
from tensor_eqsat.rules.soundness import VerifyConfig, verify_rules

PACKAGE = "tensor_eqsat.rules"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs to take the median of (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="verification seed (default 0)")
    args = parser.parse_args()

    load_times, verify_times, verify_cpu = [], [], []
    per_rule: dict[tuple[str, int], list[float]] = {}
    checks = (0, 0)
    for _ in range(args.repeat):
        texts = [files(PACKAGE).joinpath(f).read_text() for f in builtin_rule_files()]
        start = time.perf_counter()
        for f, text in zip(builtin_rule_files(), texts, strict=True):
            parse_rules(text, f)
        load_times.append(time.perf_counter() - start)
        taso, nasrnn = load_rule_set("taso"), load_rule_set("taso-nasrnn")
        extra = [
            r
            for r in nasrnn
            if (r.lhs, r.rhs, r.conditions)
            != (taso.by_id(r.id).lhs, taso.by_id(r.id).rhs, taso.by_id(r.id).conditions)
        ]
        cpu = time.process_time()
        report = verify_rules([*taso, *extra], VerifyConfig(seed=args.seed))
        verify_cpu.append(time.process_time() - cpu)
        verify_times.append(report.seconds)
        if not report.all_verified:
            for v in report.failed:
                print(f"FAILED rule {v.rule_id} ({v.name}): {v.reason}")
            return 1
        for v in report.verdicts:
            per_rule.setdefault((v.name, v.rule_id), []).append(v.seconds)
        checks = (
            sum(v.shape_checks for v in report.verdicts),
            sum(v.numeric_checks for v in report.verdicts),
        )

    medians = {key: statistics.median(ts) for key, ts in per_rule.items()}
    n = len(medians)
    print(
        f"rules verified: {n} (taso 139 + {n - 139} from taso-nasrnn), seed {args.seed}, {args.repeat} runs"
    )
    print(
        f"parse the rule files:   median {statistics.median(load_times) * 1000:.1f} ms (3 files, 140 rules)"
    )
    print(
        f"verify all rules:       median {statistics.median(verify_times):.2f} s wall, "
        f"{statistics.median(verify_cpu):.2f} s CPU"
    )
    print(
        f"per rule:               median {statistics.median(medians.values()) * 1000:.0f} ms, "
        f"max {max(medians.values()) * 1000:.0f} ms"
    )
    print(f"instances per run:      {checks[0]} compared by shape, {checks[1]} by value")
    slow = sorted(medians.items(), key=lambda kv: -kv[1])[:5]
    print(
        "slowest:                " + ", ".join(f"{rid} {name} {t * 1000:.0f} ms" for (name, rid), t in slow)
    )
    conditioned = [r for r in load_rule_set("taso") if r.conditions]
    print(f"rules with conditions:  {len(conditioned)} of 139")
    for r in conditioned:
        print(f"  {r.id:3d} {r.name:45s} " + "  ".join(str(c) for c in r.conditions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
