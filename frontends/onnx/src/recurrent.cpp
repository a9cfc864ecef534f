// ONNX's LSTM, GRU and RNN unrolled over their static sequence length into primitive ONNX nodes.
#include "recurrent.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "tessera/diagnostic.hpp"

namespace tessera::onnx_import {

namespace {

using onnx::TensorProto;

/// Steps (sequence length times directions) a node may unroll into: each is a dozen device ops.
constexpr std::int64_t kMaxUnrolledSteps = 2048;

enum class Cell { lstm, gru, rnn };

/// An activation function of the `activations` attribute and the ONNX operator computing it.
struct ActivationKind {
  const char* op;
  bool takes_alpha = false;
  float alpha = 0;
  bool takes_beta = false;
  float beta = 0;
};

/// The activations an activation node of the importer computes, by lower-case name (ONNX
/// Runtime reads them case-insensitively); defaults are the operators' own (ONNX's spec).
const std::map<std::string, ActivationKind>& activation_kinds() {
  static const std::map<std::string, ActivationKind> kinds = {{"sigmoid", {"Sigmoid"}},
                                                              {"tanh", {"Tanh"}},
                                                              {"relu", {"Relu"}},
                                                              {"softsign", {"Softsign"}},
                                                              {"softplus", {"Softplus"}},
                                                              {"leakyrelu", {"LeakyRelu", true, 0.01f}},
                                                              {"thresholdedrelu", {"ThresholdedRelu", true, 1.0f}},
                                                              {"elu", {"Elu", true, 1.0f}},
                                                              {"hardsigmoid", {"HardSigmoid", true, 0.2f, true, 0.5f}}};
  return kinds;
}

struct Activation {
  std::string op;
  std::optional<float> alpha, beta;
};

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string dims_text(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

class Unroller {
public:
  Unroller(const onnx::NodeProto& node, const RecurrentInputs& inputs, std::int64_t opset, const std::string& where)
      : node_(node), in_(inputs), opset_(opset), where_(where) {}

  RecurrentExpansion run() {
    check();
    project_inputs();
    std::vector<std::vector<std::string>> hidden(static_cast<std::size_t>(directions_));  // per direction, by time
    std::vector<std::string> last_h, last_c;
    for (std::int64_t d = 0; d < directions_; ++d) {
      const bool backward = direction_ == "reverse" || (direction_ == "bidirectional" && d == 1);
      std::string h = initial_state(in_.initial_h, d, "h0"), c;
      if (cell_ == Cell::lstm) c = initial_state(in_.initial_c, d, "c0");
      hidden[static_cast<std::size_t>(d)].resize(static_cast<std::size_t>(steps_));
      for (std::int64_t i = 0; i < steps_; ++i) {
        const std::int64_t t = backward ? steps_ - 1 - i : i;
        step(d, t, h, c);
        hidden[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)] = h;
      }
      last_h.push_back(h);
      last_c.push_back(c);
    }
    write_outputs(hidden, last_h, last_c);
    return std::move(out_);
  }

private:
  [[noreturn]] void malformed(const std::string& why) const { throw Error(fmt::format("{}: {}", where_, why)); }
  [[noreturn]] void unsupported(const std::string& why) const {
    throw Error(fmt::format("{}: not supported: {}", where_, why));
  }

  // ---- Attributes and dims -------------------------------------------------------------------

  std::vector<std::string> strings_attribute(const char* name) const {
    const onnx::AttributeProto* attribute = find_attribute(node_, name);
    if (!attribute) return {};
    return {attribute->strings().begin(), attribute->strings().end()};
  }

  std::vector<float> floats_attribute(const char* name) const {
    const onnx::AttributeProto* attribute = find_attribute(node_, name);
    if (!attribute) return {};
    return {attribute->floats().begin(), attribute->floats().end()};
  }

  /// A float weight of `dims` (each checked before its values are read).
  void check_weight(const Constant* c, const char* role, const Dims& dims) const {
    check_values(*c, fmt::format("{}: {}", where_, role));
    if (c->dtype != TensorProto::FLOAT && c->dtype != TensorProto::FLOAT16 && c->dtype != TensorProto::DOUBLE)
      malformed(fmt::format("{} is {}; a float tensor is expected", role, dtype_text(c->dtype)));
    if (c->dims != dims)
      malformed(fmt::format("{} is {}; with {} direction(s), hidden_size {} and input size {} it must be {}", role,
                            dims_text(c->dims), directions_, hidden_, input_size_, dims_text(dims)));
  }

  void check() {
    const std::string& type = node_.op_type();
    cell_ = type == "LSTM" ? Cell::lstm : type == "GRU" ? Cell::gru : Cell::rnn;
    gates_ = cell_ == Cell::lstm ? 4 : cell_ == Cell::gru ? 3 : 1;
    if (opset_ < 7)
      unsupported(fmt::format("{} of opset {} (its opset-1 form; export with opset 7 or newer)", type, opset_));
    direction_ = find_attribute(node_, "direction") ? find_attribute(node_, "direction")->s() : "forward";
    if (direction_ != "forward" && direction_ != "reverse" && direction_ != "bidirectional")
      malformed(fmt::format("direction '{}' is not forward, reverse or bidirectional", direction_));
    directions_ = direction_ == "bidirectional" ? 2 : 1;
    layout_ = int_attribute(node_, "layout", 0);
    if (layout_ != 0 && layout_ != 1) malformed(fmt::format("layout {} is not 0 or 1", layout_));
    const Dims& x = in_.x_dims;
    if (x.size() != 3 || std::any_of(x.begin(), x.end(), [](std::int64_t d) { return d <= 0; }))
      malformed(fmt::format("X is {}; it must be of rank 3 with positive dims", dims_text(x)));
    steps_ = x[layout_ == 0 ? 0 : 1];
    batch_ = x[layout_ == 0 ? 1 : 0];
    input_size_ = x[2];
    if (steps_ * directions_ > kMaxUnrolledSteps)
      unsupported(fmt::format("{} steps of {} direction(s) (X is {}): each step is unrolled, at most {} in all", steps_,
                              directions_, dims_text(x), kMaxUnrolledSteps));
    // hidden_size: the attribute, else R's last dim.
    if (in_.r->dims.size() != 3) malformed(fmt::format("R is {}; it must be of rank 3", dims_text(in_.r->dims)));
    hidden_ = int_attribute(node_, "hidden_size", in_.r->dims[2]);
    if (hidden_ <= 0 || hidden_ > kMaxElements)  // bounded before it multiplies
      malformed(fmt::format("hidden_size {} is not a positive size", hidden_));
    element_count({steps_, batch_, directions_, gates_ * hidden_}, where_);
    check_weight(in_.w, "W", {directions_, gates_ * hidden_, input_size_});
    check_weight(in_.r, "R", {directions_, gates_ * hidden_, hidden_});
    if (in_.b) check_weight(in_.b, "B", {directions_, 2 * gates_ * hidden_});
    if (in_.p) {
      if (cell_ != Cell::lstm) malformed("only LSTM has peepholes (input P)");
      check_weight(in_.p, "P", {directions_, 3 * hidden_});
    }
    if (in_.sequence_lens) {
      const Constant& lengths = *in_.sequence_lens;
      check_values(lengths, where_ + ": sequence_lens");
      if (lengths.dims != Dims{batch_})
        malformed(fmt::format("sequence_lens is {}; it must be [{}] (the batch)", dims_text(lengths.dims), batch_));
      for (double length : lengths.values)
        if (length != static_cast<double>(steps_))
          unsupported(
              fmt::format("sequence_lens [{}] with a length other than seq_length {} (sequences of "
                          "different lengths are not unrolled; give every sequence the full length)",
                          fmt::join(lengths.values, ", "), steps_));
    }
    const Dims state = layout_ == 0 ? Dims{directions_, batch_, hidden_} : Dims{batch_, directions_, hidden_};
    for (const RecurrentOperand* initial : {&in_.initial_h, &in_.initial_c}) {
      if (!initial->present()) continue;
      const char* role = initial == &in_.initial_h ? "initial_h" : "initial_c";
      if (initial == &in_.initial_c && cell_ != Cell::lstm) malformed("only LSTM has a cell state (input initial_c)");
      if (initial->constant) check_values(*initial->constant, fmt::format("{}: {}", where_, role));
      if (initial->dims != state)
        malformed(fmt::format("{} is {}; it must be {} (layout {})", role, dims_text(initial->dims), dims_text(state),
                              layout_));
    }
    clip_ = find_attribute(node_, "clip") ? std::optional<float>(float_attribute(node_, "clip", 0)) : std::nullopt;
    if (clip_ && !(*clip_ > 0)) malformed(fmt::format("clip {} is not positive", *clip_));
    input_forget_ = cell_ == Cell::lstm && int_attribute(node_, "input_forget", 0) != 0;
    linear_before_reset_ = cell_ == Cell::gru && int_attribute(node_, "linear_before_reset", 0) != 0;
    check_activations();
  }

  /// Per direction: f, g, h (LSTM), f, g (GRU), f (RNN). One set given for two directions serves both.
  void check_activations() {
    const std::size_t per = cell_ == Cell::lstm ? 3 : cell_ == Cell::gru ? 2 : 1;
    std::vector<std::string> names = strings_attribute("activations");
    if (names.empty()) {
      for (const char* name : {"Sigmoid", "Tanh", "Tanh"}) names.push_back(name);
      if (cell_ == Cell::rnn) names = {"Tanh"};
      names.resize(per);
    }
    const auto wanted = per * static_cast<std::size_t>(directions_);
    if (names.size() == per && directions_ == 2) {
      const std::vector<std::string> one = names;
      names.insert(names.end(), one.begin(), one.end());
    }
    if (names.size() != wanted)
      malformed(fmt::format("{} activations [{}]; {} with {} direction(s) takes {}", names.size(),
                            fmt::join(names, ", "), node_.op_type(), directions_, wanted));
    const std::vector<float> alphas = floats_attribute("activation_alpha"), betas = floats_attribute("activation_beta");
    std::size_t next_alpha = 0, next_beta = 0;  // consumed in the order of the activations that take them
    for (const std::string& name : names) {
      const auto found = activation_kinds().find(lower(name));
      if (found == activation_kinds().end()) {
        std::vector<std::string> known;
        for (const auto& [key, kind] : activation_kinds()) known.push_back(kind.op);
        unsupported(fmt::format("the activation '{}' (supported: {})", name, fmt::join(known, ", ")));
      }
      const ActivationKind& kind = found->second;
      Activation activation{kind.op, std::nullopt, std::nullopt};
      if (kind.takes_alpha) activation.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : kind.alpha;
      if (kind.takes_beta) activation.beta = next_beta < betas.size() ? betas[next_beta++] : kind.beta;
      activations_.push_back(activation);
    }
  }

  // ---- Node and constant builders --------------------------------------------------------------

  std::string name(const std::string& suffix) const { return fmt::format("{}.{}", prefix(), suffix); }

  /// Names start with the node's first output, unique among the graph's values as outputs are.
  std::string prefix() const {
    for (const std::string& output : node_.output())
      if (!output.empty()) return fmt::format("{}.{}", output, lower(node_.op_type()));
    return lower(node_.op_type());
  }

  std::string constant(const std::string& suffix, Constant c) {
    const std::string full = name(suffix);
    constant_values_[full] = c;
    out_.constants.emplace_back(full, std::move(c));
    return full;
  }

  std::string ints(const std::string& suffix, const std::vector<std::int64_t>& values) {
    Constant c{TensorProto::INT64, {static_cast<std::int64_t>(values.size())}, {}};
    for (std::int64_t v : values) c.values.push_back(static_cast<double>(v));
    return constant(suffix, std::move(c));
  }

  onnx::NodeProto& emit_to(const std::string& op, const std::vector<std::string>& inputs, const std::string& output) {
    onnx::NodeProto& node = out_.nodes.emplace_back();
    node.set_op_type(op);
    node.set_name(output);
    for (const std::string& input : inputs) node.add_input(input);
    node.add_output(output);
    return node;
  }

  std::string emit(const std::string& op, const std::vector<std::string>& inputs, const std::string& suffix) {
    return emit_to(op, inputs, name(suffix)).output(0);
  }

  static void set_float(onnx::NodeProto& node, const char* attribute, float value) {
    auto* a = node.add_attribute();
    a->set_name(attribute);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
  }

  static void set_ints(onnx::NodeProto& node, const char* attribute, const std::vector<std::int64_t>& values) {
    auto* a = node.add_attribute();
    a->set_name(attribute);
    a->set_type(onnx::AttributeProto::INTS);
    for (std::int64_t v : values) a->add_ints(v);
  }

  std::string reshape_to(const std::string& x, const Dims& dims, const std::string& output, const std::string& suffix) {
    return emit_to("Reshape", {x, ints(suffix + ".shape", dims)}, output).output(0);
  }
  std::string reshape(const std::string& x, const Dims& dims, const std::string& suffix) {
    return reshape_to(x, dims, name(suffix), suffix);
  }

  /// Slice of `x` along `axes` (inputs from opset 10, attributes before).
  std::string slice(const std::string& x, const std::vector<std::int64_t>& axes,
                    const std::vector<std::int64_t>& starts, const std::vector<std::int64_t>& ends,
                    const std::string& suffix) {
    if (opset_ >= 10)
      return emit("Slice",
                  {x, ints(suffix + ".starts", starts), ints(suffix + ".ends", ends), ints(suffix + ".axes", axes)},
                  suffix);
    onnx::NodeProto& node = emit_to("Slice", {x}, name(suffix));
    set_ints(node, "starts", starts);
    set_ints(node, "ends", ends);
    set_ints(node, "axes", axes);
    return node.output(0);
  }

  /// Columns [begin, begin + count) of a [batch, n] value.
  std::string columns(const std::string& x, std::int64_t begin, std::int64_t count, const std::string& suffix) {
    return slice(x, {1}, {begin}, {begin + count}, suffix);
  }

  std::string binary(const char* op, const std::string& a, const std::string& b, const std::string& suffix) {
    return emit(op, {a, b}, suffix);
  }

  /// Activation `which` of a pre-activation, clipped first when the node clips and `clipped` (ONNX
  /// Runtime does not clip the cell state LSTM's h reads).
  std::string activate(const std::string& pre, std::size_t which, const std::string& suffix, bool clipped = true) {
    std::string x = pre;
    if (clip_ && clipped) {
      if (opset_ >= 11) {
        x = emit("Clip", {x, scalar(suffix + ".clip_low", -*clip_), scalar(suffix + ".clip_high", *clip_)},
                 suffix + ".clipped");
      } else {
        onnx::NodeProto& node = emit_to("Clip", {x}, name(suffix + ".clipped"));
        set_float(node, "min", -*clip_);
        set_float(node, "max", *clip_);
        x = node.output(0);
      }
    }
    const Activation& activation = activations_.at(which);
    onnx::NodeProto& node = emit_to(activation.op, {x}, name(suffix));
    if (activation.alpha) set_float(node, "alpha", *activation.alpha);
    if (activation.beta) set_float(node, "beta", *activation.beta);
    return node.output(0);
  }

  std::string scalar(const std::string& suffix, double value) {
    return constant(suffix, Constant{TensorProto::FLOAT, {}, {value}});
  }

  // ---- Weights ---------------------------------------------------------------------------------

  static double at(const Constant& c, std::int64_t index) { return c.values[static_cast<std::size_t>(index)]; }

  /// Rows [row_begin, row_begin + rows) of direction d's W or R ([D, gates*H, cols]), transposed:
  /// [cols, rows], the right operand of a MatMul.
  static Constant transposed_rows(const Constant& m, std::int64_t d, std::int64_t row_begin, std::int64_t rows) {
    const std::int64_t height = m.dims[1], cols = m.dims[2];
    Constant c{TensorProto::FLOAT, {cols, rows}, std::vector<double>(static_cast<std::size_t>(cols * rows))};
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < cols; ++k)
        c.values[static_cast<std::size_t>(k * rows + r)] = at(m, (d * height + row_begin + r) * cols + k);
    return c;
  }

  /// Bias element j of direction d's Wb (recurrent = false) or Rb; 0 without B.
  double bias(std::int64_t d, bool recurrent, std::int64_t j) const {
    if (!in_.b) return 0.0;
    const std::int64_t width = gates_ * hidden_;
    return at(*in_.b, d * 2 * width + (recurrent ? width : 0) + j);
  }

  /// Every step's input projection at once: X by the directions' W^T side by side, plus the biases
  /// that add to it (Wb + Rb; for GRU with linear_before_reset, Rbh is added after the product).
  void project_inputs() {
    const std::int64_t width = gates_ * hidden_, all = directions_ * width;
    Constant wt{
        TensorProto::FLOAT, {input_size_, all}, std::vector<double>(static_cast<std::size_t>(input_size_ * all))};
    Constant row{TensorProto::FLOAT, {all}, std::vector<double>(static_cast<std::size_t>(all))};
    bool any_bias = false;
    for (std::int64_t d = 0; d < directions_; ++d) {
      for (std::int64_t j = 0; j < width; ++j) {
        for (std::int64_t k = 0; k < input_size_; ++k)
          wt.values[static_cast<std::size_t>(k * all + d * width + j)] = at(*in_.w, (d * width + j) * input_size_ + k);
        const bool after = linear_before_reset_ && j >= 2 * hidden_;
        const double sum = static_cast<float>(bias(d, false, j) + (after ? 0.0 : bias(d, true, j)));
        row.values[static_cast<std::size_t>(d * width + j)] = sum;
        any_bias = any_bias || sum != 0.0;
      }
    }
    projection_ = emit("MatMul", {node_.input(0), constant("wt", std::move(wt))}, any_bias ? "xw_product" : "xw");
    if (any_bias) projection_ = binary("Add", projection_, constant("bias", std::move(row)), "xw");
    for (std::int64_t d = 0; d < directions_; ++d) {
      if (cell_ == Cell::gru && !linear_before_reset_) {
        recurrent_[d] = constant(fmt::format("d{}.rt_zr", d), transposed_rows(*in_.r, d, 0, 2 * hidden_));
        recurrent_h_[d] = constant(fmt::format("d{}.rt_h", d), transposed_rows(*in_.r, d, 2 * hidden_, hidden_));
      } else {
        recurrent_[d] = constant(fmt::format("d{}.rt", d), transposed_rows(*in_.r, d, 0, width));
      }
      if (linear_before_reset_ && in_.b) {
        Constant rbh{TensorProto::FLOAT, {hidden_}, {}};
        bool nonzero = false;
        for (std::int64_t j = 0; j < hidden_; ++j) {
          rbh.values.push_back(bias(d, true, 2 * hidden_ + j));
          nonzero = nonzero || rbh.values.back() != 0.0;
        }
        if (nonzero) reset_bias_[d] = constant(fmt::format("d{}.rbh", d), std::move(rbh));
      }
    }
  }

  /// Columns [begin, begin + count) of direction d's projection at time t: [batch, count].
  std::string projection(std::int64_t d, std::int64_t t, std::int64_t begin, std::int64_t count,
                         const std::string& suffix) {
    const std::int64_t first = d * gates_ * hidden_ + begin, time_axis = layout_ == 0 ? 0 : 1;
    const std::string part = slice(projection_, {time_axis, 2}, {t, first}, {t + 1, first + count}, suffix + ".rows");
    return reshape(part, {batch_, count}, suffix);
  }

  /// Direction d's initial state (initial_h or initial_c) as [batch, hidden]; empty when absent (zeros).
  std::string initial_state(const RecurrentOperand& initial, std::int64_t d, const std::string& what) {
    if (!initial.present()) return "";
    const std::string suffix = fmt::format("d{}.{}", d, what);
    if (initial.constant) {  // its values: a constant product by R^T folds at import
      Constant c{TensorProto::FLOAT, {batch_, hidden_}, {}};
      for (std::int64_t b = 0; b < batch_; ++b)
        for (std::int64_t j = 0; j < hidden_; ++j)
          c.values.push_back(at(*initial.constant,
                                layout_ == 0 ? (d * batch_ + b) * hidden_ + j : (b * directions_ + d) * hidden_ + j));
      return constant(suffix, std::move(c));
    }
    if (directions_ == 1) return reshape(initial.name, {batch_, hidden_}, suffix);  // a view
    const std::int64_t axis = layout_ == 0 ? 0 : 1;
    return reshape(slice(initial.name, {axis}, {d}, {d + 1}, suffix + ".slice"), {batch_, hidden_}, suffix);
  }

  /// h (a [batch, hidden] state, empty for zeros) by `rt` ([hidden, n]): a MatMul, or a constant
  /// when h is one; empty when h is zeros.
  std::string recurrent_product(const std::string& h, const std::string& rt, const std::string& suffix) {
    if (h.empty()) return "";
    const auto held = constant_values_.find(h);
    if (held == constant_values_.end()) return emit("MatMul", {h, rt}, suffix);
    const Constant& left = held->second;
    const Constant& right = constant_values_.at(rt);
    const std::int64_t k = right.dims[0], n = right.dims[1];
    Constant c{TensorProto::FLOAT, {batch_, n}, std::vector<double>(static_cast<std::size_t>(batch_ * n))};
    for (std::int64_t b = 0; b < batch_; ++b)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t i = 0; i < k; ++i) sum += at(left, b * k + i) * at(right, i * n + j);
        c.values[static_cast<std::size_t>(b * n + j)] = static_cast<float>(sum);
      }
    return constant(suffix, std::move(c));
  }

  /// a + b, or a alone when b is empty (a zero term).
  std::string plus(const std::string& a, const std::string& b, const std::string& suffix) {
    return b.empty() ? a : binary("Add", a, b, suffix);
  }

  // ---- One step --------------------------------------------------------------------------------

  /// Step t of direction d: from the states h and c (empty: zeros) to the next ones.
  void step(std::int64_t d, std::int64_t t, std::string& h, std::string& c) {
    const std::string at_step = fmt::format("d{}.t{}", d, t);
    const std::size_t first_activation = static_cast<std::size_t>(d) * (cell_ == Cell::lstm  ? 3
                                                                        : cell_ == Cell::gru ? 2
                                                                                             : 1);
    auto s = [&](const char* what) { return fmt::format("{}.{}", at_step, what); };
    const std::int64_t H = hidden_;
    if (cell_ == Cell::rnn) {
      const std::string pre =
          plus(projection(d, t, 0, H, s("xw")), recurrent_product(h, recurrent_[d], s("hr")), s("pre"));
      h = activate(pre, first_activation, s("h"));
      return;
    }
    if (cell_ == Cell::lstm) {
      const std::string gates =
          plus(projection(d, t, 0, 4 * H, s("xw")), recurrent_product(h, recurrent_[d], s("hr")), s("gates"));
      // Gate order i, o, f, c; peepholes P order i, o, f.
      std::string i_pre = columns(gates, 0, H, s("i_pre")), o_pre = columns(gates, H, H, s("o_pre"));
      std::string f_pre = columns(gates, 2 * H, H, s("f_pre")), c_pre = columns(gates, 3 * H, H, s("c_pre"));
      if (in_.p && !c.empty()) {
        i_pre = binary("Add", i_pre, binary("Mul", c, peephole(d, 0), s("pi_c")), s("i_peep"));
        f_pre = binary("Add", f_pre, binary("Mul", c, peephole(d, 2), s("pf_c")), s("f_peep"));
      }
      const std::string input = activate(i_pre, first_activation, s("i"));
      std::string forget;  // only where it multiplies a state (the first step's may be zeros)
      if (!c.empty())
        forget = input_forget_ ? binary("Sub", scalar(s("one"), 1.0), input, s("f"))
                               : activate(f_pre, first_activation, s("f"));
      const std::string candidate = activate(c_pre, first_activation + 1, s("c_gate"));
      const std::string kept = binary("Mul", input, candidate, s("ic"));
      c = c.empty() ? kept : binary("Add", binary("Mul", forget, c, s("fc")), kept, s("c"));
      if (in_.p) o_pre = binary("Add", o_pre, binary("Mul", c, peephole(d, 1), s("po_c")), s("o_peep"));
      const std::string output = activate(o_pre, first_activation, s("o"));
      h = binary("Mul", output, activate(c, first_activation + 2, s("c_out"), false), s("h"));
      return;
    }
    // GRU: gate order z, r, h.
    std::string z_pre, r_pre, h_pre;
    if (linear_before_reset_) {
      const std::string xw = projection(d, t, 0, 3 * H, s("xw"));
      const std::string hr = recurrent_product(h, recurrent_[d], s("hr"));
      const std::string both = plus(xw, hr, s("zr_pre"));
      z_pre = columns(both, 0, H, s("z_pre"));
      r_pre = columns(both, H, H, s("r_pre"));
      // r (.) (h Rh^T + Rbh): the zero state leaves Rbh alone (nothing without B).
      std::string linear = hr.empty() ? reset_bias_[d] : columns(hr, 2 * H, H, s("hr_h"));
      if (!hr.empty() && !reset_bias_[d].empty()) linear = binary("Add", linear, reset_bias_[d], s("hr_hb"));
      h_pre = columns(xw, 2 * H, H, s("xw_h"));
      if (!linear.empty()) {
        const std::string reset = activate(r_pre, first_activation, s("r"));
        h_pre = binary("Add", h_pre, binary("Mul", reset, linear, s("r_hr")), s("h_pre"));
      }
      h = gru_state(z_pre, h_pre, h, first_activation, s);
      return;
    }
    const std::string zr =
        plus(projection(d, t, 0, 2 * H, s("xw_zr")), recurrent_product(h, recurrent_[d], s("hr")), s("zr_pre"));
    z_pre = columns(zr, 0, H, s("z_pre"));
    r_pre = columns(zr, H, H, s("r_pre"));
    h_pre = projection(d, t, 2 * H, H, s("xw_h"));
    if (!h.empty()) {
      const std::string reset = activate(r_pre, first_activation, s("r"));
      h_pre = plus(h_pre, recurrent_product(binary("Mul", reset, h, s("rh")), recurrent_h_[d], s("rh_r")), s("h_pre"));
    }
    h = gru_state(z_pre, h_pre, h, first_activation, s);
  }

  /// GRU's next state (1 - z) (.) h~ + z (.) h as h~ + z (.) (h - h~); h~ - z (.) h~ from zeros.
  template <typename Suffix>
  std::string gru_state(const std::string& z_pre, const std::string& h_pre, const std::string& h,
                        std::size_t first_activation, Suffix s) {
    const std::string update = activate(z_pre, first_activation, s("z"));
    const std::string candidate = activate(h_pre, first_activation + 1, s("h_gate"));
    if (h.empty()) return binary("Sub", candidate, binary("Mul", update, candidate, s("zh")), s("h"));
    return binary("Add", candidate, binary("Mul", update, binary("Sub", h, candidate, s("delta")), s("zd")), s("h"));
  }

  /// Peephole `gate` (0 i, 1 o, 2 f) of direction d: a [hidden] row.
  std::string peephole(std::int64_t d, int gate) {
    const std::string suffix = fmt::format("d{}.p{}", d, "iof"[gate]);
    if (constant_values_.count(name(suffix))) return name(suffix);
    Constant row{TensorProto::FLOAT, {hidden_}, {}};
    for (std::int64_t j = 0; j < hidden_; ++j) row.values.push_back(at(*in_.p, (d * 3 + gate) * hidden_ + j));
    return constant(suffix, std::move(row));
  }

  // ---- Outputs ---------------------------------------------------------------------------------

  /// Y ([S, D, B, H], or [B, S, D, H] in layout 1), Y_h and Y_c ([D, B, H], or [B, D, H]): each a
  /// Concat of the states seen with a unit axis, then a Reshape (views on the device).
  void write_outputs(const std::vector<std::vector<std::string>>& hidden, const std::vector<std::string>& last_h,
                     const std::vector<std::string>& last_c) {
    const auto output = [&](int i) { return i < node_.output_size() ? node_.output(i) : std::string(); };
    const Dims unit = layout_ == 0 ? Dims{1, batch_, hidden_} : Dims{batch_, 1, hidden_};
    const std::int64_t axis = layout_ == 0 ? 0 : 1;
    auto stack = [&](const std::vector<std::string>& states, const Dims& dims, const std::string& out) {
      const std::string part = lower_name(out);
      if (states.size() == 1) return void(reshape_to(states[0], dims, out, part));
      std::vector<std::string> parts;
      for (std::size_t i = 0; i < states.size(); ++i)
        parts.push_back(reshape(states[i], unit, fmt::format("{}.part{}", part, i)));
      onnx::NodeProto& concat = emit_to("Concat", parts, name(part + ".joined"));
      auto* a = concat.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
      reshape_to(concat.output(0), dims, out, part);
    };
    if (!output(0).empty()) {
      std::vector<std::string> states;  // in time order, the directions of each time together
      for (std::int64_t t = 0; t < steps_; ++t)
        for (std::int64_t d = 0; d < directions_; ++d)
          states.push_back(hidden[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)]);
      stack(states,
            layout_ == 0 ? Dims{steps_, directions_, batch_, hidden_} : Dims{batch_, steps_, directions_, hidden_},
            output(0));
    }
    const Dims state = layout_ == 0 ? Dims{directions_, batch_, hidden_} : Dims{batch_, directions_, hidden_};
    if (!output(1).empty()) stack(last_h, state, output(1));
    if (!output(2).empty()) {
      if (cell_ != Cell::lstm) malformed(fmt::format("{} has no third output (Y_c is LSTM's)", node_.op_type()));
      stack(last_c, state, output(2));
    }
  }

  /// A name part for an output: "y", "y_h", "y_c" by position, not the model's own name.
  std::string lower_name(const std::string& out) const {
    for (int i = 0; i < node_.output_size(); ++i)
      if (node_.output(i) == out) return i == 0 ? "y" : i == 1 ? "y_h" : "y_c";
    return "out";
  }

  const onnx::NodeProto& node_;
  const RecurrentInputs& in_;
  std::int64_t opset_;
  std::string where_;
  Cell cell_ = Cell::lstm;
  std::int64_t gates_ = 4, directions_ = 1, layout_ = 0, steps_ = 0, batch_ = 0, input_size_ = 0, hidden_ = 0;
  std::string direction_;
  std::optional<float> clip_;
  bool input_forget_ = false, linear_before_reset_ = false;
  std::vector<Activation> activations_;
  std::string projection_;                                       ///< every step's X W^T (+ biases)
  std::map<std::int64_t, std::string> recurrent_, recurrent_h_;  ///< per direction: R^T (GRU: z and r), Rh^T
  std::map<std::int64_t, std::string> reset_bias_;               ///< per direction: GRU's Rbh (linear_before_reset)
  std::map<std::string, Constant> constant_values_;              ///< the constants made here, by name
  RecurrentExpansion out_;
};

}  // namespace

bool is_recurrent(const std::string& op_type) { return op_type == "LSTM" || op_type == "GRU" || op_type == "RNN"; }

RecurrentExpansion expand_recurrent(const onnx::NodeProto& node, const RecurrentInputs& inputs, std::int64_t opset,
                                    const std::string& where) {
  return Unroller(node, inputs, opset, where).run();
}

}  // namespace tessera::onnx_import
