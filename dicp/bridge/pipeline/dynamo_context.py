"""What the backend can learn about the dynamo compile it runs in. Private torch API, isolated.

torch has no public API for these, so every private name dicp uses for them is here:
- `torch._guards.CompileContext.current_compile_id()`: "frame/recompile" of the running compile;
- `torch._guards.TracingContext.get_traced_code()`: the code objects dynamo is tracing;
- `torch._dynamo.callback.callback_handler`: dynamo's hooks around each compile (also around
  AOTAutograd's lazy backward compile), to time what happens outside dicp.
If one goes away, the profile loses the dynamo/AOTAutograd split and the recompile warning; the
compile itself does not depend on them.
"""

import os
import threading
import time
from dataclasses import dataclass

from dicp import profile


_DYNAMO_DIR = f"torch{os.sep}_dynamo{os.sep}"


@dataclass(frozen=True)
class Frame:
    compile_id: str | None  # "0/2": third compile of the first frame dynamo compiled
    function: str  # "forward (model.py:12)", or "<unknown>"


def current_frame(gm=None) -> Frame:
    """The running compile and the function it compiles (with `gm`, dynamo's graph, a compiled
    nn.Module is named by its class's forward rather than dynamo's call wrapper)."""
    try:
        from torch._guards import CompileContext, TracingContext

        compile_id = CompileContext.current_compile_id()
        codes = TracingContext.get_traced_code() or []
    except (ImportError, AttributeError):
        return Frame(None, "<unknown>")
    code = codes[0] if codes else None
    if code is not None and _DYNAMO_DIR in code.co_filename:
        code = _wrapped_module_forward(gm) or code
    qualname = getattr(code, "co_qualname", getattr(code, "co_name", ""))  # 3.11+: Class.f
    name = f"{qualname} ({code.co_filename}:{code.co_firstlineno})" if code else "<unknown>"
    return Frame(str(compile_id) if compile_id is not None else None, name)


def _wrapped_module_forward(gm):
    """For a module torch.compile wrapped (dynamo then compiles its own call wrapper), the
    module's forward, from the graph's nn_module_stack."""
    for node in gm.graph.nodes if gm is not None else ():
        stack = node.meta.get("nn_module_stack")
        if stack:
            path, module_type = next(iter(stack.values()))
            forward = getattr(module_type, "forward", None)
            return getattr(forward, "__code__", None) if path == "L['fn']" else None
    return None


class _Timer:
    """Wall time of each dynamo compile, minus the time dicp spent inside it. A compile dicp
    took no part in (a frame without a graph: a graph break's resume function, an optimizer's
    bookkeeping) counts as dynamo's whole: it is part of a first call's wall time (0.11 s of an
    AdamW training step's 1.4 s warm start). dicp cannot tell which backend such a frame was
    compiled for: in a process that also compiles with another backend, that backend's dynamo
    time counts here too."""

    def __init__(self):
        self.lock = threading.Lock()
        self.starts: dict = {}
        self.inside: dict = {}  # compile id -> seconds spent in dicp during that compile
        self.depth = threading.local()

    def on_start(self, args):
        with self.lock:
            self.starts[args.compile_id] = time.perf_counter()

    def on_end(self, args):
        with self.lock:
            start = self.starts.pop(args.compile_id, None)
            inside = self.inside.pop(args.compile_id, None)
        if start is None:
            return  # started before dicp's hooks were installed
        from torch._dynamo.callback import CallbackTrigger

        dynamo = args.callback_trigger == CallbackTrigger.DYNAMO
        if inside is None and not dynamo:
            return  # a lazy backward compile of another backend's graph
        stage = "dynamo" if dynamo else "aot_autograd"
        profile.add_time(stage, max(0.0, time.perf_counter() - start - (inside or 0.0)))


_TIMER = _Timer()


def install() -> bool:
    """Register the timing hooks with dynamo unless they are there; returns whether they were
    missing, which after the first call means dynamo was reset since. They only read the clock.

    Called when a dicp backend registers (so the first compile is timed from its start) and
    at each compile, because torch._dynamo.reset() drops every hook: the compile right after a
    reset is timed only from the point dicp re-registers them (its dynamo share is missed)."""
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        return False
    if _TIMER.on_start in callback_handler.start_callbacks:
        return False
    callback_handler.register_start_callback(_TIMER.on_start)
    callback_handler.register_end_callback(_TIMER.on_end)
    return True


class inside_dicp:
    """Context manager around dicp's work in a compile: its outermost level adds its wall time
    to the compile's dicp share."""

    def __enter__(self):
        depth = getattr(_TIMER.depth, "value", 0)
        _TIMER.depth.value = depth + 1
        self.outermost = depth == 0
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        _TIMER.depth.value -= 1
        compile_id = current_frame().compile_id if self.outermost else None
        if compile_id is not None:  # None: dicp called outside a dynamo compile
            with _TIMER.lock:
                _TIMER.inside[compile_id] = (
                    _TIMER.inside.get(compile_id, 0.0) + time.perf_counter() - self.start
                )
        return False
