"""new_backendgraph's pointwise ops, one row each: everything the backend says about the op.

A row gives the op's vocabulary entry (its name, family and `impl`, the torch reference the
vendor op runs as), its conversion (the ATen ops converted to it one to one; none where a
converter in conversion.py has logic: alpha, rounding modes), its lowering (`compute`: one loop
IR op of the same name computed in the result's type, or in the promoted inputs' type, or a
lowering function of its own in codegen/lowering.py), its C++ rendering (`cpp`: a template over
the operands `{0}`, `{1}`... and the result type `{T}`), its Python rendering (the function of
the same name in codegen/py_runtime.py) and what it costs (codegen/costs.py). opset.py,
conversion.py, codegen/lowering.py, codegen/cpp_render.py and codegen/costs.py read this table;
test_pointwise_rows.py checks that every renderer has each row.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

aten = torch.ops.aten

# What an op costs per element (codegen/costs.py): about a load or an ALU instruction; a
# division; a call of a function (exp, erf, pow: the runtime header's or the C library's).
CHEAP, DIVIDE, CALL = "cheap", "divide", "call"


@dataclass(frozen=True)
class PointwiseOp:
    name: str
    family: str  # "unary", "binary" or "ternary"
    impl: Callable
    cpp: str
    cost: str
    aten: tuple = ()  # ATen ops (or overload packets) converted to it one to one
    compute: str = "output"  # "output", "input" (promoted inputs' type) or "custom"
    divides: bool = False  # whether it divides (integer arithmetic that divides is no index
    # arithmetic: kernel.py)
    integer_identity: bool = False  # the identity on integers (rounding ops)


def _unary(name, impl, aten_ops, cpp, cost, **fields):
    return PointwiseOp(name, "unary", impl, cpp, cost, _tuple(aten_ops), **fields)


def _binary(name, impl, aten_ops, cpp, cost, **fields):
    return PointwiseOp(name, "binary", impl, cpp, cost, _tuple(aten_ops), **fields)


def _tuple(aten_ops):
    return aten_ops if isinstance(aten_ops, tuple) else (aten_ops,)


ROUNDING = dict(integer_identity=True)
BY_INPUT = dict(compute="input")  # a comparison or test computes in its inputs' type
CUSTOM = dict(compute="custom")

POINTWISE = (
    _unary("Abs", torch.abs, aten.abs, "std::abs({0})", CHEAP),
    _unary("Neg", torch.neg, aten.neg, "-{0}", CHEAP),
    _unary("Exp", torch.exp, aten.exp, "dicp::exp<{T}>({0})", CALL),
    _unary("Log", torch.log, aten.log, "dicp::log<{T}>({0})", CALL),
    _unary("Sqrt", torch.sqrt, aten.sqrt, "std::sqrt({0})", CALL),
    _unary("Rsqrt", torch.rsqrt, aten.rsqrt, "({T}(1) / std::sqrt({0}))", CALL),
    _unary("Sin", torch.sin, aten.sin, "dicp::sin<{T}>({0})", CALL),
    _unary("Cos", torch.cos, aten.cos, "dicp::cos<{T}>({0})", CALL),
    _unary("Tan", torch.tan, aten.tan, "std::tan({0})", CALL),
    _unary("Tanh", torch.tanh, aten.tanh, "dicp::tanh<{T}>({0})", CALL),
    _unary(
        "Sigmoid", torch.sigmoid, aten.sigmoid, "({T}(1) / ({T}(1) + dicp::exp<{T}>(-{0})))", CALL
    ),
    _unary("Relu", torch.relu, aten.relu, "dicp::maximum<{T}>({0}, {T}(0))", CHEAP),
    _unary("Erf", torch.erf, aten.erf, "dicp::erf<{T}>({0})", CALL),
    _unary("Reciprocal", torch.reciprocal, aten.reciprocal, "({T}(1) / {0})", DIVIDE, divides=True),
    _unary("Floor", torch.floor, aten.floor, "std::floor({0})", CHEAP, **ROUNDING),
    _unary("Ceil", torch.ceil, aten.ceil, "std::ceil({0})", CHEAP, **ROUNDING),
    _unary("Round", torch.round, aten.round.default, "std::nearbyint({0})", CHEAP, **ROUNDING),
    _unary("Trunc", torch.trunc, aten.trunc, "std::trunc({0})", CHEAP, **ROUNDING),
    _unary("Sign", torch.sign, aten.sign, "dicp::sign<{T}>({0})", CHEAP),
    _unary("Log1p", torch.log1p, aten.log1p, "dicp::log1p<{T}>({0})", CALL),
    _unary("Expm1", torch.expm1, aten.expm1, "dicp::expm1<{T}>({0})", CALL),
    _unary("Log2", torch.log2, aten.log2, "std::log2({0})", CALL),
    _unary("Exp2", torch.exp2, aten.exp2, "std::exp2({0})", CALL),
    _unary("Log10", torch.log10, aten.log10, "std::log10({0})", CALL),
    _unary("Erfc", torch.erfc, aten.erfc, "std::erfc({0})", CALL),
    _unary("Atan", torch.atan, aten.atan, "std::atan({0})", CALL),
    _unary("Asin", torch.asin, aten.asin, "std::asin({0})", CALL),
    _unary("Acos", torch.acos, aten.acos, "std::acos({0})", CALL),
    _unary("Sinh", torch.sinh, aten.sinh, "std::sinh({0})", CALL),
    _unary("Cosh", torch.cosh, aten.cosh, "std::cosh({0})", CALL),
    _unary("Acosh", torch.acosh, aten.acosh, "std::acosh({0})", CALL),
    _unary("Asinh", torch.asinh, aten.asinh, "std::asinh({0})", CALL),
    _unary("Atanh", torch.atanh, aten.atanh, "std::atanh({0})", CALL),
    _unary("Signbit", torch.signbit, aten.signbit, "dicp::signbit({0})", CHEAP, **BY_INPUT),
    _unary("LogicalNot", torch.logical_not, aten.logical_not, "!{0}", CHEAP, **BY_INPUT),
    _unary("BitwiseNot", torch.bitwise_not, aten.bitwise_not, "~{0}", CHEAP, **CUSTOM),
    _unary("IsNan", torch.isnan, aten.isnan, "dicp::is_nan({0})", CHEAP, **BY_INPUT),
    _unary(
        "IsInf",
        torch.isinf,
        aten.isinf,
        "(std::abs(double({0})) == std::numeric_limits<double>::infinity())",
        CHEAP,
        **BY_INPUT,
    ),
    # Add and Sub take an alpha, Div a rounding mode: conversion.py converts them
    _binary("Add", torch.add, (), "({0} + {1})", CHEAP),
    _binary("Sub", torch.sub, (), "({0} - {1})", CHEAP),
    _binary("Mul", torch.mul, aten.mul, "({0} * {1})", CHEAP),
    _binary("Div", torch.div, (), "({0} / {1})", DIVIDE, divides=True),
    _binary(
        "FloorDiv",
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        (),
        "dicp::floordiv<{T}>({0}, {1})",
        CALL,
        divides=True,
    ),
    _binary(
        "TruncDiv",
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        (),
        "dicp::truncdiv<{T}>({0}, {1})",
        CALL,
        divides=True,
    ),
    _binary("Pow", torch.pow, aten.pow, "dicp::pow({0}, {1})", CALL, **CUSTOM),
    _binary("Maximum", torch.maximum, aten.maximum, "dicp::maximum<{T}>({0}, {1})", CHEAP),
    _binary("Minimum", torch.minimum, aten.minimum, "dicp::minimum<{T}>({0}, {1})", CHEAP),
    _binary(
        "Remainder",
        torch.remainder,
        aten.remainder,
        "dicp::pymod<{T}>({0}, {1})",
        CALL,
        divides=True,
    ),
    _binary("Fmod", torch.fmod, aten.fmod, "std::fmod({0}, {1})", CALL, divides=True, **CUSTOM),
    _binary("Atan2", torch.atan2, aten.atan2, "std::atan2({0}, {1})", CALL),
    _binary("Hypot", torch.hypot, aten.hypot, "std::hypot({0}, {1})", CALL),
    _binary("Copysign", torch.copysign, aten.copysign, "std::copysign({0}, {1})", CHEAP),
    _binary("Fmax", torch.fmax, aten.fmax, "dicp::fmax<{T}>({0}, {1})", CHEAP),
    _binary("Fmin", torch.fmin, aten.fmin, "dicp::fmin<{T}>({0}, {1})", CHEAP),
    _binary("BitwiseAnd", torch.bitwise_and, aten.bitwise_and, "({0} & {1})", CHEAP),
    _binary("BitwiseOr", torch.bitwise_or, aten.bitwise_or, "({0} | {1})", CHEAP),
    _binary("BitwiseXor", torch.bitwise_xor, aten.bitwise_xor, "({0} ^ {1})", CHEAP),
    _binary(
        "LogicalAnd",
        torch.logical_and,
        aten.logical_and,
        "(({0} != 0) && ({1} != 0))",
        CHEAP,
        **BY_INPUT,
    ),
    _binary(
        "LogicalOr",
        torch.logical_or,
        aten.logical_or,
        "(({0} != 0) || ({1} != 0))",
        CHEAP,
        **BY_INPUT,
    ),
    _binary(
        "LogicalXor",
        torch.logical_xor,
        aten.logical_xor,
        "(({0} != 0) != ({1} != 0))",
        CHEAP,
        **BY_INPUT,
    ),
    _binary("Eq", torch.eq, aten.eq, "({0} == {1})", CHEAP, **BY_INPUT),
    _binary("Ne", torch.ne, aten.ne, "({0} != {1})", CHEAP, **BY_INPUT),
    _binary("Lt", torch.lt, aten.lt, "({0} < {1})", CHEAP, **BY_INPUT),
    _binary("Le", torch.le, aten.le, "({0} <= {1})", CHEAP, **BY_INPUT),
    _binary("Gt", torch.gt, aten.gt, "({0} > {1})", CHEAP, **BY_INPUT),
    _binary("Ge", torch.ge, aten.ge, "({0} >= {1})", CHEAP, **BY_INPUT),
    PointwiseOp(
        "Where", "ternary", torch.where, "({0} ? {1} : {2})", CHEAP, (aten.where.self,), **CUSTOM
    ),
)

ROWS = {row.name: row for row in POINTWISE}
