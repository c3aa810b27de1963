"""torch finds new_backendgraph through its entry point; importing dicp changes nothing in torch.

Each check runs in a fresh interpreter so that nothing this test session imported leaks in.
The torch checks share one interpreter (a first compile costs seconds) and report as JSON.
"""

import json

import pytest

from .helpers import check_fresh, cold_cache  # noqa: F401  (fixture)

TORCH_SCRIPT = """
import json
import sys
import torch
import torch._decomp as decomp
from torch._decomp import core_aten_decompositions

report = {"listed": "new_backendgraph" in torch._dynamo.list_backends(),
          "dicp_after_list": "dicp" in sys.modules}


def snapshot():
    # core_aten_decompositions() builds fresh values each call: compare its keys only.
    return dict(decomp.decomposition_table), set(core_aten_decompositions())


def fn(x, y):
    return torch.nn.functional.gelu(x * y).softmax(-1).sum(0)


x, y = torch.randn(6, 8), torch.randn(6, 8)
# torch fills some tables lazily during its first compile: warm up without dicp. Importing
# Inductor's lowerings registers torch's quantized decompositions; dicp's AOT cache imports them
# on a miss, through torch's cache key.
torch.compile(fn, backend="aot_eager")(x, y)
import torch._inductor.lowering  # noqa: E402,F401
torch._dynamo.reset()
table_before, core_before = snapshot()
out = torch.compile(fn, backend="new_backendgraph")(x, y)
table_after, core_after = snapshot()
report["matches_eager"] = torch.allclose(out, fn(x, y), rtol=1.3e-5, atol=1e-5)
report["went_through_dicp"] = "dicp.vendor.new_backendGraph" in sys.modules
report["table_len"] = [len(table_before), len(table_after)]
replaced = {k for k in table_before if table_after.get(k) is not table_before[k]}
report["table_changed"] = sorted(str(k) for k in (set(table_before) ^ set(table_after)) | replaced)
report["core_changed"] = sorted(str(k) for k in core_before ^ core_after)
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def torch_report(tmp_path_factory):
    return json.loads(check_fresh(TORCH_SCRIPT, tmp_path_factory.mktemp("dicp-cache")))


def test_torch_lists_backend_without_importing_dicp(torch_report):
    assert torch_report["listed"]
    assert not torch_report["dicp_after_list"], "list_backends imported dicp eagerly"


def test_compile_by_name_matches_eager(torch_report):
    assert torch_report["went_through_dicp"]
    assert torch_report["matches_eager"]


def test_compiling_leaves_torch_decomposition_tables_untouched(torch_report):
    length_before, length_after = torch_report["table_len"]
    assert length_before == length_after
    assert torch_report["table_changed"] == []
    assert torch_report["core_changed"] == []


def test_import_dicp_does_not_import_torch(cold_cache):
    verdict = check_fresh(
        """
        import sys
        import dicp
        print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
    """,
        cold_cache,
    )
    assert verdict == "[]"
