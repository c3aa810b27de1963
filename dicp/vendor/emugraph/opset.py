"""emugraph's vocabulary: new_backendgraph's ops, its library kernels run as the device's own
eager ops. new_backendgraph's tuned host products (gemm.py: oneDNN or MKL chosen by timing host
operands) read host memory; on the device a product is the device's `mm`, which it runs on its
stream (or its CPU fallback runs, with copies)."""

from ..new_backendGraph.opset import OPS as HOST_OPS


def _on_device(op):
    """`op` itself, or for a library op with a host kernel a variant whose kernel is its `impl`
    (the ATen op) on device tensors. It returns new memory rather than write into `out=`
    (Operator.writes_out allows it): the device's `mm` takes no `out`."""
    if op.kernel is None:
        return op
    impl = op.impl

    def kernel(*args, out=None, **kwargs):
        return impl(*args, **kwargs)

    return type(op.name, (type(op),), {"kernel": staticmethod(kernel)})()


OPS = {name: _on_device(op) for name, op in HOST_OPS.items()}
