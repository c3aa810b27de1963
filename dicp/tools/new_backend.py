"""Scaffold a dicp backend as its own pip package:

    python -m dicp.tools.new_backend NAME --dir DIR [--device emu]

writes DIR/NAME/: pyproject.toml (with the `torch_dynamo_backends` entry point), README.md, and
the package NAME/ (Backend spec, op vocabulary, conversion rows, a C++ kernel codegen with its
Jinja templates, the toolchain and compile job, declared expected fallbacks). After
`pip install DIR/NAME`, `torch.compile(model, backend="NAME")` works with nothing imported.
The files are copied from dicp/tools/backend_template/, with NAME put in for BACKEND_NAME.
With `--device DEVICE` the backend compiles for a device of its own (`emu`: dicp's emulated
accelerator) instead of the host: dicp/tools/backend_template_device/ adds a device layer
(device.py: allocation on the device, kernels launched on its stream, constants copied there;
device_codegen.py: the host codegen with them) over the same files.
"""

import argparse
import keyword
import shutil
import sys
from importlib import metadata
from pathlib import Path

TEMPLATE = Path(__file__).parent / "backend_template"
DEVICE_TEMPLATE = Path(__file__).parent / "backend_template_device"  # over TEMPLATE
PLACEHOLDER = "BACKEND_NAME"
# device -> the package registering it with torch (a vendor's own runtime for any other)
RUNTIMES = {"emu": "dicp.emu"}


class ScaffoldError(ValueError):
    """The backend cannot be created as asked (bad name, existing folder)."""


def check_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or name != name.lower():
        raise ScaffoldError(
            f"{name!r} is not a valid backend name: use a lower-case Python "
            f"identifier (letters, digits, underscores), e.g. my_chip"
        )
    taken = {entry.name for entry in metadata.entry_points(group="torch_dynamo_backends")}
    if name in taken:
        raise ScaffoldError(f"a torch.compile backend named {name!r} is already installed")


def create(name: str, directory: Path, device: str = "cpu") -> Path:
    """Write the package for backend `name` (compiling for `device`) under directory/name;
    returns that folder."""
    check_name(name)
    root = Path(directory) / name
    if root.exists():
        raise ScaffoldError(f"{root} exists; choose another --dir or remove it")
    names = {
        PLACEHOLDER: name,
        "BACKEND_DEVICE": device,
        "BACKEND_RUNTIME": RUNTIMES.get(device, f"{device}_runtime"),
        # the device template's codegen wraps the host's (device_codegen.py)
        "BACKEND_CODEGEN": "codegen" if device == "cpu" else "device_codegen",
    }
    _copy(TEMPLATE, root, names)
    if device != "cpu":
        _copy(DEVICE_TEMPLATE, root, names)
    return root


def _copy(template: Path, root: Path, names: dict) -> None:
    for source in sorted(template.rglob("*")):
        if source.is_dir() or "__pycache__" in source.parts:
            continue
        relative = source.relative_to(template)
        parts = [names[PLACEHOLDER] if part == "package" else part for part in relative.parts]
        target = root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text()
        for placeholder, value in names.items():
            text = text.replace(placeholder, value)
        target.write_text(text)
        shutil.copymode(source, target)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dicp.tools.new_backend", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", help="the backend's name, also its package's (e.g. my_chip)")
    parser.add_argument("--dir", default=".", help="where to create NAME/ (default: here)")
    parser.add_argument(
        "--device",
        default="cpu",
        help="the device it compiles for: cpu (the host, default) or a device "
        "type of its own, e.g. emu (dicp's emulated accelerator)",
    )
    args = parser.parse_args(argv)
    try:
        root = create(args.name, Path(args.dir), args.device)
    except ScaffoldError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(
        f"created {root}\nnext: pip install -e {root}   then   "
        f"torch.compile(model, backend={args.name!r})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
