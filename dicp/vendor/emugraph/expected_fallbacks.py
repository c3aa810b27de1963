"""The ATen ops emugraph knowingly runs as eager fallback (the device's eager ops), each with its
reason: new_backendgraph's, since the kernels are its kernels."""

from ..new_backendGraph.expected_fallbacks import EXPECTED_FALLBACKS as HOST_FALLBACKS

EXPECTED_FALLBACKS = dict(HOST_FALLBACKS)
