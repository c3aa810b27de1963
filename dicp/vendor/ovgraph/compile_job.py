"""ovgraph's compile job: build each engine subgraph's Model once, compile it once for the
configured device (and precision hint), then run the wrapper with them."""

from dicp.api import config, load_wrapper

from .runtime import EnginePart


def build_models(generated, path=None) -> dict:
    """The OpenVINO Models of a generated graph, by subgraph name."""
    if not generated.metadata["parts"]:
        return {}
    scope = {}
    source = generated.files["models.py"]
    exec(compile(source, path or f"<dicp {generated.name} models>", "exec"), scope)
    return {name: build() for name, build in scope["BUILDERS"].items()}


def compile_job(generated, ctx):
    models = build_models(generated, ctx.source_path("models.py"))
    engine = {
        name: EnginePart(model, config.ovgraph_device, f"{generated.name} {name}")
        for name, model in models.items()
    }
    return load_wrapper(generated, {"engine": engine}, ctx.source_path("wrapper.py"))
