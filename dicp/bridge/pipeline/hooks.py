"""Where the debugging tools attach to the pipeline, so that the pipeline never imports them.

`dicp.bridge.debug` registers its tools here when it is imported (the entry imports it):
- a graph hook wraps each graph compiled in this process: `hook(compiled, aten_gm, stages)`
  returns `compiled` (the callable taking the list of inputs) or a callable wrapping it;
  `aten_gm` is the ATen graph and `stages` its GraphTransformer (op-argument dumps, autocompare);
- a call hook wraps every compiled graph's callable, also one loaded from a cache or a
  precompiled file: `hook(fn, kind)` returns `fn` or a wrapper (result recording);
- a fault hook names the fault codegen injects into a vendor node, `hook(node)` -> "accuracy",
  "compile_error", "runtime_error" or None (DICP_INJECT_BUG_TESTING_ONLY); each codegen renders
  it its own way (`GraphCodegenBase.inject_fault`).
Hooks run in the order they were registered.
"""

from collections.abc import Callable
from typing import Any

import torch

from .provenance import origin_of

GraphHook = Callable[[Callable, Any, Any], Callable]
CallHook = Callable[[Callable, str], Callable]
FaultHook = Callable[[Any], "str | None"]

_GRAPH_HOOKS: list[GraphHook] = []
_CALL_HOOKS: list[CallHook] = []
_FAULT_HOOKS: list[FaultHook] = []


def _add(hooks: list, hook):
    if hook not in hooks:  # importing a tool twice registers it once
        hooks.append(hook)
    return hook


def on_graph(hook: GraphHook) -> GraphHook:
    return _add(_GRAPH_HOOKS, hook)


def on_call(hook: CallHook) -> CallHook:
    return _add(_CALL_HOOKS, hook)


def on_fault(hook: FaultHook) -> FaultHook:
    return _add(_FAULT_HOOKS, hook)


def wrap_graph(compiled: Callable, aten_gm, stages) -> Callable:
    for hook in _GRAPH_HOOKS:
        compiled = hook(compiled, aten_gm, stages)
    return compiled


def wrap_call(fn: Callable, kind: str) -> Callable:
    for hook in _CALL_HOOKS:
        fn = hook(fn, kind)
    return fn


def fault_for(node) -> str | None:
    """The fault to inject into vendor node `node`, or None."""
    return next((kind for kind in (hook(node) for hook in _FAULT_HOOKS) if kind), None)


def runtime_error_message(node) -> str:
    """What generated code injected with a "runtime_error" fault raises."""
    return f"dicp: runtime error injected into {origin_of(node).op} by DICP_INJECT_BUG_TESTING_ONLY"


def wrong_value(tensor):
    """What a wrapper value injected with an "accuracy" fault becomes: every element moved by
    more than any tolerance (bool: negated)."""
    if tensor.dtype == torch.bool:
        return torch.logical_not(tensor)
    return tensor + 1 + tensor.abs()
