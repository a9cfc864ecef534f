// ONNX's recurrent layers (LSTM, GRU, RNN) unrolled over their static sequence length into primitive ONNX nodes
// (MatMul, Add, Mul, Sub, Slice, Reshape, Concat, Clip and activations) that the importer imports as any others.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "constants.hpp"

namespace tessera::onnx_import {

/// An optional input of a recurrent node: absent (empty name), a constant, or computed with `dims`.
struct RecurrentOperand {
  std::string name;
  const Constant* constant = nullptr;
  Dims dims;
  bool present() const { return !name.empty(); }
};

/// What the expansion needs to know of a recurrent node's inputs: X computed, the weights W, R
/// and the optional B and P constants (null when absent), and the initial states.
struct RecurrentInputs {
  Dims x_dims;
  const Constant* w = nullptr;
  const Constant* r = nullptr;
  const Constant* b = nullptr;
  const Constant* p = nullptr;
  const Constant* sequence_lens = nullptr;  ///< null when absent; each length must be seq_length
  RecurrentOperand initial_h;
  RecurrentOperand initial_c;
};

/// The nodes a recurrent node unrolls into, in order, and the constants they read (new
/// initializers, named after the node's outputs); the last nodes write the node's outputs.
struct RecurrentExpansion {
  std::vector<onnx::NodeProto> nodes;
  std::vector<std::pair<std::string, Constant>> constants;
};

/// Whether `op_type` is a recurrent layer expand_recurrent unrolls.
bool is_recurrent(const std::string& op_type);

/// Unrolls LSTM, GRU or RNN node `node` (of a model of `opset`): the input projection of every step
/// as one MatMul by the stacked W^T (biases folded in), per step a row slice of it, a MatMul of
/// the previous hidden state by R^T, the gates as column slices, and their activations; Y, Y_h and
/// Y_c as Reshape and Concat of the steps' states. Throws Error (with `where`) on malformed dims
/// or attributes, and "not supported" ones on what it does not unroll.
RecurrentExpansion expand_recurrent(const onnx::NodeProto& node, const RecurrentInputs& inputs, std::int64_t opset,
                                    const std::string& where);

}  // namespace tessera::onnx_import
