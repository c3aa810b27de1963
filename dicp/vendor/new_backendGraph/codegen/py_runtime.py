"""What kernels printed by the Python renderer (py_render.py) run on: memory through raw
pointers, the IR's types as Python values, and one function per loop IR op, the Python
meaning of each row of cpp_render.OPS.

Values keep their IR type: "float" is numpy.float32 (every op rounds to float, as in C++),
"double" numpy.float64, integer types are Python ints wrapped to their width after each op,
"bool" a Python bool. Transcendentals are numpy's, not the runtime header's: results agree
with the C++ kernels to a few ulps, not bit for bit.
"""

import ctypes
import math

import numpy as np

_STORAGE = {
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "int64_t": ctypes.c_int64,
    "int32_t": ctypes.c_int32,
    "int16_t": ctypes.c_int16,
    "int8_t": ctypes.c_int8,
    "uint8_t": ctypes.c_uint8,
    "bool": ctypes.c_bool,
    "dicp::half_t": ctypes.c_uint16,
    "dicp::bf16_t": ctypes.c_uint16,
}
_INT_BITS = {
    "int64_t": (64, True),
    "int32_t": (32, True),
    "int16_t": (16, True),
    "int8_t": (8, True),
    "uint8_t": (8, False),
    "int": (32, True),
}
_FLOATS = {"float": np.float32, "double": np.float64}


# ---- types ----


def value(type_, x):
    """`x` as a value of IR type `type_` (C++'s static_cast, as the C++ kernels convert)."""
    if type_ in _FLOATS:
        if isinstance(x, (bool, np.bool_)):
            x = int(x)
        with np.errstate(all="ignore"):
            return _FLOATS[type_](x)
    if type_ == "bool":
        return bool(x)
    if isinstance(x, (float, np.floating)):
        x = int(x) if math.isfinite(x) else 0  # toward zero; numpy's float32 has no __trunc__
    return _wrap(int(x), type_)


def _wrap(x, type_):
    bits, signed = _INT_BITS[type_]
    x &= (1 << bits) - 1
    return x - (1 << bits) if signed and x >> (bits - 1) else x


def _is_float(x):
    return isinstance(x, (float, np.floating))


# ---- memory ----


class Pointer:
    """Elements of storage type `storage` from address `address` on: p[i] reads or writes the
    i-th (i may be negative, as a C++ pointer's). With `lo` and `hi` (DICP_BOUNDS_CHECK), an
    element outside [lo, hi), its tensor's storage, raises IndexError."""

    def __init__(self, address, storage, lo=None, hi=None):
        self.address, self.storage, self.lo, self.hi = address, storage, lo, hi
        self.ctype = _STORAGE[storage]
        self.size = ctypes.sizeof(self.ctype)

    def _cell(self, i):
        if self.lo is not None and not self.lo <= i < self.hi:
            raise IndexError(f"dicp kernel: element {i} outside its storage [{self.lo}, {self.hi})")
        return self.ctype.from_address(self.address + int(i) * self.size)

    def __getitem__(self, i):
        raw = self._cell(i).value
        if self.storage == "dicp::half_t":
            return np.float32(np.array([raw], np.uint16).view(np.float16)[0])
        if self.storage == "dicp::bf16_t":
            return np.array([raw << 16], np.uint32).view(np.float32)[0]
        return raw

    def __setitem__(self, i, x):
        self._cell(i).value = _to_storage(self.storage, x)


def _to_storage(storage, x):
    if storage == "dicp::half_t":
        return int(np.array([x], np.float32).astype(np.float16).view(np.uint16)[0])
    if storage == "dicp::bf16_t":
        return int(_round_bf16_bits(np.float32(x)))
    if storage in _FLOATS:
        return float(value(storage, x))
    return value(storage, x)


def _round_bf16_bits(x):
    bits = int(np.array([x], np.float32).view(np.uint32)[0])
    if math.isnan(x):
        return 0x7FC0
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def array(dims, zero):
    """A local array of `dims` (nested lists), every element `zero`."""
    if len(dims) == 1:
        return [zero] * dims[0]
    return [array(dims[1:], zero) for _ in range(dims[0])]


def limit(type_, which):
    """numeric_limits<type_>::lowest() or max()."""
    if type_ in _FLOATS:
        largest = np.finfo(_FLOATS[type_]).max
        return value(type_, -largest if which == "lowest" else largest)
    bits, signed = _INT_BITS[type_]
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return low if which == "lowest" else high


def load(pointer, position, type_):
    return cast(type_, pointer[position])


def store(pointer, position, x):
    pointer[position] = x


# ---- conversions (cpp_render.LOOP) ----


def cast(type_, x):
    """dicp::cast: an integer 0 converts to +0 (never trunc's -0), bool to 0/1."""
    if type_ in _FLOATS and not _is_float(x):
        return value(type_, int(x)) + value(type_, 0)
    return value(type_, x)


def StaticCast(type_, x):
    return value(type_, x)


def FloatToInt(type_, x):
    return value(type_, value("int64_t", x))


def ToBool(type_, x):
    return x != 0


def RoundTo(type_, x, half):
    return value("float", Pointer_roundtrip(half, x))


def Pointer_roundtrip(half, x):
    """`x` rounded to half type `half` and back to float."""
    if half == "dicp::half_t":
        return np.float32(np.float16(np.float32(x)))
    bits = _round_bf16_bits(np.float32(x))
    return np.array([bits << 16], np.uint32).view(np.float32)[0]


def StoreRound(type_, x, storage):
    if storage in ("dicp::half_t", "dicp::bf16_t"):
        return value(type_, Pointer_roundtrip(storage, x))
    return value(type_, value(storage, x))


Cast = cast


# ---- arithmetic ----


def _arithmetic(fn):
    """An op computing in its type: floats round to it, integers wrap to its width."""

    def op(type_, *args):
        if type_ in _FLOATS:
            with np.errstate(all="ignore"):
                return value(type_, fn(*(value(type_, a) for a in args)))
        return value(type_, fn(*(int(a) for a in args)))

    return op


Add = _arithmetic(lambda a, b: a + b)
Sub = _arithmetic(lambda a, b: a - b)
Mul = _arithmetic(lambda a, b: a * b)


def Div(type_, a, b):
    if type_ in _FLOATS:
        with np.errstate(all="ignore"):
            return value(type_, value(type_, a) / value(type_, b))
    return value(type_, _truncdiv_int(int(a), int(b)))


def _truncdiv_int(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _float_floordiv(a, b):
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0 and (b < 0) != (mod < 0):
        div -= 1
    if div == 0:
        return np.copysign(0.0, a / b)
    floored = np.floor(div)
    return floored + 1 if div - floored > 0.5 else floored


def FloorDiv(type_, a, b):
    if type_ in _FLOATS:
        with np.errstate(all="ignore"):
            return value(type_, _float_floordiv(value(type_, a), value(type_, b)))
    return value(type_, int(a) // int(b))


def TruncDiv(type_, a, b):
    if type_ in _FLOATS:
        with np.errstate(all="ignore"):
            return value(type_, np.trunc(value(type_, a) / value(type_, b)))
    return value(type_, _truncdiv_int(int(a), int(b)))


def Remainder(type_, a, b):
    if type_ in _FLOATS:
        with np.errstate(all="ignore"):
            r = np.fmod(value(type_, a), value(type_, b))
            return value(type_, r + b if r != 0 and (r < 0) != (b < 0) else r)
    return value(type_, int(a) % int(b))


def IMod(type_, a, b):
    return value(type_, int(a) - _truncdiv_int(int(a), int(b)) * int(b))


def Maximum(type_, a, b):
    if _is_float(a) and (math.isnan(a) or math.isnan(b)):
        return value(type_, a + b)
    return b if b > a else a


def Minimum(type_, a, b):
    if _is_float(a) and (math.isnan(a) or math.isnan(b)):
        return value(type_, a + b)
    return b if b < a else a


def Relu(type_, x):
    return Maximum(type_, x, value(type_, 0))


def Neg(type_, x):
    return value(type_, -x)


def Abs(type_, x):
    return value(type_, abs(x))


def Sign(type_, x):
    return value(type_, int(0 < x) - int(x < 0))  # numpy's bools do not subtract


def Reciprocal(type_, x):
    return Div(type_, value(type_, 1), x)


def Rsqrt(type_, x):
    return Reciprocal(type_, Sqrt(type_, x))


def Sigmoid(type_, x):
    return Reciprocal(type_, Add(type_, value(type_, 1), Exp(type_, Neg(type_, x))))


def Pow(type_, a, b):
    with np.errstate(all="ignore"):
        return value(type_, np.power(value(type_, a), value(type_, b)))


def IPow(type_, base, exponent):
    """dicp::ipow: a negative exponent keeps 1 and -1 at magnitude 1 and takes the rest to 0;
    a positive one wraps as the C++ product does (the power modulo 2^64)."""
    base, exponent = int(base), int(exponent)
    if exponent < 0:
        return value(type_, 1 if base == 1 else (-1) ** (exponent & 1) if base == -1 else 0)
    return value(type_, pow(base, exponent, 1 << 64))


def _numpy(fn):
    def op(type_, *args):
        with np.errstate(all="ignore"):
            return value(type_, fn(*[value(type_, a) for a in args]))

    return op


Exp, Log, Sqrt, Sin, Cos, Tan, Tanh = map(
    _numpy, (np.exp, np.log, np.sqrt, np.sin, np.cos, np.tan, np.tanh)
)
Floor, Ceil, Round, Trunc = map(_numpy, (np.floor, np.ceil, np.rint, np.trunc))
Log1p, Expm1, Log2, Exp2 = map(_numpy, (np.log1p, np.expm1, np.log2, np.exp2))
Log10 = _numpy(np.log10)
Atan, Asin, Acos, Sinh, Cosh = map(_numpy, (np.arctan, np.arcsin, np.arccos, np.sinh, np.cosh))
Atan2, Fmod = map(_numpy, (np.arctan2, np.fmod))
Acosh, Asinh, Atanh = map(_numpy, (np.arccosh, np.arcsinh, np.arctanh))
Hypot, Copysign, Fmax, Fmin = map(_numpy, (np.hypot, np.copysign, np.fmax, np.fmin))


def Signbit(type_, x):
    return bool(np.signbit(x))


def Erf(type_, x):
    return value(
        type_,
        math.erf(float(x))
        if math.isfinite(x)
        else (math.copysign(1.0, x) if not math.isnan(x) else x),
    )


ErfCentral = Erf  # erf on |x| < 1 (value_range.py): the same function


def Erfc(type_, x):
    return value(type_, math.erfc(float(x)) if not math.isnan(x) else x)


def IsNan(type_, x):
    return bool(_is_float(x) and math.isnan(x))


def IsInf(type_, x):
    return bool(_is_float(x) and math.isinf(x))


def LogicalNot(type_, x):
    return not x


def BitwiseNot(type_, x):
    return value(type_, ~int(x))


def _bitwise(fn):
    return lambda type_, a, b: value(type_, fn(int(a), int(b)))


BitwiseAnd = _bitwise(lambda a, b: a & b)
BitwiseOr = _bitwise(lambda a, b: a | b)
BitwiseXor = _bitwise(lambda a, b: a ^ b)


def LogicalAnd(type_, a, b):
    return (a != 0) and (b != 0)


def LogicalOr(type_, a, b):
    return (a != 0) or (b != 0)


def LogicalXor(type_, a, b):
    return (a != 0) != (b != 0)


def Eq(type_, a, b):
    return bool(a == b)


def Ne(type_, a, b):
    return bool(a != b)


def Lt(type_, a, b):
    return bool(a < b)


def Le(type_, a, b):
    return bool(a <= b)


def Gt(type_, a, b):
    return bool(a > b)


def Ge(type_, a, b):
    return bool(a >= b)


def All(type_, a, b):
    return bool(a and b)


def Where(type_, condition, a, b):
    return a if condition else b


def Iota(type_, first, i, step):
    return Add(type_, first, Mul(type_, value(type_, i), step))


def Tril(type_, row, col, diagonal, x):
    return x if col - row <= diagonal else value(type_, 0)


def Triu(type_, row, col, diagonal, x):
    return x if col - row >= diagonal else value(type_, 0)


def Better(type_, x, acc, comparison):
    return x if (x > acc if comparison == ">" else x < acc) else acc


def IsNanCompare(type_, x):
    return bool(x != x)


def ArgBetter(type_, x, best, best_index, comparison):
    wins = x > best if comparison == ">" else x < best
    return best_index < 0 or bool(wins) or (IsNan(type_, x) and not IsNan(type_, best))


def PoolBetter(type_, inside, x, best, best_index):
    return bool(inside) and (best_index < 0 or x > best or IsNan(type_, x))


def Pick(type_, condition, x, y):
    return x if condition else y


def WrapIndex(type_, index, size):
    return index + size if index < 0 else index


def CheckedIndex(type_, index, size, site):
    if not -size <= index < size:
        raise IndexError(f"{site} {index}, outside [-{size}, {size})")
    return WrapIndex(type_, index, size)


def InjectedCompileError(type_, x):
    raise NameError("dicp_injected_compile_error_TESTING_ONLY")


# ---- index arithmetic (cpp_render.cpp_expr's functions) ----


def floordiv(a, b):
    return a // b


def truncdiv_index(a, b):
    return _truncdiv_int(a, b)


def cmod(a, b):
    """C++'s % on integers: the sign of the dividend."""
    return a - _truncdiv_int(a, b) * b
