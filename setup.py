import runpy
from pathlib import Path

from setuptools import find_packages, setup

# The supported torch range lives in one file that imports neither torch nor dicp. A torch
# already installed in that range (including a vendor's local or pre-release build) is kept;
# with none installed, pip takes the newest release in the range.
SUPPORTED = runpy.run_path(str(Path(__file__).parent / "dicp" / "supported_torch.py"))

setup(
    name="dicp",
    version="0.1.0",
    description="Device-Independent Compile Platform: plug a device into torch.compile",
    packages=find_packages(include=["dicp", "dicp.*"]),
    package_data={
        "dicp": [
            "vendor/*/codegen/templates/*.j2",
            "vendor/*/codegen/include/*.h",
            "bridge/pipeline/templates/*.j2",
            "emu/csrc/*.cpp",
            "emu/csrc/*.h",
            "vendor/*/templates/*.j2",
            "tools/backend_template/*",
            "tools/backend_template/*/*",
            "tools/backend_template/*/*/*",
            "tools/backend_template_device/*/*",
            "tools/backend_template_device/*/*/*",
        ]
    },
    python_requires=">=3.10",
    # ninja: torch's extension builder needs it to build dicp.emu's runtime on first import
    install_requires=[
        SUPPORTED["TORCH_REQUIREMENT"],
        "jinja2>=3.0",
        "sympy>=1.12",
        "numpy",
        "packaging",
        "ninja",
    ],
    # transformers: the debugging tools are tested on Hugging Face GPT-2 (built from a config);
    # expecttest: torch's OpInfo database imports it; openvino: the ovgraph backend's SDK;
    # setuptools>=70.1: the scaffold test builds a generated backend without build isolation,
    # and older setuptools (a new venv's 65.5) cannot build a wheel without the `wheel` package;
    # ruff, import-linter, mypy: the lint, import-layer and type checks of .ci/run (pinned: a
    # new release's new rules must not fail CI unannounced)
    extras_require={
        "test": [
            "pytest>=7",
            "pytest-xdist>=3",
            "cryptography>=41",
            "transformers",
            "expecttest",
            "openvino>=2024.0",
            "setuptools>=70.1",
            "ruff==0.17.6",
            "import-linter==2.17",
            "mypy==2.4.1",
        ]
    },
    entry_points={
        "torch_dynamo_backends": [
            "new_backendgraph = dicp.vendor.new_backendGraph:new_backendgraph",
            "ovgraph = dicp.vendor.ovgraph:ovgraph",
            "emugraph = dicp.vendor.emugraph:emugraph",
        ],
    },
)
