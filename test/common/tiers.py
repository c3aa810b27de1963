"""The slow tier: tests the default run leaves out and `.ci/run` runs as a step of its own.

The default suite must finish in 30 minutes on CI's 2-core machine with an empty cache; with
everything in it, it took 37. The tests below are the costliest of a cold run (10-80 s each),
or a second sweep, whose code paths a faster test of the default suite also takes: a model's
dynamic variant (its static one stays), OpInfo's dynamic pass (the op suite runs every op
dynamic), a tool's end-to-end runs next to its unit tests (the fuzzer's, bisect's). They are
not optional: CI fails if one fails.

    pytest test -n auto             # the default suite (the slow tier deselected, and counted)
    pytest test -n auto -m slow     # the slow tier only (CI's step)
    pytest test -n auto --with-slow # everything
A `-m` expression of one's own selects from every test, slow ones included, and a test
named by its id (`pytest "test/model/test_resnet50.py::TestResNet50::test_sgd_train_steps"`)
runs whatever its tier.
"""

import pytest

SLOW = (
    "model/test_resnet50.py::TestResNet50::test_sgd_train_steps[dynamic]",
    "model/test_stable_diffusion.py::TestStableDiffusion::test_ddim_denoising[dynamic-float32]",
    "model/test_llama.py::TestLlama::test_greedy_generation[dynamic-float32]",
    "model/test_llama_finetune.py::TestLlamaFinetune::test_lora_adamw[dynamic]",
    "model/test_distributed.py::TestDistributed::test_ddp_matches_single_process[dynamic]",
    "model/test_distributed.py::TestDistributed::test_ddp_matches_single_process[static]",
    "model/test_transformer_training.py::TestTransformerTraining::"
    "test_dropout_training_matches_eager_with_fallback_random[dynamic]",
    "tools/test_fuzz.py::test_fixed_seed_run_finds_no_mismatch[static]",
    "tools/test_fuzz.py::test_fixed_seed_run_finds_no_mismatch[dynamic]",
    "opinfo/test_opinfo.py::test_opinfo[nn.functional.interpolate.bicubic-static]",
    "opinfo/test_opinfo.py::test_opinfo[nn.functional.interpolate.bicubic-grad]",
    "tools/test_fuzz.py::test_cold_warm_runs_twice_and_compares",
    "tools/test_fuzz.py::test_an_injected_wrong_result_is_found_shrunk_and_reproduced",
    "tools/test_bisect.py::test_exit_status_oracle_finds_an_op_that_breaks_the_build",
    "tools/test_bisect.py::test_autocompare_oracle_finds_the_faulty_op_and_writes_a_repro",
    "tools/test_debug_tools_gpt2.py::test_bisect_finds_the_faulty_op_in_gpt2",
    "tools/test_new_backend.py::test_op_suite_runs_against_it_in_strict_mode",
    "unit/test_cold_warm.py::test_a_warm_run_equal_to_the_cold_one_passes",
    "unit/test_cold_warm.py::test_a_warm_run_that_computes_otherwise_fails",
    "unit/test_op_harness.py::test_inputs_are_seeded_per_test",
    "unit/test_tiers.py::test_the_slow_tier_names_only_collected_tests_and_runs_alone_under_m_slow",
    "unit/test_aot_cache.py::test_a_warm_process_asks_dynamo_for_the_restart_without_tracing",
    "unit/test_aot_cache.py::test_a_warm_optimizer_step_equals_the_cold_one[SGD]",
    "unit/test_precompile.py::test_autograd_cache_does_not_cross_dicp_knobs",
    "unit/test_precompile.py::test_precompiled_function_loads_without_cache_or_compiler[training]",
    "unit/test_precompile.py::test_a_precompiled_emugraph_function_loads_onto_the_device[training]",
    "unit/test_precompile.py::test_a_precompiled_emugraph_function_loads_onto_the_device[dynamic]",
    "unit/test_precompile.py::test_a_precompiled_emugraph_function_loads_onto_the_device[constant]",
    "unit/test_precompile.py::test_precompiled_function_loads_without_cache_or_compiler[dynamic]",
    "unit/test_precompile.py::test_precompiled_function_loads_without_cache_or_compiler[constant]",
    "unit/test_upstream_ops.py::test_runner_tells_failures_every_backend_shares_from_its_own",
    "unit/test_wide_graphs.py::"
    "test_wide_and_deep_graphs_match_eager_with_gradients[cat-400-bounds-checked]",
)
# Files whose dynamic-shape variants are all in the slow tier (the static ones stay). CI's
# cold-against-warm step runs the training steps again, all of them, in fresh processes; the op
# suite runs every op with dynamic shapes, so OpInfo's dynamic pass and the dynamic indexed
# writes are a second sweep; CI's emugraph step runs its op tests with dynamic shapes.
SLOW_DYNAMIC = (
    "model/test_training_steps.py::",
    "model/test_transformer_training.py::",
    "opinfo/test_opinfo.py::",
    "unit/test_indexed_writes.py::",
    "emu/test_emugraph_models.py::",
)


def is_slow(nodeid: str) -> bool:
    dynamic_variant = nodeid.endswith("dynamic]") and any(f in nodeid for f in SLOW_DYNAMIC)
    return dynamic_variant or nodeid.endswith(SLOW)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the slow tier (test/common/tiers.py)")


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection, which reads the marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
    if config.getoption("markexpr") or config.getoption("--with-slow"):
        return
    named = _named_tests(config.args)
    slow = [i for i in items if i.get_closest_marker("slow") and not _is_named(i.nodeid, named)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        deselected = set(map(id, slow))
        items[:] = [item for item in items if id(item) not in deselected]


def _named_tests(args) -> list[str]:
    """The tests the command line names by id ("file.py::test", "file.py::Class::test[p]"),
    from the file's name on: those run, slow or not."""
    return [_from_file_name(arg) for arg in args if "::" in arg]


def _is_named(nodeid: str, named) -> bool:
    test = _from_file_name(nodeid)
    return any(test == n or test.startswith((n + "[", n + "::")) for n in named)


def _from_file_name(test_id: str) -> str:
    path, rest = test_id.split("::", 1)
    return path.replace("\\", "/").rsplit("/", 1)[-1] + "::" + rest
