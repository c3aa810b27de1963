"""The fast subset of the OpInfo suite, run by `python -m pytest test` (test_opinfo.py): a few
ops of each family, chosen so that every kind of lowering the backend has is reached, including
the NN ops whose kernels store through computed indices (issue 18): pooling with padding,
ceil_mode and dilation and its backward, interpolation in every mode, cumulative ops, scatter,
gather and index ops."""

FAST_OPS = [
    # pointwise: unary, binary with broadcasting and type promotion, ternary, comparisons
    "abs",
    "sigmoid",
    "add",
    "div.floor_rounding",
    "where",
    "clamp",
    "eq",
    # reductions
    "sum",
    "amax",
    "argmax",
    "std",
    "logsumexp",
    # layout and views
    "cat",
    "transpose",
    "expand",
    "narrow",
    "flip",
    "select",
    # indexing: gather, scatter (duplicate indices), index ops
    "gather",
    "scatter_add",
    "scatter_reduce.sum",
    "index_select",
    "index_add",
    "index_put",
    "take_along_dim",
    "nn.functional.embedding",
    # cumulative
    "cumsum",
    "cummax",
    "logcumsumexp",
    # NN: pooling (padding, ceil_mode, dilation), interpolation, normalization, losses, conv
    "nn.functional.max_pool2d",
    "nn.functional.max_pool1d",
    "nn.functional.avg_pool2d",
    "nn.functional.adaptive_max_pool2d",
    "nn.functional.interpolate.nearest",
    "nn.functional.interpolate.bilinear",
    "nn.functional.interpolate.bicubic",
    "nn.functional.interpolate.linear",
    "nn.functional.layer_norm",
    "softmax",
    "nn.functional.cross_entropy",
    "nn.functional.conv2d",
    # matmul, sort
    "matmul",
    "sort",
    "topk",
]
