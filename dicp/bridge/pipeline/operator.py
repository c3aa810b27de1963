"""Base class of vendor ops: a name plus a shape rule evaluated on fake tensors."""

import torch.fx


class InferenceError(RuntimeError):
    """Shape/dtype inference of a vendor op failed; the message names the op."""


class Operator:
    """A vendor op. Subclasses set `name` and implement `impl` with torch tensor ops.

    `impl` is the op's reference semantics: run on fake tensors it is the shape rule
    (`infer_result`), run on real tensors it is the op's Python kernel.
    """

    name = "Operator"
    mutates = False  # writes into an argument: never dead code, even without users
    # The op's kernel on real tensors where it is not `impl` (a faster library with other
    # rounding): compiled graphs call the op, shape inference calls `impl`.
    kernel = None
    # Its result is new memory that no argument, input or other value shares (a matrix
    # product, a convolution): a kernel reading it last may write its own output into it. A
    # tuple of new tensors (an attention's output and log-sum-exp) qualifies too: the call
    # keeps no view of its arguments (WrapperBuilder.keeps_no_views).
    fresh_result = False
    # Its kernel (or impl) takes `out=`, memory of the result's layout that no argument
    # shares, and returns the tensor it wrote: `out`, or new memory where it could not use it.
    # The wrapper then passes a dead buffer's memory instead of allocating (fresh results only).
    writes_out = False

    def __init__(self):
        self.__name__ = self.name
        self.__qualname__ = self.name

    def impl(self, *args, **kwargs):
        raise NotImplementedError(f"vendor op {self.name} has no reference implementation")

    def infer_result(self, *args, **kwargs):
        try:
            return self.impl(*args, **kwargs)
        except Exception as error:
            raise InferenceError(
                f"shape inference failed for vendor op {self.name}: {type(error).__name__}: {error}"
            ) from error

    def __call__(self, *args, **kwargs):
        proxy = next((a for a in args if isinstance(a, torch.fx.Proxy)), None)
        if proxy is not None:  # traced inside a rewrite pattern: record the op itself
            return proxy.tracer.create_proxy("call_function", self, args, kwargs)
        return (self.kernel or self.impl)(*args, **kwargs)

    def runtime_kernel(self):
        """What a compiled wrapper calls: the op itself where a subclass redefines calling,
        else its kernel directly, without the tracing check (a microsecond per call)."""
        if type(self).__call__ is not Operator.__call__:
            return self
        return self.kernel or self.impl

    def __repr__(self):
        return self.name
