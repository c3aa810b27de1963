"""python -m dicp.tools.fuzz: differential fuzzing of a dicp backend against eager PyTorch.

Exit status: 0 when every program matches eager, 1 when any mismatch or error was found.
"""

import argparse
import sys

import dicp.vendor.new_backendGraph  # noqa: F401  (declares the bounds_check knob)

from .cold_warm import run_cold_then_warm
from .driver import Options, fuzz
from .generate import FAMILIES


def parse(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m dicp.tools.fuzz",
        description="Generate random programs (pointwise, reduction, view, indexing, concat, "
        "type-promotion, matrix product, normalization, sort and scan, padding "
        "ops), compile them with a dicp backend, compare with "
        "eager (values, dtypes, shapes; gradients), shrink and print every failure "
        "as a standalone repro.",
    )
    parser.add_argument("--seed", type=int, default=0, help="fixes the programs (default 0)")
    parser.add_argument(
        "--programs",
        type=int,
        default=100,
        help="programs per shape mode (default 100; a long run: 5000)",
    )
    shapes = parser.add_mutually_exclusive_group()
    shapes.add_argument(
        "--dynamic",
        dest="shapes",
        action="store_const",
        const="dynamic",
        help="dynamic shapes only: each program at 3 sizes, one build",
    )
    shapes.add_argument(
        "--both",
        dest="shapes",
        action="store_const",
        const="both",
        help="static shapes, then dynamic shapes",
    )
    parser.set_defaults(shapes="static")
    parser.add_argument(
        "--no-backward",
        dest="backward",
        action="store_false",
        help="forward only (default: gradients of float inputs too)",
    )
    parser.add_argument(
        "--batch", type=int, default=16, help="programs compiled together, one graph (default 16)"
    )
    parser.add_argument("--max-ops", type=int, default=8, help="ops per program (default 8)")
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"comma-separated op families (default all: {','.join(FAMILIES)})",
    )
    parser.add_argument(
        "--no-shrink", dest="shrink", action="store_false", help="print failures as found, unshrunk"
    )
    parser.add_argument(
        "--max-shrinks",
        type=int,
        default=10,
        help="failures shrunk per run; later ones are printed unshrunk",
    )
    parser.add_argument(
        "--no-bounds-check",
        dest="bounds_check",
        action="store_false",
        help="build kernels without DICP_BOUNDS_CHECK (faster, blind to out-of-bounds accesses)",
    )
    parser.add_argument("--backend", default="new_backendgraph")
    parser.add_argument("--repro-dir", default="", help="also write each repro to DIR/repro_N.py")
    parser.add_argument(
        "--cold-warm",
        action="store_true",
        help="run twice, each in a fresh process sharing a new cache "
        "directory: the warm run must compute bit for bit what the cold "
        "run did",
    )
    args = parser.parse_args(argv)
    families = tuple(f for f in args.families.split(",") if f)
    unknown = set(families) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; known: {', '.join(FAMILIES)}")
    return Options(
        seed=args.seed,
        programs=args.programs,
        shapes=args.shapes,
        backward=args.backward,
        batch=args.batch,
        max_ops=args.max_ops,
        families=families,
        shrink=args.shrink,
        max_shrinks=args.max_shrinks,
        bounds_check=args.bounds_check,
        backend=args.backend,
        repro_dir=args.repro_dir,
        print=lambda *a: print(*a, flush=True),
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--cold-warm" in argv:
        parse(argv)  # refuse bad arguments before running anything
        return run_cold_then_warm([a for a in argv if a != "--cold-warm"])
    report = fuzz(parse(argv))
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
