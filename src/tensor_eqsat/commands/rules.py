"""``tensor-eqsat rules``: list a rule set (or rule files) and optionally verify it on numbers.

The listing (and with ``--verify`` the verdicts) is the command's result and goes to stdout: a
table for people, or with ``--json`` a list of objects and nothing else. The exit code is 1 when
a rule fails verification, 2 for a malformed rule file or an unknown set or id.
"""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from tensor_eqsat.commands._common import non_negative_int, print_json, seed, stderr, stdout
from tensor_eqsat.errors import TensorEqsatError
from tensor_eqsat.rules.rule_spec import RuleSpec
from tensor_eqsat.rules.sets import DEFAULT_SET, describe_rule_set, load_rules, rule_set_names
from tensor_eqsat.rules.soundness import RuleVerdict, VerifyConfig, verify_rules

NAME = "rules"
HELP = "list rewrite rules (a built-in set or rule files) and verify them on numbers"


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    sets = "; ".join(f"{n}: {describe_rule_set(n)}" for n in rule_set_names())
    src.add_argument(
        "--set",
        dest="set_name",
        metavar="NAME",
        choices=rule_set_names(),
        help=f"built-in rule set ({sets}); default {DEFAULT_SET}",
    )
    src.add_argument(
        "--file", dest="files", metavar="F", action="append", default=[], help="a rule file (repeatable)"
    )
    p.add_argument(
        "--id",
        dest="ids",
        metavar="N",
        type=non_negative_int,
        action="append",
        default=[],
        help="only rule N (repeatable)",
    )
    p.add_argument("--verify", action="store_true", help="verify every rule on numbers; exit 1 if any fails")
    p.add_argument("--seed", type=seed, default=0, help="seed of the shape search and the data (default 0)")
    p.add_argument("--json", action="store_true", help="print the rules (and verdicts) as JSON on stdout")


def _rule_json(r: RuleSpec) -> dict[str, object]:
    return {
        "id": r.id,
        "name": r.name,
        "kind": r.kind.value,
        "symmetric": r.symmetric,
        "pairs": [[str(lhs), str(rhs)] for lhs, rhs in r.pairs],
        "conditions": [str(c) for c in r.conditions],
        "text": r.text,
        "source": r.source,
    }


def run(args: argparse.Namespace) -> int:
    rules = load_rules(set_name=args.set_name, files=args.files)
    selected = list(rules)
    if args.ids:
        missing = sorted(set(args.ids) - {r.id for r in selected})
        if missing:
            raise TensorEqsatError(f"no rule with id {', '.join(map(str, missing))} in {rules.name}")
        selected = [r for r in selected if r.id in set(args.ids)]
    verdicts: dict[int, RuleVerdict] = {}
    seconds = 0.0
    if args.verify:
        report = verify_rules(selected, VerifyConfig(seed=args.seed))
        verdicts = {v.rule_id: v for v in report.verdicts}
        seconds = report.seconds
    if args.json:
        out = []
        for r in selected:
            item = _rule_json(r)
            if args.verify:
                item.update(verdicts[r.id].to_json())
            out.append(item)
        print_json(out)
    else:
        _print_table(rules.name, selected, verdicts)
    if not args.verify:
        return 0
    failed = [v for v in verdicts.values() if not v.verified]
    # With --json the verdicts are in the JSON; the summary then goes to stderr.
    console = stderr if args.json else stdout
    lines = [f"{len(selected) - len(failed)}/{len(selected)} rules verified in {seconds:.1f} s"]
    for v in failed:
        detail = v.counterexample.describe() if v.counterexample is not None else v.reason
        lines.append(f"rule {v.rule_id} ({v.name}) not verified: {detail}")
    for line in lines:
        console.print(line, markup=False, highlight=False)
    return 1 if failed else 0


def _print_table(title: str, rules: list[RuleSpec], verdicts: dict[int, RuleVerdict]) -> None:
    # Text cells: rule text holds brackets ("stride=[2 2]") that rich would read as markup.
    table = Table(title=Text(title), show_header=True)
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("name", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("rule", overflow="fold")
    if verdicts:
        table.add_column("verified")
    for r in rules:
        kind = r.kind.value + (" sym" if r.symmetric else "")
        row = [Text(str(r.id)), Text(r.name), Text(kind), Text(r.text.replace("; ", "\n"))]
        if verdicts:
            v = verdicts[r.id]
            row.append(
                Text(f"yes ({v.shape_checks}/{v.numeric_checks})") if v.verified else Text("NO", style="red")
            )
        table.add_row(*row)
    stdout.print(table)
