"""The conversion pass (ATen graph -> vendor graph), its table decorator, and the pattern-rewrite
utility."""

import dataclasses
import functools
import logging
import operator
import warnings

import torch
import torch.fx as fx
from torch.fx.subgraph_rewriter import replace_pattern_with_filters

from dicp import config, profile

from .fallback import Fallback, declared_reason, record_fallback
from .provenance import ORIGIN, Origin
from .stages import infer_node
from .symbolic import RAW_SYMBOLIC_WARNING
from .torch_compat import OpOverload, OpOverloadPacket
from .utils import is_random, leaves, log_once, matches_any, op_name

FORCED = "forced by DICP_FALLBACK_OPS"
RANDOM = "a random op, run by eager under DICP_FALLBACK_RANDOM"


class Unsupported(Exception):
    """Raised by a converter that cannot handle these arguments: the node falls back.
    `advice` says how to make the op run natively (default: extend its converter)."""

    def __init__(self, reason, advice=None):
        super().__init__(reason)
        self.advice = advice
        self.dtype = ""  # set when the reason is a dtype the backend does not support


class UnsupportedOpError(NotImplementedError):
    """Strict mode: an ATen op would have run as eager fallback."""


class ConversionContext:
    """What a converter sees: the node being converted and a way to emit vendor ops."""

    def __init__(self, graph, infer, converted=None):
        self.graph = graph
        self._infer = infer
        self._converted = converted if converted is not None else {}
        self.node = None  # the ATen node being converted

    def converted(self, aten_node):
        """The vendor value an earlier ATen node of the graph became (for converters that
        must look past their direct arguments, e.g. to the tensor owning a view's storage)."""
        return self._converted[aten_node]

    def op(self, vendor_op, *args, **kwargs):
        """Append `vendor_op(*args, **kwargs)` to the vendor graph with its inferred meta."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=RAW_SYMBOLIC_WARNING)
            node = self.graph.call_function(vendor_op, args, kwargs)
        node.meta["val"] = self._infer(node)
        node.meta[ORIGIN] = _origin(self.node)
        return node

    @staticmethod
    def val(arg):
        """The fake tensor behind a node, or the Python value itself."""
        return arg.meta["val"] if isinstance(arg, fx.Node) else arg

    @property
    def out(self):
        """The fake result of the ATen node being converted."""
        return self.node.meta.get("val")


class OpTransformer:
    """Rewrites an ATen graph into vendor ops through `backend.conversions`.

    Nodes without a converter stay ATen calls (run eagerly by the wrapper) unless strict.
    """

    def __init__(self, gm, backend, infer):
        self.gm = gm
        self.backend = backend
        self.graph = fx.Graph()
        self.env = {}
        self.ctx = ConversionContext(self.graph, infer, self.env)
        self.forced_fallback = config.fallback_ops
        self.fallback_random = config.fallback_random

    def run(self) -> fx.GraphModule:
        for node in self.gm.graph.nodes:
            self.env[node] = getattr(self, f"_{node.op}")(node)
        return fx.GraphModule(self.gm, self.graph)

    def _placeholder(self, node):
        new = self.graph.placeholder(node.name)
        new.meta = dict(node.meta)
        return new

    def _get_attr(self, node):
        new = self.graph.get_attr(node.target)
        new.meta = dict(node.meta)
        return new

    def _output(self, node):
        return self.graph.output(fx.node.map_arg(node.args[0], self.env.__getitem__))

    def _call_function(self, node):
        args, kwargs = fx.node.map_aggregate((node.args, node.kwargs), self._lookup)
        if node.target is operator.getitem and isinstance(args[0], (tuple, list)):
            return args[0][args[1]]  # a converter returned the tuple itself
        if node.target is operator.getitem:
            return self._item(node, args)
        if is_size_arithmetic(node):
            return self._copy(node, args, kwargs)
        converter = self._converter_for(node)
        if converter is None:
            return self._fallback(node, args, kwargs, "no converter")
        self.ctx.node = node
        try:
            self._check_dtypes(node)
            return _mark_results(converter(self.ctx, *args, **kwargs), node)
        except Unsupported as unsupported:
            return self._fallback(
                node, args, kwargs, str(unsupported), unsupported.advice, unsupported.dtype
            )
        except Exception as error:  # a converter bug must not cost the user a working program
            reason = f"its converter failed with {type(error).__name__}: {error}"
            advice = f"fix the converter of {op_name(node.target)} in {self._table()}"
            if config.strict:
                raise UnsupportedOpError(
                    self._strict_message(op_name(node.target), reason, advice)
                ) from error
            return self._fallback(node, args, kwargs, reason, advice)

    def _check_dtypes(self, node):
        supported = self.backend.supported_dtypes
        vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
        for val in leaves(vals, torch.Tensor):
            if supported and val.dtype not in supported:
                unsupported = Unsupported(
                    f"dtype {val.dtype} is not supported by {self.backend.name} "
                    f"(supported: {', '.join(sorted(map(str, supported)))})",
                    f"add {val.dtype} to the backend's Backend.supported_dtypes once its "
                    f"codegen handles that type",
                )
                unsupported.dtype = str(val.dtype)
                raise unsupported

    def _lookup(self, arg):
        return self.env[arg] if isinstance(arg, fx.Node) else arg

    def _converter_for(self, node):
        if node.target is operator.getitem:
            return None
        if self._forced_reason(node.target) is not None:
            return None
        conversions = self.backend.conversions
        return conversions.get(node.target) or conversions.get(op_name(node.target))

    def _forced_reason(self, target):
        """Why a knob sends `target` to eager fallback whatever its converter, or None."""
        if matches_any(op_name(target), self.forced_fallback):
            return FORCED
        if self.fallback_random and is_random(target):
            return RANDOM
        return None

    def _fallback(self, node, args, kwargs, reason, advice=None, dtype=""):
        if node.target is not operator.getitem:
            name = op_name(node.target)
            profile.fallback(name)
            forced = self._forced_reason(node.target)
            self._report_fallback(name, forced or reason, forced is not None, advice, dtype)
        return self._copy(node, args, kwargs)

    def _item(self, node, args):
        """An element of a tuple result, with the fake value its producer inferred: a vendor
        op may lay its results out otherwise than the trace (a channels-last max pool)."""
        new = self._copy(node, args, {})
        vals = args[0].meta.get("val") if isinstance(args[0], fx.Node) else None
        if isinstance(vals, (tuple, list)) and isinstance(args[1], int):
            new.meta["val"] = vals[args[1]]
        return new

    def _copy(self, node, args, kwargs):
        new = self.graph.call_function(node.target, args, kwargs)
        new.meta = dict(node.meta)
        new.meta[ORIGIN] = _origin(node, result=True)
        return new

    def _report_fallback(self, name, reason, forced, advice=None, dtype=""):
        backend = self.backend.name
        record_fallback(Fallback(backend, name, reason, dtype))
        declared = declared_reason(self.backend, name, dtype)
        if declared is not None:
            # expected, so not a warning: DICP_STRICT=1 or logging at INFO shows them
            log_once(
                (backend, name, reason),
                "%s: %s runs as eager ATen fallback (%s), a fallback the backend declares: %s",
                backend,
                name,
                reason,
                declared,
                level=logging.INFO,
            )
            return
        if forced:  # the user's choice: nothing to advise
            log_once(
                (backend, name, reason),
                "%s: %s runs as eager ATen fallback (%s)",
                backend,
                name,
                reason,
            )
            return
        advice = advice or (
            f"add a converter for {name} in {self._table()}"
            if reason == "no converter"
            else f"extend the converter of {name} in {self._table()}"
        )
        if config.strict:
            raise UnsupportedOpError(self._strict_message(name, reason, advice))
        log_once(
            (backend, name, reason),
            "%s: %s runs as eager ATen fallback (%s); to run it natively, %s",
            backend,
            name,
            reason,
            advice,
        )

    def _table(self):
        return self.backend.conversion_table

    def _strict_message(self, name, reason, advice):
        return (
            f"{self.backend.name}: {name} is not supported ({reason}) and DICP_STRICT=1 "
            f"forbids eager fallback; {advice}"
        )


def convert(gm: fx.GraphModule, ctx) -> fx.GraphModule:
    """The conversion pass for `ctx.backend`: ATen graph -> vendor graph through its conversion
    table, every emitted node's result inferred on fake tensors. The first (or only) pass of a
    backend's `opset_transform`."""

    return OpTransformer(gm, ctx.backend, lambda node: infer_node(node, ctx.fake_mode)).run()


def _origin(node, result=False) -> Origin:
    return Origin(node.name, op_name(node.target), node.meta.get("stack_trace"), result)


def _mark_results(value, aten_node):
    """Flag the vendor nodes that hold `aten_node`'s value (a converter may also return a node
    converted earlier, e.g. its input for a no-op: that one keeps its own origin)."""
    for node in leaves(value, fx.Node):
        origin = node.meta.get(ORIGIN)
        if origin is not None and origin.node == aten_node.name:
            node.meta[ORIGIN] = dataclasses.replace(origin, result=True)
    return value


def is_size_arithmetic(node):
    """Arithmetic on symbolic sizes (sym_size, operator.mul on SymInts, ...): not an op."""
    return isinstance(
        node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)
    )


@functools.lru_cache(maxsize=None)
def _pattern_targets(pattern) -> frozenset:
    """The ops a pattern function calls (a graph lacking one of them cannot match)."""
    graph = fx.symbolic_trace(pattern).graph
    return frozenset(n.target for n in graph.nodes if n.op == "call_function")


def rewrite_patterns(gm: fx.GraphModule, rewrites) -> fx.GraphModule:
    """Apply (pattern, replacement, checker) rows; checker(match, original, pattern) -> bool."""
    present = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    for pattern, replacement, checker in rewrites:
        if not _pattern_targets(pattern) <= present:
            continue  # matching costs a full subgraph search; skip it when it cannot succeed
        filters = [checker] if checker is not None else []
        replace_pattern_with_filters(gm, pattern, replacement, filters)
    gm.graph.eliminate_dead_code(is_impure_node=_is_impure)
    gm.recompile()
    return gm


def _is_impure(node):
    """fx keeps ATen ops that mutate; a vendor op says so with `Operator.mutates`."""
    return node.is_impure() or getattr(node.target, "mutates", False)


def is_aten(target) -> bool:
    return isinstance(target, OpOverload)


# ---- the conversion table: ATen op -> converter rows, one per overload ----
class DuplicateConversionError(ValueError):
    pass


def overloads_of(aten_op):
    """Every OpOverload named by `aten_op` (an overload, a packet, or a list of them). A string
    stays as it is: it names an overload (`"prims.fma.default"`) that torch defines only when
    something first uses it, so the row is keyed by the name (OpTransformer looks both up)."""
    if isinstance(aten_op, (list, tuple)):
        return [overload for op in aten_op for overload in overloads_of(op)]
    if isinstance(aten_op, OpOverloadPacket):
        return [getattr(aten_op, name) for name in aten_op.overloads()]
    return [aten_op]


def register_conversion(table, aten_ops):
    """Decorator adding `fn` as the converter of `aten_ops` (packets expand to overloads)."""

    def decorator(fn):
        for overload in overloads_of(aten_ops):
            if overload in table:
                raise DuplicateConversionError(
                    f"{overload} already has a converter ({table[overload].__name__}); "
                    f"refusing to register {fn.__name__}"
                )
            table[overload] = fn
        return fn

    return decorator
