"""Build (and optionally interpret) every zoo model; print median times.

    PYTHONPATH=src python benchmarks/zoo.py [--repeat 5] [--run]

``--run`` also times one reference-interpreter pass per model at the paper's size (slow: about a
minute in total on one core).
"""

from __future__ import annotations

import argparse
import statistics
import time

from tensor_eqsat import zoo
from tensor_eqsat.ir.interpreter import run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="builds per model (median reported)")
    parser.add_argument("--run", action="store_true", help="also time one interpreter pass per model")
    args = parser.parse_args()
    print(f"{'model':<12} {'nodes':>6} {'build ms':>9} {'run s':>7}")
    for name in zoo.names():
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            g = zoo.get(name)
            times.append(time.perf_counter() - start)
        run_s = ""
        if args.run:
            if name == "bert":
                g = zoo.get(name, join="outputs")
            start = time.perf_counter()
            run(g)
            run_s = f"{time.perf_counter() - start:.2f}"
        print(f"{name:<12} {len(g):>6} {1000 * statistics.median(times):>9.1f} {run_s:>7}")


if __name__ == "__main__":
    main()
