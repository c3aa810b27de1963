"""Find the ops whose generated code makes a script wrong: `python -m dicp.tools.bisect SCRIPT.py`.

Inductor's accuracy minifier at op level. The script is run again and again, each time with a
set of ATen ops forced to eager fallback (DICP_FALLBACK_OPS); the set is halved until it is the
smallest one whose fallback makes the run pass; when autocompare named the op that diverged
first in the first run, that op alone is tried before any halving. The oracle is the script's
exit status, with DICP_AUTOCOMPARE=raise (the default: any compiled graph that disagrees with
eager fails the run) or without it (`--oracle exit`: the script checks its own results, or
crashes).

    python -m dicp.tools.bisect train.py --steps 2
    python -m dicp.tools.bisect --oracle exit check_model.py

It prints the culprit op(s) and leaves a standalone repro of a graph that disagreed with eager,
narrowed to the culprits (every other op on fallback): `python <repro>/run.py` exits 1 while the
bug is there.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ORACLES = ("autocompare", "exit")


class Bisector:
    """Runs the script with op sets on fallback and remembers each verdict."""

    def __init__(self, command, oracle, timeout, user_fallback):
        self.command, self.oracle, self.timeout = command, oracle, timeout
        self.user_fallback = user_fallback  # the caller's own DICP_FALLBACK_OPS, always kept
        self.verdicts: dict = {}
        self.runs = 0

    def run(self, fallback=(), **env):
        """The finished process with `fallback` ops forced to eager fallback."""
        full = dict(os.environ)
        full["DICP_FALLBACK_OPS"] = ",".join([*self.user_fallback, *sorted(fallback)])
        if self.oracle == "autocompare":
            full["DICP_AUTOCOMPARE"] = "raise"
        full.update(env)
        self.runs += 1
        try:
            return subprocess.run(
                self.command, env=full, capture_output=True, text=True, timeout=self.timeout
            )
        except subprocess.TimeoutExpired as expired:
            return subprocess.CompletedProcess(
                self.command, 124, expired.stdout or "", f"timed out after {self.timeout} s"
            )

    def passes(self, fallback) -> bool:
        key = frozenset(fallback)
        if key not in self.verdicts:
            result = self.run(key)
            self.verdicts[key] = result.returncode == 0
            verdict = "passes" if self.verdicts[key] else f"fails ({result.returncode})"
            print(f"run {self.runs}: {len(key)} op(s) on fallback -> {verdict}", flush=True)
        return self.verdicts[key]

    def minimize(self, candidates, fixed=frozenset()):
        """A smallest subset S of `candidates` with fallback(S + fixed) passing, given that
        fallback(candidates + fixed) passes."""
        candidates = sorted(candidates)
        if len(candidates) <= 1:
            return set(candidates)
        half = len(candidates) // 2
        first, second = set(candidates[:half]), set(candidates[half:])
        if self.passes(first | fixed):
            return self.minimize(first, fixed)
        if self.passes(second | fixed):
            return self.minimize(second, fixed)
        # culprits on both sides: each half is needed given the other
        first = self.minimize(first, fixed | second)
        if self.passes(first | fixed):
            return first
        return first | self.minimize(second, fixed | first)


def bisect(command, oracle="autocompare", timeout=None, repro_dir=Path("dicp_repro")) -> int:
    """Run the whole search; returns the process exit status (0 when a culprit was found)."""
    user_fallback = [p for p in os.environ.get("DICP_FALLBACK_OPS", "").split(",") if p.strip()]
    bisector = Bisector(command, oracle, timeout, user_fallback)
    _remove_old_repros(repro_dir)
    ops = _baseline(bisector, repro_dir)
    if ops is None:
        return 0 if bisector.verdicts.get(frozenset()) else 1
    culprits = search(bisector, ops, _suspects(repro_dir, ops))
    if culprits is None:
        print(
            "the script still fails with every natively compiled op on eager fallback: the "
            "failure is not in one op's generated code (look at the script's own error, the "
            "wrapper, or the dynamo/AOTAutograd bridge)"
        )
        return 1
    print(
        f"culprit{'s' if len(culprits) > 1 else ''}: {', '.join(sorted(culprits))} "
        f"({bisector.runs} runs)"
    )
    _narrow_repros(repro_dir, ops - culprits, user_fallback)
    return 0


def search(bisector, ops, suspects=frozenset()):
    """A smallest set of `ops` whose fallback makes the script pass; None if the fallback of
    all of them does not. The ops autocompare found diverging first (`suspects`) are tried
    alone first: a wrong result from one op's code then takes one run after the baseline, not
    a halving of every op (9 runs of GPT-2 -> 2); a wrong guess costs at most one run more."""
    if suspects:
        print(f"autocompare named {', '.join(sorted(suspects))} first: trying it on fallback")
        if bisector.passes(suspects):
            return bisector.minimize(suspects)
    if not bisector.passes(ops):
        return None
    return bisector.minimize(ops)


def _suspects(repro_dir, ops) -> frozenset:
    """The first diverging ops named in the baseline run's repros (meta.json), among `ops`."""
    named = (
        json.loads(meta.read_text()).get("first_diverging_op")
        for meta in Path(repro_dir).glob("*/meta.json")
    )
    return frozenset(op for op in named if op in ops)


def _baseline(bisector, repro_dir):
    """Run with every op native; the set of ops that ran natively, or None to stop."""
    with tempfile.TemporaryDirectory(prefix="dicp-bisect-") as scratch:
        record = Path(scratch) / "ops.txt"
        env = {"DICP_RECORD_OPS": str(record), "DICP_REPRO_DIR": str(repro_dir.resolve())}
        if bisector.oracle == "exit":
            env["DICP_AUTOCOMPARE"] = "1"  # log only, to write repros without failing the run
        result = bisector.run((), **env)
        ops = set(record.read_text().split()) if record.exists() else set()
    bisector.verdicts[frozenset()] = result.returncode == 0
    if result.returncode == 0:
        print("the script passes with every op compiled natively: nothing to bisect")
        return None
    print(f"the script fails (exit status {result.returncode}); last lines of its output:")
    print(_tail(result.stderr or result.stdout))
    if not ops:
        print("no op ran natively before the failure: it is not in an op's generated code")
        return None
    print(f"{len(ops)} ATen op(s) ran natively; bisecting them")
    return ops


def _remove_old_repros(repro_dir):
    """Earlier repros in `repro_dir` (folders holding meta.json and run.py) would be mistaken
    for this run's."""
    for run_py in Path(repro_dir).glob("*/run.py"):
        if (run_py.parent / "meta.json").exists():
            shutil.rmtree(run_py.parent)


def _narrow_repros(repro_dir, others, user_fallback):
    """Point each repro at the culprits (every other op on fallback) if it still fails so."""
    from dicp.bridge.debug.repro import run_script_knobs, write_run_script

    folders = sorted(p.parent for p in Path(repro_dir).glob("*/run.py"))
    if not folders:
        print(
            "no repro: no compiled graph disagreed with eager (the failure is an error, "
            "not a wrong value; the culprit above reproduces it)"
        )
    for folder in folders:
        knobs = run_script_knobs(folder)
        narrowed = dict(knobs, DICP_FALLBACK_OPS=",".join([*user_fallback, *sorted(others)]))
        write_run_script(folder, narrowed)
        if _repro_fails(folder):
            print(f"repro: python {folder / 'run.py'}  (exits 1 while the bug is there)")
            continue
        write_run_script(folder, knobs)
        state = "exits 1" if _repro_fails(folder) else "does not fail alone"
        print(f"repro: python {folder / 'run.py'}  ({state}; every op native)")


def _repro_fails(folder) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "DICP_FALLBACK_OPS"}
    return (
        subprocess.run(
            [sys.executable, str(folder / "run.py")], env=env, capture_output=True
        ).returncode
        == 1
    )


def _tail(text, lines=12) -> str:
    return "\n".join("  | " + line for line in text.rstrip().splitlines()[-lines:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dicp.tools.bisect",
        description="Find the ATen op(s) whose dicp-generated code makes SCRIPT fail.",
    )
    parser.add_argument(
        "--oracle",
        choices=ORACLES,
        default="autocompare",
        help="autocompare: fail a run when a compiled graph disagrees with eager"
        " (DICP_AUTOCOMPARE=raise); exit: the script's exit status only",
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run")
    parser.add_argument(
        "--repro-dir",
        type=Path,
        default=Path("dicp_repro"),
        help="where the repro folders go (default: ./dicp_repro)",
    )
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(argv)
    command = [sys.executable, options.script, *options.args]
    return bisect(command, options.oracle, options.timeout, options.repro_dir)


if __name__ == "__main__":
    sys.exit(main())
