// What dicp's knobs decide for one eager op, and the calls that report on it. The decisions
// and the reports are Python's (dicp/emu/eager.py, debug.py), which read dicp.config; the
// kernels only ask. Without Python hooks installed every op runs as registered, silently.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <vector>

namespace dicp_emu {

enum class Fault { none = 0, accuracy = 1, error = 2 };  // DICP_INJECT_BUG_TESTING_ONLY

struct OpPolicy {
  bool fallback = false;  // a native op forced to the CPU (DICP_FALLBACK_OPS)
  int dump = 0;           // DICP_DUMP_OP_ARGS level
  bool compare = false;   // DICP_AUTOCOMPARE for a native op
  Fault fault = Fault::none;
};

struct PolicyHooks {
  std::function<OpPolicy(const std::string& op, bool native)> policy;
  // stage "native" or "fallback" (before the op runs: its arguments) or "out" (its results)
  std::function<void(const std::string& op, const std::string& stage,
                     const std::vector<c10::IValue>& values, int level)> dump;
  std::function<void(const std::string& op, const std::vector<c10::IValue>& actual,
                     const std::vector<c10::IValue>& expected)> compare;
};

PolicyHooks& policy_hooks();
std::string op_name(const c10::OperatorHandle& op);  // "aten.add.Tensor", "aten.neg.default"
OpPolicy query_policy(const c10::OperatorHandle& op, bool native);
void dump_values(const c10::OperatorHandle& op, const OpPolicy& policy, const char* stage,
                 const std::vector<c10::IValue>& values);

}  // namespace dicp_emu
