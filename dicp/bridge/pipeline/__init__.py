"""One graph's way through a backend: the Backend spec and registry, conversion (ATen -> vendor
ops), decompositions, shape inference, the codegen base and the wrapper it writes, and the
helpers these share (sizes as sympy, op names, provenance, fallbacks, torch internals)."""
