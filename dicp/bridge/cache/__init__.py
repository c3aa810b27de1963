"""The caches: builds (`build`), conversion and codegen results (`graph`), AOTAutograd's whole
result (`aot`), and torch's precompile and AOTAutogradCache (`precompile`)."""
