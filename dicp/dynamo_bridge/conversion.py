"""The conversion-table decorator: ATen op -> converter rows, one per overload."""
from .torch_compat import OpOverloadPacket


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
                    f"refusing to register {fn.__name__}")
            table[overload] = fn
        return fn
    return decorator
