from setuptools import find_packages, setup

# torch is pinned exactly: a looser pin makes pip fetch a multi-GB CUDA build.
setup(
    name="dicp",
    version="0.1.0",
    description="Device-Independent Compile Platform: plug a device into torch.compile",
    packages=find_packages(include=["dicp", "dicp.*"]),
    package_data={"dicp": ["vendor/*/codegen/templates/*.j2", "vendor/*/codegen/include/*.h"]},
    python_requires=">=3.10",
    install_requires=["torch==2.13.0", "jinja2>=3.0", "sympy>=1.12", "numpy"],
    extras_require={"test": ["pytest>=7", "pytest-xdist>=3", "cryptography>=41"]},
    entry_points={
        "torch_dynamo_backends": [
            "new_backendgraph = dicp.vendor.new_backendGraph:new_backendgraph",
        ],
    },
)
