"""Standalone repros of a graph autocompare found wrong: `python <folder>/run.py` rebuilds it.

A repro folder holds the ATen graph as Python (`module.py`, from GraphModule.to_folder, with its
constants), the inputs of the failing call (`inputs.pt`), the graph as dicp saw it with source
lines (`graph.txt`), the backend and graph kind (`meta.json`), and `run.py`, which sets the knobs
that were in effect (fallback ops, injected faults, ...), compiles the graph with the same
backend, runs it with autocompare in raise mode (`autocompare.run_repro`) and exits 1 on a
mismatch, 0 on agreement. Symbolic sizes become the sizes of the failing call.
"""

import importlib.util
import json
import sys
from pathlib import Path

import torch

from dicp import config

# Knobs a repro does not carry over: where things go, and the repro machinery itself.
NOT_CARRIED = {
    "cache_dir",
    "autocompare",
    "repro_dir",
    "record_ops",
    "debug",
    "profile",
    "dump_op_args",
    "dump_op_args_file",
    "test_backend",
    "test_dynamic",
}

RUN_PY = '''"""dicp repro of graph {graph} ({kind}): `python run.py` exits 1 if it still disagrees
with eager, 0 if it agrees. Written by dicp autocompare."""
import os
import sys
from pathlib import Path

KNOBS = {knobs!r}  # in effect when the mismatch was found; the environment may override
for name, value in KNOBS.items():
    os.environ.setdefault(name, value)

from dicp.bridge.debug.autocompare import run_repro  # noqa: E402

sys.exit(run_repro(Path(__file__).resolve().parent))
'''


def write_repro(root: Path, gm, inputs, ctx, diverging_op: str | None = None) -> Path:
    """Write the repro of graph `ctx.graph_name` under `root`; returns its folder. The ATen op
    autocompare found diverging first, if any, goes in meta.json (bisect tries it first)."""
    folder = Path(root) / ctx.graph_name
    folder.mkdir(parents=True, exist_ok=True)
    gm.to_folder(folder, "ReproGraph")
    torch.save([_concrete(x) for x in inputs], folder / "inputs.pt")
    (folder / "graph.txt").write_text(gm.print_readable(print_output=False, include_stride=True))
    meta = {
        "backend": ctx.backend.name,
        "kind": ctx.kind,
        "graph": ctx.graph_name,
        "first_diverging_op": diverging_op,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    write_run_script(folder, carried_knobs())
    return folder


def write_run_script(folder: Path, knobs: dict) -> None:
    """(Re)write `run.py`, which sets `knobs` (environment text) unless already set; they are
    kept in meta.json too."""
    meta = json.loads((folder / "meta.json").read_text())
    meta["knobs"] = knobs
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    (folder / "run.py").write_text(
        RUN_PY.format(graph=meta["graph"], kind=meta["kind"], knobs=knobs)
    )


def run_script_knobs(folder: Path) -> dict:
    """The knobs `run.py` sets."""
    return json.loads((folder / "meta.json").read_text())["knobs"]


def carried_knobs() -> dict:
    """DICP_* settings that differ from the defaults, as environment text."""
    carried = {}
    for knob, _shown, where in config.effective():
        if where != "default" and knob.name not in NOT_CARRIED:
            carried[knob.env] = config.as_env_text(knob.name, config.get(knob.name))
    return carried


def _concrete(value):
    if isinstance(value, torch.SymInt):
        return int(value)
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def load_graph(folder: Path) -> torch.fx.GraphModule:
    spec = importlib.util.spec_from_file_location("dicp_repro_module", folder / "module.py")
    assert spec is not None and spec.loader is not None, f"no module.py in {folder}"
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))  # module.py loads its constants relative to itself
    try:
        spec.loader.exec_module(module)
        return torch.fx.symbolic_trace(module.ReproGraph())
    finally:
        sys.path.remove(str(folder))
