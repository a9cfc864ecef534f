// Test support for the pass plugins: the bench, the float64 reference and two executors.
#include "pass_bench.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/sinks/ostream_sink.h>

namespace tessera::testing {

std::string config_path(const std::string& relative) {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/" + relative;
}

const std::vector<std::string>& default_passes() {
  static const std::vector<std::string> passes = {"lower-mid", "select-finalist", "place-storage",
                                                  "lower-exchanges", "emit-tile-code"};
  return passes;
}

PassBench::PassBench(const std::string& model_path, const std::string& target_path,
                     const std::string& cost_model_name, const std::string& scheduler_name) {
  host.load_directory(TESSERA_PLUGIN_DIR);
  state.model = load_model(model_path);
  state.target = load_target(target_path);
  state.facts.insert(facts::graph);
  auto find = [&](const std::string& name, PluginKind kind) -> const PluginInfo& {
    const PluginInfo* info = host.find(name);
    if (!info) throw std::runtime_error(host.unknown_plugin_message(name, kind));
    return *info;
  };
  const PluginInfo& cost = find(cost_model_name, PluginKind::cost_model);
  cost_model = host.create_cost_model(cost, host.resolve_options(cost, {}, "test"));
  cost_info_ = &cost;
  const PluginInfo& sched = find(scheduler_name, PluginKind::exchange_scheduler);
  scheduler = host.create_scheduler(sched, host.resolve_options(sched, {}, "test"));
  logger_ = std::make_shared<spdlog::logger>("tessera.test", std::make_shared<spdlog::sinks::ostream_sink_st>(log_));
  logger_->set_pattern("%l %v");
  logger_->set_level(spdlog::level::info);
}

Status PassBench::run(const std::string& name, const Options& options) {
  const PluginInfo* info = host.find(name);
  if (!info) return Status::failure(host.unknown_plugin_message(name, PluginKind::pass));
  std::unique_ptr<Pass> pass = host.create_pass(*info, host.resolve_options(*info, options, "test"));
  PassContext context{state.target, *cost_model, *scheduler, *logger_, fmt::format("phase{{phase=\"{}\"}}", name),
                      2000, threads, nullptr, {}, &state.record, name};
  if (duplicate_cost_model)
    context.new_cost_model = [this] { return host.create_cost_model(*cost_info_, host.resolve_options(*cost_info_, {}, "test")); };
  Status status = pass->run(state, context);
  if (status.ok) state.facts.insert(info->provided_facts.begin(), info->provided_facts.end());
  return status;
}

Status PassBench::run_through(const std::string& last, const std::map<std::string, Options>& options) {
  for (const std::string& name : default_passes()) {
    const auto given = options.find(name);
    Status status = run(name, given == options.end() ? Options{} : given->second);
    if (!status.ok) return Status::failure(name + ": " + status.message);
    if (name == last) return Status::success();
  }
  return Status::failure("no default pass named " + last);
}

std::vector<std::string> PassBench::log_lines(const std::string& text) const {
  std::vector<std::string> lines;
  std::istringstream in(log_.str());
  for (std::string line; std::getline(in, line);)
    if (line.find(text) != std::string::npos) lines.push_back(line);
  return lines;
}

std::uint64_t log_field(const std::string& line, const std::string& key) {
  const std::string needle = " " + key + "=";
  const std::size_t at = line.find(needle);
  if (at == std::string::npos) throw std::runtime_error("no field " + key + " in: " + line);
  return std::stoull(line.substr(at + needle.size()));
}

namespace {

/// Element (r, c) of a tensor's initial value, as the host streams it.
double initial(const Graph& model, const std::string& name, std::uint64_t index) {
  const std::int64_t t = model.find_tensor(name);
  if (t < 0) throw std::runtime_error("no tensor " + name + " in the model");
  return initial_value(model, model.tensors[t], index);
}

/// Runs one codelet on float words addressed by `word(operand, i)`.
template <typename Word>
void run_codelet(Codelet codelet, const std::vector<std::uint32_t>& p, Word&& word) {
  switch (codelet) {
    case Codelet::matmul:
    case Codelet::matmul_transposed: {
      const bool n_by_k = codelet == Codelet::matmul_transposed;  // b [n, k]: constant weights swapped
      for (std::uint32_t i = 0; i < p[0]; ++i)
        for (std::uint32_t j = 0; j < p[2]; ++j) {
          float sum = 0;
          for (std::uint32_t k = 0; k < p[1]; ++k)
            sum += word(0, i * p[1] + k) * word(1, n_by_k ? j * p[1] + k : k * p[2] + j);
          word(2, i * p[2] + j) = sum;
        }
      return;
    }
    case Codelet::reduce_add:
      for (std::uint32_t i = 0; i < p[1]; ++i) {
        float sum = 0;
        for (std::uint32_t part = 0; part < p[0]; ++part) sum += word(0, part * p[1] + i);
        word(1, i) = sum;
      }
      return;
    case Codelet::bias_add:
      for (std::uint32_t r = 0; r < p[0]; ++r)
        for (std::uint32_t c = 0; c < p[1]; ++c) {
          float& value = word(0, r * p[1] + c);
          value += word(1, c);
          if (p[2] != 0) value = std::max(value, 0.0f);
        }
      return;
    case Codelet::relu:
      for (std::uint32_t i = 0; i < p[0]; ++i) word(0, i) = std::max(word(0, i), 0.0f);
      return;
    case Codelet::add:
      for (std::uint32_t i = 0; i < p[0]; ++i) word(2, i) = word(0, i) + word(1, i);
      return;
    case Codelet::copy:
      for (std::uint32_t i = 0; i < p[0]; ++i) word(1, i) = word(0, i);
      return;
    case Codelet::reduce_bias:
      for (std::uint32_t r = 0; r < p[1]; ++r)
        for (std::uint32_t c = 0; c < p[2]; ++c) {
          float sum = word(1, r * p[3] + c);
          for (std::uint32_t part = 0; part < p[0]; ++part) sum += word(0, (part * p[1] + r) * p[2] + c);
          sum += word(2, c);
          word(3, r * p[2] + c) = p[4] != 0 ? std::max(sum, 0.0f) : sum;
        }
      return;
    case Codelet::matmul_half:
    case Codelet::bias_add_half:
    case Codelet::softmax:
    case Codelet::layer_norm:
    case Codelet::unary:
    case Codelet::binary:
    case Codelet::binary_row:
    case Codelet::reduce_rows:
      break;  // float32 MLP programs only; the simulator runs the rest
  }
  throw std::runtime_error(fmt::format("pass bench does not execute codelet {}", codelet_name(codelet)));
}

}  // namespace

TensorValues reference_outputs(const Graph& model) {
  std::vector<std::vector<double>> values(model.tensors.size());
  for (std::size_t t = 0; t < model.tensors.size(); ++t)
    if (model.tensors[t].kind != TensorKind::intermediate)
      for (std::int64_t i = 0; i < model.tensors[t].elements(); ++i)
        values[t].push_back(initial_value(model, model.tensors[t], i));
  for (const Op& op : model.ops) {
    const Tensor& a = model.tensors[op.inputs[0]];
    const std::vector<double>& x = values[op.inputs[0]];
    std::vector<double> out;
    if (op.kind == OpKind::matmul || op.kind == OpKind::dense) {
      const Tensor& w = model.tensors[op.inputs[1]];
      const std::int64_t m = a.rows(), k = a.cols(), n = w.cols();
      out.assign(m * n, 0.0);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double sum = op.inputs.size() == 3 ? values[op.inputs[2]][j] : 0.0;
          for (std::int64_t p = 0; p < k; ++p) sum += x[i * k + p] * values[op.inputs[1]][p * n + j];
          out[i * n + j] = op.relu ? std::max(sum, 0.0) : sum;
        }
    } else if (op.kind == OpKind::add) {
      const std::vector<double>& y = values[op.inputs[1]];
      out = x;
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += y[i % y.size()];  // a row vector broadcasts
    } else {
      out = x;
      for (double& v : out) v = std::max(v, 0.0);
    }
    values[op.output] = std::move(out);
  }
  TensorValues outputs;
  for (std::uint32_t output : model.outputs) outputs[model.tensors[output].name] = values[output];
  return outputs;
}

TensorValues execute_program(const Program& program, const Graph& model) {
  std::vector<std::vector<float>> memory(program.buffers.size());
  std::vector<std::vector<bool>> written(program.buffers.size());
  for (std::size_t b = 0; b < program.buffers.size(); ++b) {
    memory[b].assign(program.buffers[b].bytes / 4, 0.0f);
    written[b].assign(program.buffers[b].bytes / 4, false);
  }
  auto read = [&](std::uint32_t buffer, std::uint64_t word) -> float& {
    if (!written.at(buffer).at(word))
      throw std::runtime_error(fmt::format("read of unwritten word {} of buffer '{}' on tile {}", word,
                                           program.buffers[buffer].name, program.buffers[buffer].tile));
    return memory[buffer][word];
  };
  auto write = [&](std::uint32_t buffer, std::uint64_t word) -> float& {
    written.at(buffer).at(word) = true;
    return memory[buffer][word];
  };
  for (const HostStream& stream : program.streams) {
    if (stream.kind == StreamKind::output) continue;
    for (const HostSlice& s : stream.slices)
      for (std::uint32_t r = 0; r < s.rows; ++r)
        for (std::uint32_t c = 0; c < s.cols; ++c)
          write(s.destination.buffer, s.destination.word_offset + (s.transposed ? c * s.rows + r : r * s.cols + c)) =
              static_cast<float>(initial(model, stream.tensor, std::uint64_t(s.row_begin + r) * stream.cols + s.col_begin + c));
  }
  for (const Superstep& step : program.supersteps) {
    for (const CodeletCall& call : step.compute) {
      // Output operands are written; everything else must have been written before.
      run_codelet(call.codelet, call.params, [&](std::uint32_t operand, std::uint64_t i) -> float& {
        const BufferRef& ref = call.operands.at(operand);
        const bool output = (is_matmul(call.codelet) && operand == 2) ||
                            (call.codelet == Codelet::reduce_add && operand == 1) ||
                            (call.codelet == Codelet::add && operand == 2) ||
                            (call.codelet == Codelet::copy && operand == 1) ||
                            (call.codelet == Codelet::reduce_bias && operand == 3);
        return output ? write(ref.buffer, ref.word_offset + i) : read(ref.buffer, ref.word_offset + i);
      });
    }
    std::vector<std::vector<float>> moved;
    for (const Copy& copy : step.copies) {
      moved.emplace_back();
      for (std::uint32_t w = 0; w < copy.words; ++w) moved.back().push_back(read(copy.source.buffer, copy.source.word_offset + w));
    }
    for (std::size_t i = 0; i < step.copies.size(); ++i)
      for (std::uint32_t w = 0; w < step.copies[i].words; ++w)
        write(step.copies[i].destination.buffer, step.copies[i].destination.word_offset + w) = moved[i][w];
  }
  TensorValues outputs;
  for (const HostStream& stream : program.streams) {
    if (stream.kind != StreamKind::output) continue;
    std::vector<double>& values = outputs[stream.tensor];
    values.assign(std::uint64_t(stream.rows) * stream.cols, std::nan(""));
    for (const HostSlice& s : stream.slices)
      for (std::uint32_t r = 0; r < s.rows; ++r)
        for (std::uint32_t c = 0; c < s.cols; ++c)
          values[std::uint64_t(s.row_begin + r) * stream.cols + s.col_begin + c] =
              read(s.destination.buffer, s.destination.word_offset + r * s.cols + c);
  }
  return outputs;
}

TensorValues execute_package(const Package& package, const Graph& model, const Target& target) {
  // Each tile's memory as floats, sized to its highest buffer.
  std::vector<std::vector<float>> memory(package.tiles.size());
  for (const TileImage& image : package.tiles) {
    std::uint64_t end = 0;
    for (const TileBufferEntry& entry : image.buffers) end = std::max<std::uint64_t>(end, entry.offset + entry.bytes);
    if (end > target.memory_bytes) throw std::runtime_error(fmt::format("tile {} uses {} bytes", image.tile, end));
    memory.at(image.tile).assign(end / 4, 0.0f);
  }
  auto word = [&](std::uint32_t tile, std::uint64_t address) -> float& {
    if (address % 4 != 0 || address / 4 >= memory.at(tile).size())
      throw std::runtime_error(fmt::format("tile {}: address {} is outside its buffers", tile, address));
    return memory[tile][address / 4];
  };
  for (const PackageStream& stream : package.streams) {
    if (stream.kind == StreamKind::output) continue;
    for (const PackageSlice& s : stream.slices)
      for (std::uint32_t r = 0; r < s.rows; ++r)
        for (std::uint32_t c = 0; c < s.cols; ++c)
          word(s.tile, s.address + 4ull * (s.transposed ? c * s.rows + r : r * s.cols + c)) =
              static_cast<float>(initial(model, stream.tensor, std::uint64_t(s.row_begin + r) * stream.cols + s.col_begin + c));
  }
  const std::size_t supersteps = package.tiles.empty() ? 0 : package.tiles[0].supersteps.size();
  for (std::size_t s = 0; s < supersteps; ++s) {
    for (const TileImage& image : package.tiles) {
      if (image.supersteps.size() != supersteps) throw std::runtime_error("tiles have different superstep counts");
      for (const TileCodeletCall& call : image.supersteps[s].compute)
        run_codelet(call.codelet, call.params, [&](std::uint32_t operand, std::uint64_t i) -> float& {
          return word(image.tile, call.addresses.at(operand) + 4 * i);
        });
    }
    // Words on the fabric: (sender, cycle) -> value, all read before any is stored.
    std::unordered_map<std::uint64_t, float> on_fabric;
    for (const TileImage& image : package.tiles)
      for (const TileSend& send : image.supersteps[s].sends)
        for (std::uint32_t w = 0; w < send.words; ++w) {
          const std::uint64_t key = (std::uint64_t{image.tile} << 44) | (send.cycle + w);
          if (!on_fabric.emplace(key, word(image.tile, send.address + 4ull * w)).second)
            throw std::runtime_error(fmt::format("superstep {}: tile {} sends two words in cycle {}", s, image.tile,
                                                 send.cycle + w));
        }
    std::size_t received = 0;
    for (const TileImage& image : package.tiles)
      for (const TileReceive& receive : image.supersteps[s].receives)
        for (std::uint32_t w = 0; w < receive.words; ++w) {
          const std::uint64_t latency = target.latency(receive.sender, image.tile);
          if (receive.arrival + w < latency) throw std::runtime_error("a word arrives before it could be sent");
          const std::uint64_t sent = receive.arrival + w - latency;
          auto it = on_fabric.find((std::uint64_t{receive.sender} << 44) | sent);
          if (it == on_fabric.end())
            throw std::runtime_error(fmt::format("superstep {}: tile {} expects a word from tile {} sent in cycle {}, "
                                                 "but none was sent", s, image.tile, receive.sender, sent));
          word(image.tile, receive.address + 4ull * w) = it->second;
          ++received;
        }
    (void)received;
  }
  TensorValues outputs;
  for (const PackageStream& stream : package.streams) {
    if (stream.kind != StreamKind::output) continue;
    std::vector<double>& values = outputs[stream.tensor];
    values.assign(std::uint64_t(stream.rows) * stream.cols, std::nan(""));
    for (const PackageSlice& s : stream.slices)
      for (std::uint32_t r = 0; r < s.rows; ++r)
        for (std::uint32_t c = 0; c < s.cols; ++c)
          values[std::uint64_t(s.row_begin + r) * stream.cols + s.col_begin + c] =
              word(s.tile, s.address + 4ull * (r * s.cols + c));
  }
  return outputs;
}

double max_relative_error(const TensorValues& actual, const TensorValues& expected) {
  if (actual.size() != expected.size()) throw std::runtime_error("different output sets");
  double worst = 0;
  for (const auto& [name, values] : expected) {
    const auto it = actual.find(name);
    if (it == actual.end() || it->second.size() != values.size())
      throw std::runtime_error("output " + name + " missing or of another size");
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double error = std::abs(it->second[i] - values[i]) / (1.0 + std::abs(values[i]));
      worst = std::isnan(error) ? INFINITY : std::max(worst, error);
    }
  }
  return worst;
}

}  // namespace tessera::testing
