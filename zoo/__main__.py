"""``python -m zoo [VARIANT ...] [--workers N]``: run the claims against the bug zoo; which claims caught what.

The zoo is this course's own set of broken implementations, so it runs as its own command: the
harness never imports it. The exit status is 1 when a variant escapes a claim it must fail.
"""

from __future__ import annotations

import argparse
import sys

from zoo import VARIANTS
from zoo._run import run_zoo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo", description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", help="variants to run (default: all)")
    parser.add_argument("--workers", type=int, help="checks run at once (default: the number of CPUs)")
    args = parser.parse_args(argv)
    try:
        caught = run_zoo(args.variants or None, workers=args.workers)
    except KeyError as error:
        print(f"python -m zoo: {error.args[0]}", file=sys.stderr)
        return 2
    escaped = []
    print(f"{'variant':30} {'step':7} caught by")
    for name, failed in caught.items():
        variant = VARIANTS[name]
        missing = sorted(set(variant.caught_by) - set(failed))
        escaped += [name] if missing else []
        print(f"{name:30} {variant.step:7} {', '.join(failed) or 'NOTHING'}"
              + (f"   [expected too: {', '.join(missing)}]" if missing else ""))
    print(f"python -m zoo: {len(caught) - len(escaped)} of {len(caught)} variants caught by every claim they must fail")
    return 1 if escaped else 0


if __name__ == "__main__":
    raise SystemExit(main())
