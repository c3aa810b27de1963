"""dicp.api is the vendor contract: every name it exports, every Backend field and every Protocol
is documented (docs/vendor.md, docstrings), and the optional fields have real defaults."""

import dataclasses
import re
from pathlib import Path

import pytest

import dicp
from dicp import api

VENDOR_DOC = (Path(dicp.__file__).parent.parent / "docs" / "vendor.md").read_text()
PROTOCOLS = [
    api.OpsetTransform,
    api.Codegen,
    api.CompileJob,
    api.Converter,
    api.DecompositionFactory,
]


@pytest.mark.parametrize("name", api.__all__)
def test_every_public_name_is_documented(name):
    assert re.search(r"`[^`\n]*\b" + re.escape(name) + r"\b", VENDOR_DOC), (
        f"dicp.api.{name} is missing from docs/vendor.md"
    )


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(api.Backend)])
def test_every_backend_field_is_in_the_table(field):
    assert f"| `{field}` |" in VENDOR_DOC, f"Backend.{field} is missing from docs/vendor.md"


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_every_protocol_says_its_contract(protocol):
    assert protocol.__call__.__doc__, f"{protocol.__name__}.__call__ has no docstring"
    assert f"| `{protocol.__name__}` |" in VENDOR_DOC


def test_optional_fields_have_real_defaults():
    def noop(*args):
        return args

    backend = api.Backend(name="defaults_xyz", opset_transform=noop, codegen=noop, compile_job=noop)
    assert backend.conversion_table == "the conversion table of defaults_xyz"
    assert backend.decomposition_table() == {}
    assert backend.dtype_fallbacks == {} and backend.expected_fallbacks == {}
    assert backend.supported_dtypes == frozenset() and backend.device == "cpu"
    factory = dataclasses.replace(backend, decompositions=lambda: {"op": noop})
    assert factory.decomposition_table() == {"op": noop}
