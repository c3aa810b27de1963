"""The bridge: what every backend shares between torch.compile and its own code.

Layers, each importing only those below it (import-linter checks this, see pyproject.toml):

    entry.py    the entry from dynamo: AOTAutograd, the caches and the debugging hooks around
                the pipeline's stages, for each graph
    debug/      tools that wrap a compiled graph through the pipeline's hooks: autocompare,
                op-argument dumps, repros, fault injection
    cache/      the build cache, the graph cache, the AOT cache, torch's precompile
    pipeline/   one graph's stages: the backend spec and registry, conversion, decompositions,
                shape inference, the codegen base and wrapper, and what they share
"""

import time

# The compile profile's import stage starts here: the first of dicp's modules a backend's
# import loads that is not cheap (dicp.api imports the bridge first); it ends when the backend
# registers (dicp.api.register_backend).
IMPORT_STARTED = time.perf_counter()
