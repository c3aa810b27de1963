// The fused RNN cells, composed of device ops.
//
// torch's lstm_cell and gru_cell (and so nn.LSTMCell, nn.GRUCell, nn.LSTM, nn.GRU) call a fused
// cell kernel on every device but the CPU (aten/src/ATen/native/RNN.cpp: `input.is_cuda() ||
// input.is_xpu() || input.is_privateuseone()`), and those kernels exist for CUDA only: the CPU
// fallback cannot run them. Here they are compositions of device ops. The workspace is CUDA's
// (the activated gates, which torch's autograd formula hands to the backward kernel):
// LSTM [i, f, g, o], GRU [r, z, n, hx, hn + b_hn].
#include "ops.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>

namespace dicp_emu {

namespace {

using OptionalTensor = std::optional<at::Tensor>;

at::Tensor plus_bias(const at::Tensor& gates, const OptionalTensor& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

at::Tensor sigmoid_grad(const at::Tensor& sigmoid) { return sigmoid * (1 - sigmoid); }

at::Tensor tanh_grad(const at::Tensor& tanh) { return 1 - tanh * tanh; }

at::Tensor bias_grad(const at::Tensor& grad_gates, bool has_bias) {
  return has_bias ? grad_gates.sum(0) : at::Tensor();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const OptionalTensor& input_bias, const OptionalTensor& hidden_bias) {
  const auto gates = plus_bias(plus_bias(input_gates + hidden_gates, input_bias), hidden_bias)
                         .chunk(4, 1);
  const auto i = gates[0].sigmoid(), f = gates[1].sigmoid(), g = gates[2].tanh(),
             o = gates[3].sigmoid();
  auto cy = f * cx + i * g;
  auto hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// A missing gradient (the output was not used) counts as zero, as in CUDA's kernel.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const OptionalTensor& grad_hy, const OptionalTensor& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const bool has_hy = grad_hy.has_value() && grad_hy->defined();
  const bool has_cy = grad_cy.has_value() && grad_cy->defined();
  if (!has_hy && !has_cy) return {};
  const auto gates = workspace.chunk(4, 1);
  const auto &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const auto tanh_cy = cy.tanh();
  const auto ghy = has_hy ? *grad_hy : at::zeros_like(cy);
  auto gcy = ghy * o * tanh_grad(tanh_cy);
  if (has_cy) gcy = gcy + *grad_cy;
  auto grad_gates = at::cat({gcy * g * sigmoid_grad(i), gcy * cx * sigmoid_grad(f),
                             gcy * i * tanh_grad(g), ghy * tanh_cy * sigmoid_grad(o)}, 1);
  auto grad_bias = bias_grad(grad_gates, has_bias);
  return {grad_gates, gcy * f, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
    const OptionalTensor& input_bias, const OptionalTensor& hidden_bias) {
  const auto in = plus_bias(input_gates, input_bias).chunk(3, 1);
  const auto hidden = plus_bias(hidden_gates, hidden_bias).chunk(3, 1);
  const auto r = (in[0] + hidden[0]).sigmoid(), z = (in[1] + hidden[1]).sigmoid();
  const auto n = (in[2] + r * hidden[2]).tanh();
  auto hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hidden[2]}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  const auto saved = workspace.chunk(5, 1);
  const auto &r = saved[0], &z = saved[1], &n = saved[2], &hx = saved[3], &hn = saved[4];
  const auto grad_n = grad_hy * (1 - z) * tanh_grad(n);
  const auto grad_z = grad_hy * (hx - n) * sigmoid_grad(z);
  const auto grad_r = grad_n * hn * sigmoid_grad(r);
  auto grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  auto grad_hidden_gates = at::cat({grad_r, grad_z, grad_n * r}, 1);
  auto grad_input_bias = bias_grad(grad_input_gates, has_bias);
  auto grad_hidden_bias = bias_grad(grad_hidden_gates, has_bias);
  return {grad_input_gates, grad_hidden_gates, grad_hy * z, grad_input_bias, grad_hidden_bias};
}

}  // namespace

void register_rnn_cells(torch::Library& library) {
  library.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  library.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  library.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  library.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace dicp_emu
