"""The debugging tools on a model nobody here wrote: Hugging Face GPT-2 (built from a config, no
download) with a fault injected into one op's generated code. Autocompare names the op and
its line in transformers' source, bisect finds it, and the dump, profile and config commands
print what docs/debugging.md describes. Real subprocesses, as a user runs them."""

import os
import subprocess
import sys
import textwrap

import pytest
from test.common.shared_builds import child_environment


FAULT = "aten.tanh.default:accuracy"  # GPT-2's gelu_new is the only tanh in the model

SCRIPT = """
    import sys
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 64, (2, 8))
    with torch.no_grad():
        out = torch.compile(model, backend="new_backendgraph")(ids).logits
        ref = model(ids).logits
    print("max diff", (out - ref).abs().max().item())
    sys.exit(0 if torch.allclose(out, ref, atol=1e-3, rtol=1e-3) else 1)
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    (folder / "gpt2.py").write_text(textwrap.dedent(SCRIPT))
    return folder


def run(workspace, *command, **knobs):
    return subprocess.run(
        [sys.executable, *command],
        cwd=workspace,
        env=child_environment(workspace / "cache", **knobs),
        capture_output=True,
        text=True,
        timeout=3000,
    )


def test_autocompare_dump_and_profile_on_gpt2(workspace):
    dump = workspace / "ops.txt"
    result = run(
        workspace,
        "gpt2.py",
        DICP_INJECT_BUG_TESTING_ONLY=FAULT,
        DICP_AUTOCOMPARE="1",
        DICP_DUMP_OP_ARGS="2",
        DICP_DUMP_OP_ARGS_FILE=str(dump),
        DICP_PROFILE="1",
    )
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]  # the fault is real
    report = result.stderr[result.stderr.index("dicp autocompare") :]
    assert "first diverging op: aten.tanh.default" in report, report
    assert "vendor ops: Tanh" in report, report
    source = next(line for line in report.splitlines() if "source:" in line)
    assert os.path.join("transformers", "activations.py:") in source, report
    assert "torch.tanh" in report.split(source)[1].splitlines()[1]
    assert "module: self.transformer.h.0.mlp.act (NewGELUActivation)" in report
    tanh = next(line for line in dump.read_text().splitlines() if " aten.tanh.default " in line)
    assert "[Tanh]" in tanh and "activations.py" in tanh
    table = result.stderr[result.stderr.index("dicp compile profile") :]
    for row in (
        "dynamo",
        "aot_autograd",
        "conversion",
        "codegen",
        "build",
        "load",
        "graphs (inference)",
        "kernels",
        "generic.py",
    ):  # GPT-2's decorated forward
        assert row in table, table


def test_bisect_finds_the_faulty_op_in_gpt2(workspace):
    result = run(
        workspace,
        "-m",
        "dicp.tools.bisect",
        "--repro-dir",
        "repros",
        "gpt2.py",
        DICP_INJECT_BUG_TESTING_ONLY=FAULT,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "culprit: aten.tanh.default (" in result.stdout, result.stdout
    assert "(exits 1 while the bug is there)" in result.stdout, result.stdout


def test_config_command_shows_the_fault_knob(workspace):
    result = run(workspace, "-m", "dicp.config", DICP_INJECT_BUG_TESTING_ONLY=FAULT)
    row = next(
        line
        for line in result.stdout.splitlines()
        if line.startswith("DICP_INJECT_BUG_TESTING_ONLY")
    )
    assert row.split()[1:3] == [FAULT, "environment"], row
