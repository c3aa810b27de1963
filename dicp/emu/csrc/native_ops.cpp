// Native compute ops: one boxed kernel serves every op of the native set (eager.py lists them).
//
// On the host it checks the arguments and computes the results' layouts by running the op on
// meta tensors (layouts.cpp: errors are raised at the call, as a device's launcher raises
// them), allocates the results on the device and enqueues the work on the current stream.
// The work, run by the stream's thread, is the CPU kernel on views of the device memory it
// opened. The host returns without waiting.
#include "ops.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>

#include "device.h"

namespace dicp_emu {

namespace {

// A written argument (in-place, out=) is its own result, resized as the meta run resized it;
// any other result is new device memory in the meta result's layout.
Args device_results(const c10::FunctionSchema& schema, const Args& args,
                    const std::vector<Layout>& layouts, c10::DeviceIndex device) {
  Args results;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const auto& layout = layouts[i];
    if (auto written = written_argument(schema, i)) {
      const auto& tensor = args[*written].toTensor();
      if (tensor.sizes() != layout.sizes || tensor.strides() != layout.strides) {
        set_layout(tensor, layout.sizes, layout.strides, tensor.storage_offset());
      }
      results.push_back(args[*written]);
      continue;
    }
    TORCH_CHECK(schema.returns()[i].alias_info() == nullptr,
                "emu: native ops return new tensors or written arguments: ", schema);
    results.push_back(empty_device(layout.sizes, layout.strides, layout.dtype, device));
  }
  return results;
}

// A wrong value where the device wrote: the first element in memory of the first result.
void inject_accuracy_fault(const at::Tensor& result) {
  if (result.numel() == 0) return;
  auto first = result.as_strided({}, {}, result.storage_offset());
  if (first.scalar_type() == at::kBool) {
    first.logical_not_();
  } else {
    first.add_(1);
  }
}

struct Work {
  c10::OperatorHandle op;
  torch::jit::Stack stack;          // the op's arguments as host views of device memory
  std::vector<std::pair<size_t, at::Tensor>> fresh;  // result index -> view to copy it into
  at::Tensor faulty;                 // a result to make wrong on purpose, or undefined

  void operator()() {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    torch::jit::Stack call = stack;
    op.callBoxed(call);
    for (auto& [index, view] : fresh) view.copy_(call[index].toTensor());
    if (faulty.defined()) inject_accuracy_fault(faulty);
  }
};

void enqueue(const c10::OperatorHandle& op, const Args& args, const Args& results,
             c10::DeviceIndex device, bool fault) {
  Task task;
  DeviceMemoryViews views(task);
  Work work{op, {}, {}, {}};
  const auto& schema = op.schema();
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_generator(schema.arguments()[i])) {
      work.stack.push_back(host_generator(args[i], device));
    } else {
      work.stack.push_back(moved_device(map_tensors(args[i], views), c10::kCPU));
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    auto view = views(results[i].toTensor());
    if (!written_argument(schema, i)) work.fresh.emplace_back(i, view);
    if (fault && i == 0) work.faulty = view;
  }
  task.run = std::move(work);
  current_stream(device).enqueue(std::move(task));
}

// DICP_AUTOCOMPARE: the device's results against the op run on host copies of the inputs
// (taken before the device runs the op, which may write them).
void compare_with_host(const c10::OperatorHandle& op, const Args& results,
                       const Args& reference) {
  const auto& compare = policy_hooks().compare;
  if (!compare) return;
  Args actual;
  for (const auto& result : results) {
    actual.push_back(map_tensors(result, [](const at::Tensor& t) { return t.cpu(); }));
  }
  compare(op_name(op), actual, reference);
}

void native_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpPolicy policy = query_policy(op, true);
  if (policy.fallback) return run_fallback(op, stack, policy);
  Args args = pop_args(stack, op.schema().arguments().size());
  check_devices(op, args);
  const auto device = op_device(args);
  OnDevice on(device);
  dump_values(op, policy, "native", args);
  TORCH_CHECK(policy.fault != Fault::error, "dicp: runtime error injected into ", op_name(op),
              " on emu by DICP_INJECT_BUG_TESTING_ONLY");
  const Args reference = policy.compare ? host_reference(op, args) : Args{};
  Args results = device_results(op.schema(), args, result_layouts(op, args), device);
  enqueue(op, args, results, device, policy.fault == Fault::accuracy);
  if (policy.compare) compare_with_host(op, results, reference);
  dump_values(op, policy, "out", results);
  push_all(stack, std::move(results));
}

// Dropout takes no generator argument: on the CPU it draws from the CPU's generator. On the
// device it is composed of device ops, so its mask comes from the device's generator.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  if (input.numel() == 0) return {input.clone(), at::empty_like(input)};
  const auto bool_options = input.options().dtype(at::kBool);
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, bool_options)};
  const double keep = 1.0 - p;
  auto mask = at::empty_like(input, bool_options).bernoulli_(keep);
  return {input.mul(mask).mul_(keep == 0 ? 0.0 : 1.0 / keep), mask};
}

}  // namespace

void register_device_compositions(torch::Library& library) {
  library.impl("native_dropout", TORCH_FN(native_dropout));
}

void register_native_op(torch::Library& library, const std::string& name) {
  library.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&native_kernel>());
}

}  // namespace dicp_emu
