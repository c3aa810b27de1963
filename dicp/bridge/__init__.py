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
