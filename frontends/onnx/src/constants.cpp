// Constant values of an ONNX model and the folding of nodes whose inputs are all constant.
#include "constants.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "tessera/diagnostic.hpp"
#include "tessera/graph.hpp"

namespace tessera::onnx_import {

using onnx::TensorProto;

static void check_folded_size(const Dims& dims, const std::string& where);

std::int64_t element_count(const Dims& dims, const std::string& where) {
  std::int64_t count = 1;
  for (std::int64_t d : dims) {
    if (d < 0) throw Error(fmt::format("{}: dimension {} is negative", where, d));
    if (d != 0 && count > kMaxElements / d)
      throw Error(
          fmt::format("{}: tensor of dims [{}] has more than {} elements", where, fmt::join(dims, ", "), kMaxElements));
    count *= d;
  }
  return count;
}

std::string dtype_text(int dtype) {
  switch (dtype) {
    case TensorProto::FLOAT:
      return "float";
    case TensorProto::FLOAT16:
      return "float16";
    case TensorProto::DOUBLE:
      return "double";
    case TensorProto::BFLOAT16:
      return "bfloat16";
    case TensorProto::INT8:
      return "int8";
    case TensorProto::UINT8:
      return "uint8";
    case TensorProto::INT16:
      return "int16";
    case TensorProto::UINT16:
      return "uint16";
    case TensorProto::INT32:
      return "int32";
    case TensorProto::UINT32:
      return "uint32";
    case TensorProto::INT64:
      return "int64";
    case TensorProto::UINT64:
      return "uint64";
    case TensorProto::BOOL:
      return "bool";
    case TensorProto::STRING:
      return "string";
    default:
      return fmt::format("type {}", dtype);
  }
}

static bool is_integer(int dtype) {
  switch (dtype) {
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::INT32:
    case TensorProto::UINT32:
    case TensorProto::INT64:
    case TensorProto::UINT64:
      return true;
    default:
      return false;
  }
}

double round_to(int dtype, double value) {
  if (dtype == TensorProto::FLOAT) return static_cast<double>(static_cast<float>(value));
  if (dtype == TensorProto::FLOAT16) return static_cast<double>(round_to_half(static_cast<float>(value)));
  if (dtype == TensorProto::BOOL) return value != 0.0 ? 1.0 : 0.0;
  if (is_integer(dtype)) return std::isfinite(value) ? std::trunc(value) : 0.0;
  return value;
}

std::size_t raw_bytes(int dtype) {
  switch (dtype) {
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32:
      return 4;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64:
      return 8;
    case TensorProto::FLOAT16:
    case TensorProto::INT16:
    case TensorProto::UINT16:
      return 2;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      return 1;
    default:
      return 0;
  }
}

namespace {

template <typename T>
double load(const char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof value);  // ONNX raw data is little-endian, as this host
  return static_cast<double>(value);
}

double raw_value(int dtype, const char* p) {
  switch (dtype) {
    case TensorProto::FLOAT:
      return load<float>(p);
    case TensorProto::DOUBLE:
      return load<double>(p);
    case TensorProto::FLOAT16:
      return half_to_float(static_cast<std::uint16_t>(load<std::uint16_t>(p)));
    case TensorProto::INT8:
      return load<std::int8_t>(p);
    case TensorProto::UINT8:
      return load<std::uint8_t>(p);
    case TensorProto::INT16:
      return load<std::int16_t>(p);
    case TensorProto::UINT16:
      return load<std::uint16_t>(p);
    case TensorProto::INT32:
      return load<std::int32_t>(p);
    case TensorProto::UINT32:
      return load<std::uint32_t>(p);
    case TensorProto::INT64:
      return load<std::int64_t>(p);
    case TensorProto::UINT64:
      return load<std::uint64_t>(p);
    case TensorProto::BOOL:
      return load<std::uint8_t>(p) != 0 ? 1.0 : 0.0;
    default:
      return 0.0;
  }
}

/// Row-major strides of `dims`.
Dims strides_of(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

/// For each element of `out` dims, the index into a tensor of `in` dims broadcast to it.
std::vector<std::int64_t> broadcast_index(const Dims& in, const Dims& out) {
  const std::int64_t total = element_count(out, "broadcast");
  std::vector<std::int64_t> index(static_cast<std::size_t>(total));
  const std::size_t offset = out.size() - in.size();
  const Dims in_strides = strides_of(in);
  Dims position(out.size(), 0);
  for (std::int64_t flat = 0; flat < total; ++flat) {
    std::int64_t source = 0;
    for (std::size_t axis = offset; axis < out.size(); ++axis)
      if (in[axis - offset] != 1) source += position[axis] * in_strides[axis - offset];
    index[static_cast<std::size_t>(flat)] = source;
    for (std::size_t axis = out.size(); axis-- > 0;) {
      if (++position[axis] < out[axis]) break;
      position[axis] = 0;
    }
  }
  return index;
}

/// Integer values of a constant (axes, shapes, indices).
std::vector<std::int64_t> ints_of(const Constant& c) {
  std::vector<std::int64_t> out;
  out.reserve(c.values.size());
  for (double v : c.values)
    out.push_back(v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : static_cast<std::int64_t>(v));
  return out;
}

Constant int64_constant(Dims dims, const std::vector<std::int64_t>& values) {
  Constant c;
  c.dtype = TensorProto::INT64;
  c.dims = std::move(dims);
  for (std::int64_t v : values) c.values.push_back(static_cast<double>(v));
  return c;
}

Constant binary(const std::string& op, const Constant& a, const Constant& b, const std::string& where) {
  if (a.dtype != b.dtype)
    throw Error(fmt::format("{}: operands are {} and {}", where, dtype_text(a.dtype), dtype_text(b.dtype)));
  Constant out;
  out.dtype = a.dtype;
  out.dims = broadcast_dims(a.dims, b.dims, where);
  check_folded_size(out.dims, where);
  const std::vector<std::int64_t> ia = broadcast_index(a.dims, out.dims), ib = broadcast_index(b.dims, out.dims);
  out.values.resize(ia.size());
  for (std::size_t i = 0; i < ia.size(); ++i) {
    const double x = a.values[static_cast<std::size_t>(ia[i])], y = b.values[static_cast<std::size_t>(ib[i])];
    double v = 0;
    if (op == "Add") v = x + y;
    else if (op == "Sub") v = x - y;
    else if (op == "Mul") v = x * y;
    else if (is_integer(a.dtype) && y == 0) throw Error(fmt::format("{}: integer division by zero", where));
    else v = x / y;
    out.values[i] = round_to(out.dtype, v);
  }
  return out;
}

// --- Tensor types: comparisons, logic, Where and Range folded (ONNX's definitions) ---------

/// A comparison or a logical op of two constants, broadcast: bools (1 or 0).
Constant compare(const std::string& op, const Constant& a, const Constant& b, const std::string& where) {
  if (a.dtype != b.dtype)
    throw Error(fmt::format("{}: operands are {} and {}", where, dtype_text(a.dtype), dtype_text(b.dtype)));
  Constant out;
  out.dtype = TensorProto::BOOL;
  out.dims = broadcast_dims(a.dims, b.dims, where);
  check_folded_size(out.dims, where);
  const std::vector<std::int64_t> ia = broadcast_index(a.dims, out.dims), ib = broadcast_index(b.dims, out.dims);
  out.values.resize(ia.size());
  for (std::size_t i = 0; i < ia.size(); ++i) {
    const double x = a.values[static_cast<std::size_t>(ia[i])], y = b.values[static_cast<std::size_t>(ib[i])];
    bool v = false;
    if (op == "Equal") v = x == y;
    else if (op == "Greater") v = x > y;
    else if (op == "GreaterOrEqual") v = x >= y;
    else if (op == "Less") v = x < y;
    else if (op == "LessOrEqual") v = x <= y;
    else if (op == "And") v = x != 0 && y != 0;
    else if (op == "Or") v = x != 0 || y != 0;
    else v = (x != 0) != (y != 0);  // Xor
    out.values[i] = v ? 1.0 : 0.0;
  }
  return out;
}

/// Where(condition, x, y) of constants, the three broadcast together.
Constant select(const Constant& condition, const Constant& x, const Constant& y, const std::string& where) {
  if (x.dtype != y.dtype)
    throw Error(fmt::format("{}: Where's values are {} and {}", where, dtype_text(x.dtype), dtype_text(y.dtype)));
  Constant out;
  out.dtype = x.dtype;
  out.dims = broadcast_dims(broadcast_dims(condition.dims, x.dims, where), y.dims, where);
  check_folded_size(out.dims, where);
  const std::vector<std::int64_t> ic = broadcast_index(condition.dims, out.dims),
                                  ix = broadcast_index(x.dims, out.dims), iy = broadcast_index(y.dims, out.dims);
  out.values.resize(ic.size());
  for (std::size_t i = 0; i < ic.size(); ++i)
    out.values[i] = condition.values[static_cast<std::size_t>(ic[i])] != 0 ? x.values[static_cast<std::size_t>(ix[i])]
                                                                           : y.values[static_cast<std::size_t>(iy[i])];
  return out;
}

/// Range(start, limit, delta) of scalars: max(ceil((limit - start) / delta), 0) values.
Constant range(const Constant& start, const Constant& limit, const Constant& delta, const std::string& where) {
  for (const Constant* c : {&start, &limit, &delta})
    if (c->values.size() != 1) throw Error(where + ": Range takes scalars start, limit and delta");
  if (start.dtype != limit.dtype || start.dtype != delta.dtype)
    throw Error(fmt::format("{}: Range's inputs are {}, {} and {}", where, dtype_text(start.dtype),
                            dtype_text(limit.dtype), dtype_text(delta.dtype)));
  const double first = start.values[0], step = delta.values[0];
  if (step == 0 || !std::isfinite(step) || !std::isfinite(first) || !std::isfinite(limit.values[0]))
    throw Error(where + ": Range needs a finite start and limit and a finite delta other than 0");
  const double count = std::max(std::ceil((limit.values[0] - first) / step), 0.0);
  if (count > static_cast<double>(kMaxFoldedElements))
    throw Error(fmt::format("{}: not supported: folding a Range of {} elements, more than {}", where, count,
                            kMaxFoldedElements));
  Constant out;
  out.dtype = start.dtype;
  out.dims = {static_cast<std::int64_t>(count)};
  for (std::int64_t i = 0; i < out.dims[0]; ++i) out.values.push_back(round_to(out.dtype, first + step * i));
  return out;
}

/// The axes a Squeeze/Unsqueeze names: an attribute before opset 13, the second input after.
std::vector<std::int64_t> axes_of(const onnx::NodeProto& node, const std::vector<const Constant*>& inputs,
                                  std::int64_t opset) {
  if (opset >= 13 && inputs.size() > 1 && inputs[1]) return ints_of(*inputs[1]);
  return ints_attribute(node, "axes");
}

Constant slice(const onnx::NodeProto& node, const std::vector<const Constant*>& in, std::int64_t opset,
               const std::string& where) {
  const Constant& data = *in[0];
  const auto rank = static_cast<std::int64_t>(data.dims.size());
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (opset < 10) {
    starts = ints_attribute(node, "starts");
    ends = ints_attribute(node, "ends");
    axes = ints_attribute(node, "axes");
  } else {
    if (in.size() < 3 || !in[1] || !in[2]) throw Error(where + ": Slice needs starts and ends");
    starts = ints_of(*in[1]);
    ends = ints_of(*in[2]);
    if (in.size() > 3 && in[3]) axes = ints_of(*in[3]);
    if (in.size() > 4 && in[4]) steps = ints_of(*in[4]);
  }
  if (axes.empty())
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(starts.size()); ++i) axes.push_back(i);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw Error(where + ": Slice's starts, ends, axes and steps differ in length");
  Dims begin(data.dims.size(), 0), step(data.dims.size(), 1), count = data.dims;
  axes = normalize_axes(axes, rank, where);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::int64_t axis = axes[i];
    const std::int64_t dim = data.dims[static_cast<std::size_t>(axis)];
    const std::int64_t s = steps[i];
    if (s == 0) throw Error(where + ": Slice step 0");
    auto clamp = [&](std::int64_t v, std::int64_t low, std::int64_t high) {
      if (v < 0) v = v <= INT64_MIN + dim ? low : v + dim;
      return std::clamp(v, low, high);
    };
    std::int64_t first = s > 0 ? clamp(starts[i], 0, dim) : clamp(starts[i], -1, dim - 1);
    std::int64_t last = s > 0 ? clamp(ends[i], 0, dim) : clamp(ends[i], -1, dim - 1);
    const std::int64_t n =
        s > 0 ? (last > first ? (last - first + s - 1) / s : 0) : (first > last ? (first - last - s - 1) / -s : 0);
    begin[static_cast<std::size_t>(axis)] = first;
    step[static_cast<std::size_t>(axis)] = s;
    count[static_cast<std::size_t>(axis)] = n;
  }
  Constant out;
  out.dtype = data.dtype;
  out.dims = count;
  const Dims strides = strides_of(data.dims);
  const std::int64_t total = element_count(count, where);
  Dims position(count.size(), 0);
  for (std::int64_t flat = 0; flat < total; ++flat) {
    std::int64_t source = 0;
    for (std::size_t axis = 0; axis < count.size(); ++axis)
      source += (begin[axis] + position[axis] * step[axis]) * strides[axis];
    out.values.push_back(data.values[static_cast<std::size_t>(source)]);
    for (std::size_t axis = count.size(); axis-- > 0;) {
      if (++position[axis] < count[axis]) break;
      position[axis] = 0;
    }
  }
  return out;
}

Constant concat(const std::vector<const Constant*>& in, std::int64_t axis_attribute, const std::string& where) {
  const Constant& first = *in.at(0);
  const std::int64_t axis = normalize_axis(axis_attribute, static_cast<std::int64_t>(first.dims.size()), where);
  Constant out;
  out.dtype = first.dtype;
  out.dims = first.dims;
  out.dims[static_cast<std::size_t>(axis)] = 0;
  for (const Constant* c : in) {
    if (!c || c->dims.size() != first.dims.size() || c->dtype != first.dtype)
      throw Error(where + ": Concat inputs differ in rank or type");
    for (std::size_t d = 0; d < first.dims.size(); ++d)
      if (d != static_cast<std::size_t>(axis) && c->dims[d] != first.dims[d])
        throw Error(where + ": Concat inputs differ in shape");
    out.dims[static_cast<std::size_t>(axis)] += c->dims[static_cast<std::size_t>(axis)];
  }
  check_folded_size(out.dims, where);
  std::int64_t outer = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= first.dims[static_cast<std::size_t>(d)];
  for (std::int64_t o = 0; o < outer; ++o)
    for (const Constant* c : in) {
      const std::int64_t block = static_cast<std::int64_t>(c->values.size()) / outer;
      out.values.insert(out.values.end(), c->values.begin() + o * block, c->values.begin() + (o + 1) * block);
    }
  return out;
}

Constant gather(const Constant& data, const Constant& indices, std::int64_t axis_attribute, const std::string& where) {
  const std::int64_t axis = normalize_axis(axis_attribute, static_cast<std::int64_t>(data.dims.size()), where);
  const std::int64_t dim = data.dims[static_cast<std::size_t>(axis)];
  Constant out;
  out.dtype = data.dtype;
  out.dims.assign(data.dims.begin(), data.dims.begin() + axis);
  out.dims.insert(out.dims.end(), indices.dims.begin(), indices.dims.end());
  out.dims.insert(out.dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  check_folded_size(out.dims, where);
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= data.dims[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < data.dims.size(); ++d) inner *= data.dims[d];
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t index : ints_of(indices)) {
      if (index < -dim || index >= dim)
        throw Error(fmt::format("{}: Gather index {} is out of range for a dim of {}", where, index, dim));
      if (index < 0) index += dim;
      const auto from = data.values.begin() + (o * dim + index) * inner;
      out.values.insert(out.values.end(), from, from + inner);
    }
  return out;
}

/// GatherElements: out[i] = data[i with its `axis` coordinate replaced by indices[i]].
Constant gather_elements(const Constant& data, const Constant& indices, std::int64_t axis_attribute,
                         const std::string& where) {
  const auto rank = static_cast<std::int64_t>(data.dims.size());
  const std::int64_t axis = normalize_axis(axis_attribute, rank, where);
  if (indices.dims.size() != data.dims.size())
    throw Error(fmt::format("{}: GatherElements' indices have rank {}, its data {}", where, indices.dims.size(), rank));
  for (std::int64_t d = 0; d < rank; ++d)
    if (d != axis && indices.dims[static_cast<std::size_t>(d)] > data.dims[static_cast<std::size_t>(d)])
      throw Error(fmt::format("{}: GatherElements' indices [{}] exceed its data [{}] on axis {}", where,
                              fmt::join(indices.dims, ", "), fmt::join(data.dims, ", "), d));
  const std::int64_t dim = data.dims[static_cast<std::size_t>(axis)];
  Constant out{data.dtype, indices.dims, {}};
  const std::vector<std::int64_t> picks = ints_of(indices);
  out.values.reserve(picks.size());
  std::vector<std::int64_t> at(static_cast<std::size_t>(rank), 0);  // the output element's coordinates
  for (std::int64_t pick : picks) {
    if (pick < -dim || pick >= dim)
      throw Error(fmt::format("{}: GatherElements index {} is out of range for a dim of {}", where, pick, dim));
    std::int64_t flat = 0;
    for (std::int64_t d = 0; d < rank; ++d)
      flat = flat * data.dims[static_cast<std::size_t>(d)] +
             (d == axis ? (pick < 0 ? pick + dim : pick) : at[static_cast<std::size_t>(d)]);
    out.values.push_back(data.values[static_cast<std::size_t>(flat)]);
    for (std::int64_t d = rank; d-- > 0;) {  // the next coordinates, row-major
      if (++at[static_cast<std::size_t>(d)] < indices.dims[static_cast<std::size_t>(d)]) break;
      at[static_cast<std::size_t>(d)] = 0;
    }
  }
  return out;
}

}  // namespace

std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& node, const std::string& name) {
  const onnx::AttributeProto* attribute = find_attribute(node, name);
  if (!attribute) return {};
  return {attribute->ints().begin(), attribute->ints().end()};
}

Constant read_tensor(const TensorProto& tensor, const std::string& where) {
  if (tensor.data_location() == TensorProto::EXTERNAL)
    throw Error(where +
                ": its data is stored in an external file, which is not supported; save the model with "
                "its weights inside (onnx.save(model, path, save_as_external_data=False))");
  Constant c;
  c.dtype = tensor.data_type();
  c.dims.assign(tensor.dims().begin(), tensor.dims().end());
  const std::int64_t count = element_count(c.dims, where);
  const std::size_t width = raw_bytes(c.dtype);
  if (width == 0)
    throw Error(fmt::format("{}: element type {} is not supported (float, float16, double and integer types are)",
                            where, dtype_text(c.dtype)));
  // The values a tensor holds are counted before anything is allocated: its dims are untrusted.
  std::size_t given = 0;
  if (tensor.has_raw_data()) {
    const std::size_t bytes = tensor.raw_data().size();
    if (bytes % width != 0)
      throw Error(fmt::format("{}: raw_data of {} bytes is not a whole number of {}-byte values", where, bytes, width));
    given = bytes / width;
  } else if (c.dtype == TensorProto::FLOAT) {
    given = static_cast<std::size_t>(tensor.float_data_size());
  } else if (c.dtype == TensorProto::DOUBLE) {
    given = static_cast<std::size_t>(tensor.double_data_size());
  } else if (c.dtype == TensorProto::INT64) {
    given = static_cast<std::size_t>(tensor.int64_data_size());
  } else if (c.dtype == TensorProto::UINT32 || c.dtype == TensorProto::UINT64) {
    given = static_cast<std::size_t>(tensor.uint64_data_size());
  } else {  // float16 (bit patterns), the small integers and bool live in int32_data
    given = static_cast<std::size_t>(tensor.int32_data_size());
  }
  if (given != static_cast<std::size_t>(count))
    throw Error(
        fmt::format("{}: holds {} values but its dims [{}] need {}", where, given, fmt::join(c.dims, ", "), count));
  c.values.reserve(given);
  if (tensor.has_raw_data()) {
    const std::string& raw = tensor.raw_data();
    for (std::size_t i = 0; i < given; ++i) c.values.push_back(raw_value(c.dtype, raw.data() + i * width));
  } else if (c.dtype == TensorProto::FLOAT) {
    c.values.assign(tensor.float_data().begin(), tensor.float_data().end());
  } else if (c.dtype == TensorProto::DOUBLE) {
    c.values.assign(tensor.double_data().begin(), tensor.double_data().end());
  } else if (c.dtype == TensorProto::INT64) {
    for (std::int64_t v : tensor.int64_data()) c.values.push_back(static_cast<double>(v));
  } else if (c.dtype == TensorProto::UINT32 || c.dtype == TensorProto::UINT64) {
    for (std::uint64_t v : tensor.uint64_data()) c.values.push_back(static_cast<double>(v));
  } else {
    for (std::int32_t v : tensor.int32_data())
      c.values.push_back(c.dtype == TensorProto::FLOAT16 ? half_to_float(static_cast<std::uint16_t>(v))
                                                         : round_to(c.dtype, v));
  }
  return c;
}

Constant transpose(const Constant& in, std::vector<std::int64_t> perm, const std::string& where) {
  const auto rank = static_cast<std::int64_t>(in.dims.size());
  if (perm.empty())
    for (std::int64_t i = rank; i-- > 0;) perm.push_back(i);
  std::vector<std::int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < rank; ++i)
    if (static_cast<std::int64_t>(sorted.size()) != rank || sorted[static_cast<std::size_t>(i)] != i)
      throw Error(fmt::format("{}: perm [{}] is not a permutation of {} axes", where, fmt::join(perm, ", "), rank));
  Constant out;
  out.dtype = in.dtype;
  for (std::int64_t p : perm) out.dims.push_back(in.dims[static_cast<std::size_t>(p)]);
  const Dims in_strides = strides_of(in.dims);
  const std::int64_t total = element_count(out.dims, where);
  out.values.resize(static_cast<std::size_t>(total));
  Dims position(out.dims.size(), 0);
  for (std::int64_t flat = 0; flat < total; ++flat) {
    std::int64_t source = 0;
    for (std::size_t axis = 0; axis < out.dims.size(); ++axis)
      source += position[axis] * in_strides[static_cast<std::size_t>(perm[axis])];
    out.values[static_cast<std::size_t>(flat)] = in.values[static_cast<std::size_t>(source)];
    for (std::size_t axis = out.dims.size(); axis-- > 0;) {
      if (++position[axis] < out.dims[axis]) break;
      position[axis] = 0;
    }
  }
  return out;
}

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& attribute : node.attribute())
    if (attribute.name() == name) return &attribute;
  return nullptr;
}

std::int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, std::int64_t fallback) {
  const onnx::AttributeProto* attribute = find_attribute(node, name);
  return attribute ? attribute->i() : fallback;
}

float float_attribute(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const onnx::AttributeProto* attribute = find_attribute(node, name);
  return attribute ? attribute->f() : fallback;
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, const std::string& where) {
  const std::int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= std::max<std::int64_t>(rank, 1))
    throw Error(fmt::format("{}: axis {} is out of range for rank {}", where, axis, rank));
  return normalized;
}

Dims broadcast_dims(const Dims& a, const Dims& b, const std::string& where) {
  Dims out(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const std::int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1)
      throw Error(
          fmt::format("{}: dims [{}] and [{}] do not broadcast", where, fmt::join(a, ", "), fmt::join(b, ", ")));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<double> expand_to(const Constant& c, const Dims& dims) {
  check_values(c, "a constant operand");
  std::vector<double> out;
  for (std::int64_t index : broadcast_index(c.dims, dims)) out.push_back(c.values[static_cast<std::size_t>(index)]);
  return out;
}

Dims reshape_dims(const Dims& input, const Constant& shape, bool allow_zero, const std::string& where) {
  Dims out = ints_of(shape);
  std::int64_t known = 1, inferred = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allow_zero) {
      if (i >= input.size())
        throw Error(fmt::format("{}: Reshape copies dim {} of a rank-{} input", where, i, input.size()));
      out[i] = input[i];
    }
    if (out[i] == -1) {
      if (inferred >= 0) throw Error(where + ": Reshape has two -1 dims");
      inferred = static_cast<std::int64_t>(i);
    } else if (out[i] < 0) {
      throw Error(fmt::format("{}: Reshape dim {} is negative", where, out[i]));
    } else {
      known *= out[i];
    }
  }
  const std::int64_t total = element_count(input, where);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) throw Error(where + ": Reshape cannot infer its -1 dim");
    out[static_cast<std::size_t>(inferred)] = total / known;
  } else if (known != total) {
    throw Error(fmt::format("{}: Reshape of {} elements to [{}]", where, total, fmt::join(out, ", ")));
  }
  return out;
}

bool is_foldable(const std::string& op) {
  static const std::set<std::string> folded = {
      "Constant", "Identity", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Gather", "Slice",
      "Transpose", "Add", "Sub", "Mul", "Div", "Neg", "Shape", "Size", "ConstantOfShape",
      // Tensor types: comparisons, logic, Where and Range on constants (frozen inputs, shapes).
      "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "Not", "Where", "Range",
      "GatherElements"};
  return folded.count(op) != 0;
}

/// The dims a fold would produce, for the ops whose output can be much larger than their inputs.
static void check_folded_size(const Dims& dims, const std::string& where) {
  if (element_count(dims, where) > kMaxFoldedElements)
    throw Error(fmt::format("{}: not supported: folding a constant of dims [{}], more than {} elements", where,
                            fmt::join(dims, ", "), kMaxFoldedElements));
}

void check_values(const Constant& c, const std::string& where) {
  const std::int64_t expected = element_count(c.dims, where);
  if (static_cast<std::int64_t>(c.values.size()) != expected)
    throw Error(fmt::format("{}: a constant of dims [{}] holds {} values, not the {} its dims need", where,
                            fmt::join(c.dims, ", "), c.values.size(), expected));
}

std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, std::int64_t rank,
                                         const std::string& where) {
  std::vector<std::int64_t> normalized;
  std::set<std::int64_t> seen;
  for (std::int64_t axis : axes) {
    normalized.push_back(normalize_axis(axis, rank, where));
    if (!seen.insert(normalized.back()).second)
      throw Error(fmt::format("{}: axes [{}] name axis {} twice", where, fmt::join(axes, ", "), normalized.back()));
  }
  return normalized;
}

static std::vector<Constant> fold(const onnx::NodeProto& node, const std::vector<const Constant*>& in,
                                  std::int64_t opset, const std::string& where);

std::vector<Constant> fold_node(const onnx::NodeProto& node, const std::vector<const Constant*>& in, std::int64_t opset,
                                const std::string& where) {
  for (const Constant* c : in)
    if (c) check_values(*c, where);
  std::vector<Constant> outputs = fold(node, in, opset, where);
  for (const Constant& c : outputs) check_values(c, where);
  return outputs;
}

static std::vector<Constant> fold(const onnx::NodeProto& node, const std::vector<const Constant*>& in,
                                  std::int64_t opset, const std::string& where) {
  const std::string& op = node.op_type();
  auto input = [&](std::size_t i) -> const Constant& {
    if (i >= in.size() || !in[i]) throw Error(fmt::format("{}: input {} is missing", where, i));
    return *in[i];
  };
  if (op == "Constant") {
    if (node.attribute_size() != 1) throw Error(where + ": Constant needs exactly one value attribute");
    const onnx::AttributeProto& a = node.attribute(0);
    Constant c;
    if (a.name() == "value") return {read_tensor(a.t(), where)};
    if (a.name() == "value_float") return {Constant{TensorProto::FLOAT, {}, {static_cast<double>(a.f())}}};
    if (a.name() == "value_int") return {int64_constant({}, {a.i()})};
    if (a.name() == "value_floats") {
      c.dims = {a.floats_size()};
      for (float f : a.floats()) c.values.push_back(f);
      return {c};
    }
    if (a.name() == "value_ints") return {int64_constant({a.ints_size()}, {a.ints().begin(), a.ints().end()})};
    throw Error(fmt::format("{}: Constant attribute '{}' is not supported (value, value_float(s), value_int(s) are)",
                            where, a.name()));
  }
  if (op == "Identity") return {input(0)};
  if (op == "Neg") {
    Constant c = input(0);
    for (double& v : c.values) v = -v;
    return {c};
  }
  if (op == "Cast") {
    Constant c = input(0);
    c.dtype = static_cast<int>(int_attribute(node, "to", TensorProto::FLOAT));
    if (raw_bytes(c.dtype) == 0)
      throw Error(fmt::format("{}: Cast to {} is not supported", where, dtype_text(c.dtype)));
    for (double& v : c.values) v = round_to(c.dtype, v);
    return {c};
  }
  if (op == "Shape" || op == "Size") {
    const Dims& dims = input(0).dims;
    if (op == "Size") return {int64_constant({}, {element_count(dims, where)})};
    auto rank = static_cast<std::int64_t>(dims.size());
    std::int64_t start = int_attribute(node, "start", 0), end = int_attribute(node, "end", rank);
    start = std::clamp(start < 0 ? start + rank : start, std::int64_t{0}, rank);
    end = std::clamp(end < 0 ? end + rank : end, std::int64_t{0}, rank);
    std::vector<std::int64_t> values(dims.begin() + start, dims.begin() + std::max(start, end));
    return {int64_constant({static_cast<std::int64_t>(values.size())}, values)};
  }
  if (op == "ConstantOfShape") {
    Constant c;
    c.dims = ints_of(input(0));
    const onnx::AttributeProto* value = find_attribute(node, "value");
    Constant fill = value ? read_tensor(value->t(), where) : Constant{TensorProto::FLOAT, {1}, {0.0}};
    if (fill.values.size() != 1) throw Error(where + ": ConstantOfShape's value must hold one element");
    c.dtype = fill.dtype;
    check_folded_size(c.dims, where);
    c.values.assign(static_cast<std::size_t>(element_count(c.dims, where)), fill.values[0]);
    return {c};
  }
  if (op == "Reshape") {
    Constant c = input(0);
    c.dims = reshape_dims(c.dims, input(1), int_attribute(node, "allowzero", 0) != 0, where);
    return {c};
  }
  if (op == "Flatten") {
    Constant c = input(0);
    const auto rank = static_cast<std::int64_t>(c.dims.size());
    std::int64_t axis = int_attribute(node, "axis", 1);
    axis = axis < 0 ? axis + rank : axis;
    if (axis < 0 || axis > rank) throw Error(fmt::format("{}: Flatten axis {} for rank {}", where, axis, rank));
    std::int64_t outer = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= c.dims[static_cast<std::size_t>(d)];
    c.dims = {outer, outer == 0 ? 0 : static_cast<std::int64_t>(c.values.size()) / outer};
    return {c};
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    Constant c = input(0);
    const std::vector<std::int64_t> axes = axes_of(node, in, opset);
    if (op == "Squeeze") {
      const auto rank = static_cast<std::int64_t>(c.dims.size());
      std::set<std::int64_t> drop;
      for (std::int64_t axis : normalize_axes(axes, rank, where)) {
        if (c.dims[static_cast<std::size_t>(axis)] != 1)
          throw Error(fmt::format("{}: Squeeze of axis {}, whose dim is {}, not 1", where, axis,
                                  c.dims[static_cast<std::size_t>(axis)]));
        drop.insert(axis);
      }
      Dims dims;
      for (std::int64_t d = 0; d < rank; ++d)
        if (axes.empty() ? c.dims[static_cast<std::size_t>(d)] != 1 : !drop.count(d))
          dims.push_back(c.dims[static_cast<std::size_t>(d)]);
      c.dims = dims;
    } else {
      const auto rank = static_cast<std::int64_t>(c.dims.size() + axes.size());
      const std::vector<std::int64_t> normalized = normalize_axes(axes, rank, where);
      const std::set<std::int64_t> added(normalized.begin(), normalized.end());
      Dims dims;
      std::size_t next = 0;
      for (std::int64_t d = 0; d < rank; ++d) dims.push_back(added.count(d) ? 1 : c.dims.at(next++));
      c.dims = dims;
    }
    return {c};
  }
  if (op == "Concat") {
    if (in.empty()) throw Error(where + ": Concat of no inputs");
    for (std::size_t i = 0; i < in.size(); ++i) input(i);  // an absent input is an error, not a null read
    return {concat(in, int_attribute(node, "axis", 0), where)};
  }
  if (op == "Gather") return {gather(input(0), input(1), int_attribute(node, "axis", 0), where)};
  if (op == "GatherElements") return {gather_elements(input(0), input(1), int_attribute(node, "axis", 0), where)};
  if (op == "Slice") {
    input(0);
    return {slice(node, in, opset, where)};
  }
  if (op == "Transpose") return {transpose(input(0), ints_attribute(node, "perm"), where)};
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return {binary(op, input(0), input(1), where)};
  if (op == "Equal" || op == "Greater" || op == "GreaterOrEqual" || op == "Less" || op == "LessOrEqual" ||
      op == "And" || op == "Or" || op == "Xor")
    return {compare(op, input(0), input(1), where)};
  if (op == "Not") {
    Constant c = input(0);
    for (double& v : c.values) v = v == 0 ? 1.0 : 0.0;
    c.dtype = TensorProto::BOOL;
    return {c};
  }
  if (op == "Where") return {select(input(0), input(1), input(2), where)};
  if (op == "Range") return {range(input(0), input(1), input(2), where)};
  throw Error(fmt::format("{}: {} cannot be folded", where, op));
}

}  // namespace tessera::onnx_import
