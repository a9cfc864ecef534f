// State files: the compilation state as JSON, written with one record per line and read back
// with every field typed, every index checked and the core's validators run.
#include "tessera/state_file.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <string_view>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/strict_yaml.hpp"
#include "tessera/version.hpp"

namespace tessera {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kFormat = "tessera-state";
// Parsed, a state takes 20 to 30 times its text in memory: 256 MiB is within a few GiB.
constexpr std::uint64_t kMaxStateFileBytes = std::uint64_t{256} << 20;

// ---------------------------------------------------------------------------------------------
// Writing: straight to text, no JSON tree (a t1472 state is tens of megabytes). Records (a
// tensor, a buffer, a call, a copy, a transfer...) take one line each, so states diff line by line.

// A JSON string: quotes, backslashes and control characters escaped.
void quoted(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        else out += c;
    }
  }
  out += '"';
}

// Shortest text that reads back to the same double; a non-finite value (which no valid state
// holds) as null, which the reader refuses by its place.
void number(std::string& out, double value) {
  if (!std::isfinite(value)) out += "null";
  else fmt::format_to(std::back_inserter(out), "{}", value);
}

// One record: `{"key": value, ...}` on one line. Values are appended by the caller's lambdas.
class Record {
public:
  explicit Record(std::string& out) : out_(out) { out_ += '{'; }
  ~Record() { out_ += '}'; }
  Record& key(const char* name) {
    if (!first_) out_ += ", ";
    first_ = false;
    out_ += '"';
    out_ += name;
    out_ += "\": ";
    return *this;
  }
  Record& u(const char* name, std::uint64_t v) {
    key(name);
    fmt::format_to(std::back_inserter(out_), "{}", v);
    return *this;
  }
  Record& i(const char* name, std::int64_t v) {
    key(name);
    fmt::format_to(std::back_inserter(out_), "{}", v);
    return *this;
  }
  Record& f(const char* name, double v) {
    key(name);
    number(out_, v);
    return *this;
  }
  Record& b(const char* name, bool v) {
    key(name);
    out_ += v ? "true" : "false";
    return *this;
  }
  Record& s(const char* name, std::string_view v) {
    key(name);
    quoted(out_, v);
    return *this;
  }
  template <typename Range>
  Record& list(const char* name, const Range& values) {
    key(name);
    fmt::format_to(std::back_inserter(out_), "[{}]", fmt::join(values, ", "));
    return *this;
  }

private:
  std::string& out_;
  bool first_ = true;
};

// A pretty-printed object whose members are laid out one per line.
class Block {
public:
  Block(std::string& out, std::string indent) : out_(out), indent_(std::move(indent)) { out_ += '{'; }
  ~Block() { out_ += "\n" + indent_ + "}"; }
  /// Starts member `name`; the caller writes its value.
  std::string& member(const char* name) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_ += indent_ + "  \"" + name + "\": ";
    return out_;
  }
  std::string inner() const { return indent_ + "  "; }
  void u(const char* name, std::uint64_t v) { fmt::format_to(std::back_inserter(member(name)), "{}", v); }
  void f(const char* name, double v) { number(member(name), v); }
  void b(const char* name, bool v) { member(name) += v ? "true" : "false"; }
  void s(const char* name, std::string_view v) { quoted(member(name), v); }
  /// A list with one element per line, each written by `write(out, element)`.
  template <typename T, typename Write>
  void lines(const char* name, const std::vector<T>& items, Write write) {
    std::string& out = member(name);
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t k = 0; k < items.size(); ++k) {
      out += (k ? ",\n" : "\n") + indent_ + "    ";
      write(out, items[k]);
    }
    out += "\n" + indent_ + "  ]";
  }

private:
  std::string& out_;
  std::string indent_;
  bool first_ = true;
};

void write_target(std::string& out, const std::string& indent, const Target& t) {
  Block o(out, indent);
  o.s("name", t.name);
  o.s("source_file", t.source_file);
  o.u("tiles", t.tiles);
  o.u("tiles_per_column", t.tiles_per_column);
  o.u("memory_bytes", t.memory_bytes);
  o.u("memory_element_bytes", t.memory_element_bytes);
  o.u("interleaved_start", t.interleaved_start);
  o.u("alignment", t.alignment);
  o.u("worker_threads", t.worker_threads);
  o.f("clock_hz", t.clock_hz);
  o.u("fp32_macs_per_cycle", t.fp32_macs_per_cycle);
  o.u("fp16_macs_per_cycle", t.fp16_macs_per_cycle);
  o.u("amp_fp32_input_channels", t.amp_fp32_input_channels);
  o.u("amp_fp32_output_channels", t.amp_fp32_output_channels);
  o.u("amp_fp16_input_channels", t.amp_fp16_input_channels);
  o.u("amp_fp16_output_channels", t.amp_fp16_output_channels);
  o.u("load_bytes_per_cycle", t.load_bytes_per_cycle);
  o.u("exchange_word_bytes", t.exchange_word_bytes);
  o.u("exchange_base_latency", t.exchange_base_latency);
  o.f("exchange_latency_per_column", t.exchange_latency_per_column);
  o.u("switch_cost", t.switch_cost);
  o.b("multicast", t.multicast);
  o.u("sync_cycles", t.sync_cycles);
  o.u("exchange_phase_overhead", t.exchange_phase_overhead);
  o.f("host_bytes_per_cycle", t.host_bytes_per_cycle);
  o.u("host_call_latency_cycles", t.host_call_latency_cycles);
}

const char* tensor_kind_name(TensorKind k) {
  return k == TensorKind::input ? "input" : k == TensorKind::weight ? "weight" : "intermediate";
}

void write_graph(std::string& out, const std::string& indent, const Graph& g) {
  Block o(out, indent);
  o.s("name", g.name);
  o.s("source_file", g.source_file);
  o.s("source_sha256", g.source_sha256);
  if (!g.import_options.empty())  // states of models compiled as they are read as before
    o.lines("import_options", g.import_options,
            [](std::string& line, const std::string& option) { Record(line).s("option", option); });
  o.u("seed", g.seed);
  o.lines("tensors", g.tensors, [](std::string& line, const Tensor& t) {
    Record(line)
        .s("name", t.name)
        .list("shape", t.shape)
        .s("dtype", dtype_name(t.dtype))
        .s("kind", tensor_kind_name(t.kind))
        .f("init_scale", t.init_scale)
        .list("place", std::array{t.place.line, t.place.column});
  });
  o.lines("ops", g.ops, [](std::string& line, const Op& op) {
    Record record(line);
    record.s("kind", op_kind_name(op.kind)).list("inputs", op.inputs).u("output", op.output).b("relu", op.relu);
    record.b("transpose_b", op.transpose_b);
    if (op.batch != 1) record.u("batch", op.batch);  // states of unbatched graphs read as before
    if (op.heads != 1) record.u("heads", op.heads);
    if (op.kind == OpKind::slice_columns) record.u("column_begin", op.column_begin).u("column_count", op.column_count);
    if (is_window(op.kind)) record.list("window", window_fields(op.window));
    if (op.kind == OpKind::clip) record.f("clip_low", op.clip_low).f("clip_high", op.clip_high);
    if (op.kind == OpKind::unary || op.kind == OpKind::reduce) record.u("function", op.function);
    if (op.alpha != 0.0) record.f("alpha", op.alpha);
    if (op.kind == OpKind::gather) {
      // A run: [output_begin, input, input_begin, length, input_stride, repeat, output_step, input_step].
      std::vector<std::string> runs;
      for (const GatherRun& r : op.gather_runs)
        runs.push_back(fmt::format("[{}, {}, {}, {}, {}, {}, {}, {}]", r.output_begin, r.input, r.input_begin, r.length,
                                   r.input_stride, r.repeat, r.output_step, r.input_step));
      record.list("gather_shape", op.gather_shape).list("gather_runs", runs);
    }
    record.f("scale", op.scale)
        .f("epsilon", op.epsilon)
        .f("exponent", op.exponent)
        .list("place", std::array{op.place.line, op.place.column});
  });
  fmt::format_to(std::back_inserter(o.member("outputs")), "[{}]", fmt::join(g.outputs, ", "));
}

template <typename Slices, typename WriteSlice>
void write_stream(std::string& out, const std::string& indent, const std::string& tensor, StreamKind kind,
                  std::uint32_t rows, std::uint32_t cols, DType dtype, const Slices& slices, WriteSlice write_slice) {
  Block o(out, indent);
  o.s("tensor", tensor);
  o.s("kind", stream_kind_name(kind));
  o.u("rows", rows);
  o.u("cols", cols);
  o.s("dtype", dtype_name(dtype));
  o.lines("slices", slices, write_slice);
}

void write_program(std::string& out, const std::string& indent, const Program& p) {
  Block o(out, indent);
  o.lines("buffers", p.buffers, [](std::string& line, const Buffer& b) {
    Record(line)
        .s("name", b.name)
        .u("tile", b.tile)
        .u("bytes", b.bytes)
        .s("region", region_name(b.region))
        .u("alignment", b.alignment)
        .u("first_use", b.first_use)
        .u("last_use", b.last_use)
        .i("offset", b.offset);
  });
  o.lines("supersteps", p.supersteps, [&](std::string& line, const Superstep& step) {
    Block s(line, o.inner() + "  ");
    s.s("label", step.label);
    s.lines("compute", step.compute, [](std::string& l, const CodeletCall& c) {
      Record r(l);
      r.u("tile", c.tile).s("codelet", codelet_name(c.codelet)).key("operands");
      l += '[';
      for (std::size_t k = 0; k < c.operands.size(); ++k)
        fmt::format_to(std::back_inserter(l), "{}[{}, {}]", k ? ", " : "", c.operands[k].buffer,
                       c.operands[k].word_offset);
      l += ']';
      r.list("params", c.params);
    });
    // [source buffer, word offset, destination buffer, word offset, words]
    s.lines("copies", step.copies, [](std::string& l, const Copy& c) {
      fmt::format_to(std::back_inserter(l), "[{}, {}, {}, {}, {}]", c.source.buffer, c.source.word_offset,
                     c.destination.buffer, c.destination.word_offset, c.words);
    });
    {
      Block x(s.member("exchange"), s.inner());
      x.u("tiles", step.exchange.tiles);
      x.lines("transfers", step.exchange.transfers, [](std::string& l, const Transfer& t) {
        Record(l)
            .u("source", t.source)
            .list("destinations", t.destinations)
            .u("words", t.words)
            .u("source_address", t.source_address)
            .list("destination_addresses", t.destination_addresses);
      });
    }
    s.lines("schedule", step.schedule.segments, [](std::string& l, const Segment& g) {
      fmt::format_to(std::back_inserter(l), "[{}, {}, {}]", g.transfer, g.start, g.words);
    });
  });
  o.lines("streams", p.streams, [&](std::string& line, const HostStream& h) {
    write_stream(line, o.inner() + "  ", h.tensor, h.kind, h.rows, h.cols, h.dtype, h.slices,
                 [](std::string& l, const HostSlice& s) {
                   Record r(l);
                   r.key("destination");
                   fmt::format_to(std::back_inserter(l), "[{}, {}]", s.destination.buffer, s.destination.word_offset);
                   r.u("row_begin", s.row_begin)
                       .u("rows", s.rows)
                       .u("col_begin", s.col_begin)
                       .u("cols", s.cols)
                       .b("transposed", s.transposed);
                 });
  });
}

void write_package(std::string& out, const std::string& indent, const Package& p) {
  Block o(out, indent);
  o.lines("streams", p.streams, [&](std::string& line, const PackageStream& h) {
    write_stream(line, o.inner() + "  ", h.tensor, h.kind, h.rows, h.cols, h.dtype, h.slices,
                 [](std::string& l, const PackageSlice& s) {
                   Record(l)
                       .u("tile", s.tile)
                       .u("address", s.address)
                       .u("row_begin", s.row_begin)
                       .u("rows", s.rows)
                       .u("col_begin", s.col_begin)
                       .u("cols", s.cols)
                       .b("transposed", s.transposed);
                 });
  });
  o.lines("tiles", p.tiles, [&](std::string& line, const TileImage& t) {
    Block tile(line, o.inner() + "  ");
    tile.u("tile", t.tile);
    tile.lines("buffers", t.buffers, [](std::string& l, const TileBufferEntry& b) {
      fmt::format_to(std::back_inserter(l), "[{}, {}, \"{}\"]", b.offset, b.bytes, region_name(b.region));
    });
    tile.lines("supersteps", t.supersteps, [&](std::string& l, const TileSuperstep& step) {
      Block s(l, tile.inner() + "  ");
      s.lines("compute", step.compute, [](std::string& c, const TileCodeletCall& call) {
        Record(c)
            .s("codelet", codelet_name(call.codelet))
            .list("addresses", call.addresses)
            .list("params", call.params);
      });
      s.lines("sends", step.sends, [](std::string& c, const TileSend& x) {
        fmt::format_to(std::back_inserter(c), "[{}, {}, {}]", x.cycle, x.address, x.words);
      });
      s.lines("receives", step.receives, [](std::string& c, const TileReceive& x) {
        fmt::format_to(std::back_inserter(c), "[{}, {}, {}, {}]", x.arrival, x.sender, x.address, x.words);
      });
    });
  });
}

void write_estimates(std::string& out, const std::string& indent, const PackageEstimates& e) {
  Block o(out, indent);
  o.u("estimated_cycles", e.estimated_cycles);
  o.u("estimated_exchange_cycles", e.estimated_exchange_cycles);
  o.u("scheduled_exchange_cycles", e.scheduled_exchange_cycles);
  o.u("exchange_lower_bound", e.exchange_lower_bound);
  o.u("peak_tile_bytes", e.peak_tile_bytes);
}

void write_record(std::string& out, const std::string& indent, const CompileRecord& r, bool with_timings) {
  Block o(out, indent);
  o.lines("statistics", r.statistics, [](std::string& l, const Statistic& s) {
    Record(l).s("pass", s.pass).s("name", s.name).f("value", s.value);
  });
  o.lines("plans", r.plans, [](std::string& l, const PlanRemark& p) {
    Record(l)
        .u("op", p.op)
        .s("op_kind", p.op_kind)
        .s("plan", p.plan)
        .u("column_groups", p.column_groups)
        .u("depth_groups", p.depth_groups)
        .u("row_groups", p.row_groups)
        .u("candidates", p.candidates)
        .u("estimated_cycles", p.estimated_cycles);
  });
  o.lines("schedules", r.schedules, [&](std::string& l, const ScheduleRemark& s) {
    Record record(l);
    record.u("phase", s.phase)
        .s("scheduler", s.scheduler)
        .u("transfers", s.transfers)
        .u("words", s.words)
        .u("widest_multicast", s.widest_multicast)
        .u("segments", s.segments)
        .u("horizon", s.horizon)
        .u("endpoint_lower_bound", s.endpoint_lower_bound)
        .u("lower_bound", s.lower_bound);
    if (with_timings) record.u("elapsed_ms", s.elapsed_ms);
  });
  if (!with_timings) return;
  o.lines("timings", r.timings, [](std::string& l, const PassTiming& t) {
    Record(l)
        .s("pass", t.pass)
        .f("wall_ms", t.wall_ms)
        .f("verify_ms", t.verify_ms)
        .f("cost_model_ms", t.cost_model_ms)
        .u("cost_model_calls", t.cost_model_calls)
        .f("scheduler_ms", t.scheduler_ms)
        .u("scheduler_calls", t.scheduler_calls);
  });
}

// The state's parts, each written by its function at one indent below the top.
std::vector<std::pair<std::string, std::string>> sections(const CompilationState& s, bool with_timings) {
  std::vector<std::pair<std::string, std::string>> parts;
  auto add = [&](const char* name, auto write) {
    std::string text;
    write(text);
    parts.emplace_back(name, std::move(text));
  };
  add("facts", [&](std::string& o) {
    o += '[';
    for (const std::string& fact : s.facts) {
      if (o.size() > 1) o += ", ";
      quoted(o, fact);
    }
    o += ']';
  });
  add("target", [&](std::string& o) { write_target(o, "  ", s.target); });
  add("model", [&](std::string& o) { write_graph(o, "  ", s.model); });
  add("graph", [&](std::string& o) { write_graph(o, "  ", s.graph); });
  add("program", [&](std::string& o) { write_program(o, "  ", s.program); });
  add("package", [&](std::string& o) { write_package(o, "  ", s.package); });
  add("estimates", [&](std::string& o) { write_estimates(o, "  ", s.estimates); });
  add("record", [&](std::string& o) { write_record(o, "  ", s.record, with_timings); });
  return parts;
}

std::string layout(const CompilationState& s, bool with_timings) {
  std::string out = fmt::format("{{\n  \"format\": \"{}\",\n  \"version\": {},\n  \"compiler_version\": ", kFormat,
                                kStateFormatVersion);
  quoted(out, kCoreVersion);
  for (const auto& [name, text] : sections(s, with_timings)) out += ",\n  \"" + name + "\": " + text;
  return out + "\n}\n";
}

// ---------------------------------------------------------------------------------------------
// Reading: every value typed and in range, every problem named by its JSON place.

class Node {
public:
  /// The document's root. A child refers to its parent, so its place is spelt out only on failure.
  Node(const json& value, const std::string& origin) : j_(value), origin_(origin) {}

  std::string where() const {
    if (!parent_) return "";
    return parent_->where() + "/" + (key_ ? std::string(key_) : std::to_string(index_));
  }

  [[noreturn]] void fail(const std::string& problem) const {
    const std::string place = where();
    throw Error(origin_ + ": at " + (place.empty() ? "/" : place) + ": " + problem +
                " (a state file is written by `tessera compile --dump-after` or `tessera opt`; edit it only "
                "where docs/state-files.md says how)");
  }

  Node operator[](const char* key) const {
    if (!j_.is_object()) fail("expected an object");
    const auto found = j_.find(key);
    if (found == j_.end()) fail(std::string("missing key '") + key + "'");
    return Node(*found, this, key, 0);
  }
  /// Fails on a key outside `allowed`: a state from another version, or a typo in an edit.
  const Node& keys(std::initializer_list<const char*> allowed) const {
    if (!j_.is_object()) fail("expected an object");
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* k) { return it.key() == k; }))
        fail("unknown key " + yaml::echoed_token(it.key()));
    return *this;
  }
  std::size_t size(std::size_t exact = std::numeric_limits<std::size_t>::max()) const {
    if (!j_.is_array()) fail("expected a list");
    if (exact != std::numeric_limits<std::size_t>::max() && j_.size() != exact)
      fail(fmt::format("expected a list of {}, got {}", exact, j_.size()));
    return j_.size();
  }
  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }
  Node at(std::size_t i) const { return Node(j_[i], this, nullptr, i); }
  template <typename F>
  void each(F&& f) const {
    const std::size_t n = size();
    for (std::size_t i = 0; i < n; ++i) f(at(i));
  }

  std::uint64_t u64(std::uint64_t max = UINT64_MAX) const {
    if (!j_.is_number_unsigned() && !(j_.is_number_integer() && j_.get<std::int64_t>() >= 0))
      fail("expected a non-negative integer");
    const std::uint64_t v = j_.get<std::uint64_t>();
    if (v > max) fail(fmt::format("{} is above the largest allowed, {}", v, max));
    return v;
  }
  std::uint32_t u32(std::uint64_t max = UINT32_MAX) const { return static_cast<std::uint32_t>(u64(max)); }
  std::int64_t i64() const {
    if (!j_.is_number_integer()) fail("expected an integer");
    if (j_.is_number_unsigned() && j_.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail("integer too large");
    return j_.get<std::int64_t>();
  }
  double f64() const {
    if (!j_.is_number()) fail("expected a number");
    return j_.get<double>();
  }
  bool boolean() const {
    if (!j_.is_boolean()) fail("expected true or false");
    return j_.get<bool>();
  }
  std::string str() const {
    if (!j_.is_string()) fail("expected a string");
    return j_.get<std::string>();
  }
  std::vector<std::uint32_t> u32s(std::uint64_t max = UINT32_MAX) const {
    std::vector<std::uint32_t> v;
    each([&](const Node& n) { v.push_back(n.u32(max)); });
    return v;
  }
  /// A name from `names(0..count)`.
  template <typename E, typename Name>
  E enumeration(std::uint32_t count, Name name) const {
    const std::string text = str();
    for (std::uint32_t i = 0; i < count; ++i)
      if (text == name(static_cast<E>(i))) return static_cast<E>(i);
    std::string list;
    for (std::uint32_t i = 0; i < count; ++i) list += (i ? ", " : "") + std::string(name(static_cast<E>(i)));
    fail(yaml::echoed_token(text) + " is not one of " + list);
  }

private:
  Node(const json& value, const Node* parent, const char* key, std::size_t index)
      : j_(value), origin_(parent->origin_), parent_(parent), key_(key), index_(index) {}
  const json& j_;
  const std::string& origin_;
  const Node* parent_ = nullptr;  // outlives this node: children are made and used within a parent's call
  const char* key_ = nullptr;
  std::size_t index_ = 0;
};

SourcePlace read_place(const Node& n) {
  n.size(2);
  return {n.at(0).u32(), n.at(1).u32()};
}

Target read_target(const Node& n) {
  n.keys({"name",
          "source_file",
          "tiles",
          "tiles_per_column",
          "memory_bytes",
          "memory_element_bytes",
          "interleaved_start",
          "alignment",
          "worker_threads",
          "clock_hz",
          "fp32_macs_per_cycle",
          "fp16_macs_per_cycle",
          "amp_fp32_input_channels",
          "amp_fp32_output_channels",
          "amp_fp16_input_channels",
          "amp_fp16_output_channels",
          "load_bytes_per_cycle",
          "exchange_word_bytes",
          "exchange_base_latency",
          "exchange_latency_per_column",
          "switch_cost",
          "multicast",
          "sync_cycles",
          "exchange_phase_overhead",
          "host_bytes_per_cycle",
          "host_call_latency_cycles"});
  Target t;
  t.name = n["name"].str();
  t.source_file = n["source_file"].str();
  t.tiles = n["tiles"].u32();
  t.tiles_per_column = n["tiles_per_column"].u32();
  t.memory_bytes = n["memory_bytes"].u64();
  t.memory_element_bytes = n["memory_element_bytes"].u32();
  t.interleaved_start = n["interleaved_start"].u64();
  t.alignment = n["alignment"].u32();
  t.worker_threads = n["worker_threads"].u32();
  t.clock_hz = n["clock_hz"].f64();
  t.fp32_macs_per_cycle = n["fp32_macs_per_cycle"].u32();
  t.fp16_macs_per_cycle = n["fp16_macs_per_cycle"].u32();
  t.amp_fp32_input_channels = n["amp_fp32_input_channels"].u32();
  t.amp_fp32_output_channels = n["amp_fp32_output_channels"].u32();
  t.amp_fp16_input_channels = n["amp_fp16_input_channels"].u32();
  t.amp_fp16_output_channels = n["amp_fp16_output_channels"].u32();
  t.load_bytes_per_cycle = n["load_bytes_per_cycle"].u32();
  t.exchange_word_bytes = n["exchange_word_bytes"].u32();
  t.exchange_base_latency = n["exchange_base_latency"].u32();
  t.exchange_latency_per_column = n["exchange_latency_per_column"].f64();
  t.switch_cost = n["switch_cost"].u32();
  t.multicast = n["multicast"].boolean();
  t.sync_cycles = n["sync_cycles"].u32();
  t.exchange_phase_overhead = n["exchange_phase_overhead"].u32();
  t.host_bytes_per_cycle = n["host_bytes_per_cycle"].f64();
  t.host_call_latency_cycles = n["host_call_latency_cycles"].u32();
  if (const std::string problem = check_target(t); !problem.empty()) n.fail(problem);
  return t;
}

Graph read_graph(const Node& n) {
  n.keys({"name", "source_file", "source_sha256", "import_options", "seed", "tensors", "ops", "outputs"});
  Graph g;
  g.name = n["name"].str();
  g.source_file = n["source_file"].str();
  g.source_sha256 = n["source_sha256"].str();
  if (n.has("import_options"))
    n["import_options"].each([&](const Node& o) {
      o.keys({"option"});
      g.import_options.push_back(o["option"].str());
    });
  g.seed = n["seed"].u64();
  n["tensors"].each([&](const Node& t) {
    t.keys({"name", "shape", "dtype", "kind", "init_scale", "place"});
    Tensor tensor;
    tensor.name = t["name"].str();
    t["shape"].each([&](const Node& d) { tensor.shape.push_back(d.i64()); });
    tensor.dtype = t["dtype"].enumeration<DType>(kDTypeCount, dtype_name);
    tensor.kind = t["kind"].enumeration<TensorKind>(3, tensor_kind_name);
    tensor.init_scale = t["init_scale"].f64();
    tensor.place = read_place(t["place"]);
    g.tensors.push_back(std::move(tensor));
  });
  n["ops"].each([&](const Node& o) {
    o.keys({"kind",         "inputs",       "output", "relu",     "transpose_b", "batch",    "heads",
            "column_begin", "column_count", "window", "clip_low", "clip_high",   "function", "alpha",
            "gather_shape", "gather_runs",  "scale",  "epsilon",  "exponent",    "place"});
    Op op;
    op.kind = o["kind"].enumeration<OpKind>(kOpKindCount, op_kind_name);
    op.inputs = o["inputs"].u32s();
    op.output = o["output"].u32();
    op.relu = o["relu"].boolean();
    op.transpose_b = o["transpose_b"].boolean();
    if (o.has("batch")) op.batch = o["batch"].u32();  // written only for batched ops
    if (o.has("heads")) op.heads = o["heads"].u32();
    if (o.has("column_begin")) op.column_begin = o["column_begin"].u32();
    if (o.has("column_count")) op.column_count = o["column_count"].u32();
    if (o.has("window")) {
      const std::vector<std::uint32_t> window = o["window"].u32s();
      if (window.size() != kWindowFields) o["window"].fail(fmt::format("a window holds {} numbers", kWindowFields));
      op.window = window_from_fields(std::span<const std::uint32_t, kWindowFields>(window.data(), kWindowFields));
    }
    if (o.has("clip_low")) op.clip_low = o["clip_low"].f64();
    if (o.has("clip_high")) op.clip_high = o["clip_high"].f64();
    if (o.has("function")) op.function = o["function"].u32();
    if (o.has("alpha")) op.alpha = o["alpha"].f64();
    if (o.has("gather_shape")) o["gather_shape"].each([&](const Node& d) { op.gather_shape.push_back(d.i64()); });
    if (o.has("gather_runs"))
      o["gather_runs"].each([&](const Node& n) {
        n.size(kGatherRunFields);
        GatherRun run;
        run.output_begin = n.at(0).u64();
        run.input = n.at(1).u32();
        run.input_begin = n.at(2).i64();
        run.length = n.at(3).u64();
        run.input_stride = n.at(4).i64();
        run.repeat = n.at(5).u64();
        run.output_step = n.at(6).u64();
        run.input_step = n.at(7).i64();
        op.gather_runs.push_back(run);
      });
    op.scale = o["scale"].f64();
    op.epsilon = o["epsilon"].f64();
    op.exponent = o["exponent"].f64();
    op.place = read_place(o["place"]);
    g.ops.push_back(std::move(op));
  });
  g.outputs = n["outputs"].u32s();
  if (const std::string problem = check_graph(g); !problem.empty()) n.fail(problem);
  return g;
}

BufferRef read_ref(const Node& n) {
  n.size(2);
  return {n.at(0).u32(), n.at(1).u32()};
}

Program read_program(const Node& n, const Target& target) {
  n.keys({"buffers", "supersteps", "streams"});
  Program p;
  n["buffers"].each([&](const Node& b) {
    b.keys({"name", "tile", "bytes", "region", "alignment", "first_use", "last_use", "offset"});
    Buffer buffer;
    buffer.name = b["name"].str();
    buffer.tile = b["tile"].u32(target.tiles - 1);
    buffer.bytes = b["bytes"].u32();
    buffer.region = b["region"].enumeration<Region>(2, region_name);
    buffer.alignment = b["alignment"].u32();
    buffer.first_use = b["first_use"].u32();
    buffer.last_use = b["last_use"].u32();
    buffer.offset = b["offset"].i64();
    if (buffer.offset < kUnplaced) b["offset"].fail("an offset is -1 (not placed) or a byte offset");
    p.buffers.push_back(std::move(buffer));
  });
  const std::uint64_t last_buffer = p.buffers.empty() ? 0 : p.buffers.size() - 1;
  auto ref = [&](const Node& r) {
    if (p.buffers.empty()) r.fail("a buffer reference in a program without buffers");
    const BufferRef result = read_ref(r);
    if (result.buffer > last_buffer)
      r.fail(fmt::format("buffer {} does not exist (the program has {})", result.buffer, p.buffers.size()));
    return result;
  };
  n["supersteps"].each([&](const Node& s) {
    s.keys({"label", "compute", "copies", "exchange", "schedule"});
    Superstep step;
    step.label = s["label"].str();
    s["compute"].each([&](const Node& c) {
      c.keys({"tile", "codelet", "operands", "params"});
      CodeletCall call;
      call.tile = c["tile"].u32(target.tiles - 1);
      call.codelet = c["codelet"].enumeration<Codelet>(kCodeletCount, codelet_name);
      c["operands"].each([&](const Node& o) { call.operands.push_back(ref(o)); });
      call.params = c["params"].u32s();
      step.compute.push_back(std::move(call));
    });
    s["copies"].each([&](const Node& c) {
      c.size(5);
      Copy copy;
      copy.source = {c.at(0).u32(), c.at(1).u32()};
      copy.destination = {c.at(2).u32(), c.at(3).u32()};
      if (p.buffers.empty() || copy.source.buffer > last_buffer || copy.destination.buffer > last_buffer)
        c.fail(fmt::format("a copy names a buffer that does not exist (the program has {})", p.buffers.size()));
      copy.words = c.at(4).u32();
      step.copies.push_back(copy);
    });
    const Node exchange = s["exchange"];
    exchange.keys({"tiles", "transfers"});
    step.exchange.tiles = exchange["tiles"].u32(target.tiles);
    exchange["transfers"].each([&](const Node& t) {
      t.keys({"source", "destinations", "words", "source_address", "destination_addresses"});
      Transfer transfer;
      transfer.source = t["source"].u32();
      transfer.destinations = t["destinations"].u32s();
      transfer.words = t["words"].u32();
      transfer.source_address = t["source_address"].u32();
      transfer.destination_addresses = t["destination_addresses"].u32s();
      if (transfer.destination_addresses.size() != transfer.destinations.size() &&
          !transfer.destination_addresses.empty())
        t.fail("destination_addresses must be empty or parallel to destinations");
      step.exchange.transfers.push_back(std::move(transfer));
    });
    if (!step.exchange.transfers.empty())
      if (const std::string problem = check_phase(step.exchange, target); !problem.empty()) exchange.fail(problem);
    s["schedule"].each([&](const Node& g) {
      g.size(3);
      step.schedule.segments.push_back({g.at(0).u32(), g.at(1).u64(), g.at(2).u32()});
    });
    if (!step.schedule.segments.empty()) {
      const ScheduleReport report = validate_schedule(step.exchange, step.schedule, target);
      if (!report.valid) s["schedule"].fail("the schedule is invalid: " + report.first_conflict);
    }
    p.supersteps.push_back(std::move(step));
  });
  n["streams"].each([&](const Node& h) {
    h.keys({"tensor", "kind", "rows", "cols", "dtype", "slices"});
    HostStream stream;
    stream.tensor = h["tensor"].str();
    stream.kind = h["kind"].enumeration<StreamKind>(3, stream_kind_name);
    stream.rows = h["rows"].u32();
    stream.cols = h["cols"].u32();
    stream.dtype = h["dtype"].enumeration<DType>(kDTypeCount, dtype_name);
    h["slices"].each([&](const Node& l) {
      l.keys({"destination", "row_begin", "rows", "col_begin", "cols", "transposed"});
      stream.slices.push_back({ref(l["destination"]), l["row_begin"].u32(), l["rows"].u32(), l["col_begin"].u32(),
                               l["cols"].u32(), l["transposed"].boolean()});
    });
    p.streams.push_back(std::move(stream));
  });
  return p;
}

Package read_package_part(const Node& n, const Target& target) {
  n.keys({"streams", "tiles"});
  Package p;
  const std::uint64_t last_address = target.memory_bytes - 1;
  n["streams"].each([&](const Node& s) {
    s.keys({"tensor", "kind", "rows", "cols", "dtype", "slices"});
    PackageStream stream;
    stream.tensor = s["tensor"].str();
    stream.kind = s["kind"].enumeration<StreamKind>(3, stream_kind_name);
    stream.rows = s["rows"].u32();
    stream.cols = s["cols"].u32();
    stream.dtype = s["dtype"].enumeration<DType>(kDTypeCount, dtype_name);
    s["slices"].each([&](const Node& l) {
      l.keys({"tile", "address", "row_begin", "rows", "col_begin", "cols", "transposed"});
      stream.slices.push_back({l["tile"].u32(target.tiles - 1), l["address"].u32(last_address), l["row_begin"].u32(),
                               l["rows"].u32(), l["col_begin"].u32(), l["cols"].u32(), l["transposed"].boolean()});
    });
    p.streams.push_back(std::move(stream));
  });
  n["tiles"].each([&](const Node& t) {
    t.keys({"tile", "buffers", "supersteps"});
    TileImage image;
    image.tile = t["tile"].u32(target.tiles - 1);
    t["buffers"].each([&](const Node& b) {
      b.size(3);
      TileBufferEntry entry{b.at(0).u32(last_address), b.at(1).u32(target.memory_bytes),
                            b.at(2).enumeration<Region>(2, region_name)};
      if (std::uint64_t{entry.offset} + entry.bytes > target.memory_bytes)
        b.fail("the buffer runs past the end of tile memory");
      image.buffers.push_back(entry);
    });
    t["supersteps"].each([&](const Node& s) {
      s.keys({"compute", "sends", "receives"});
      TileSuperstep step;
      s["compute"].each([&](const Node& c) {
        c.keys({"codelet", "addresses", "params"});
        step.compute.push_back({c["codelet"].enumeration<Codelet>(kCodeletCount, codelet_name),
                                c["addresses"].u32s(last_address), c["params"].u32s()});
      });
      s["sends"].each([&](const Node& x) {
        x.size(3);
        step.sends.push_back({x.at(0).u64(kMaxExchangeCycle - 1), x.at(1).u32(last_address), x.at(2).u32()});
      });
      s["receives"].each([&](const Node& x) {
        x.size(4);
        step.receives.push_back({x.at(0).u64(kMaxExchangeCycle - 1), x.at(1).u32(target.tiles - 1),
                                 x.at(2).u32(last_address), x.at(3).u32()});
      });
      image.supersteps.push_back(std::move(step));
    });
    p.tiles.push_back(std::move(image));
  });
  return p;
}

PackageEstimates read_estimates(const Node& n) {
  n.keys({"estimated_cycles", "estimated_exchange_cycles", "scheduled_exchange_cycles", "exchange_lower_bound",
          "peak_tile_bytes"});
  return {n["estimated_cycles"].u64(), n["estimated_exchange_cycles"].u64(), n["scheduled_exchange_cycles"].u64(),
          n["exchange_lower_bound"].u64(), n["peak_tile_bytes"].u64()};
}

CompileRecord read_record(const Node& n) {
  n.keys({"statistics", "plans", "schedules", "timings"});
  CompileRecord r;
  n["statistics"].each([&](const Node& s) {
    s.keys({"pass", "name", "value"});
    r.statistics.push_back({s["pass"].str(), s["name"].str(), s["value"].f64()});
  });
  n["plans"].each([&](const Node& p) {
    p.keys({"op", "op_kind", "plan", "column_groups", "depth_groups", "row_groups", "candidates", "estimated_cycles"});
    r.plans.push_back({p["op"].u32(), p["op_kind"].str(), p["plan"].str(), p["column_groups"].u32(),
                       p["depth_groups"].u32(), p["row_groups"].u32(), p["candidates"].u64(),
                       p["estimated_cycles"].u64()});
  });
  n["schedules"].each([&](const Node& s) {
    s.keys({"phase", "scheduler", "transfers", "words", "widest_multicast", "segments", "horizon",
            "endpoint_lower_bound", "lower_bound", "elapsed_ms"});
    ScheduleRemark remark{s["phase"].u32(),
                          s["scheduler"].str(),
                          s["transfers"].u64(),
                          s["words"].u64(),
                          s["widest_multicast"].u64(),
                          s["segments"].u64(),
                          s["horizon"].u64(),
                          s["endpoint_lower_bound"].u64(),
                          s["lower_bound"].u64(),
                          0};
    if (s.has("elapsed_ms")) remark.elapsed_ms = s["elapsed_ms"].u64();  // absent in deterministic_state_text
    r.schedules.push_back(std::move(remark));
  });
  if (!n.has("timings")) return r;  // deterministic_state_text leaves them out
  n["timings"].each([&](const Node& t) {
    t.keys({"pass", "wall_ms", "verify_ms", "cost_model_ms", "cost_model_calls", "scheduler_ms", "scheduler_calls"});
    r.timings.push_back({t["pass"].str(), t["wall_ms"].f64(), t["verify_ms"].f64(), t["cost_model_ms"].f64(),
                         t["cost_model_calls"].u64(), t["scheduler_ms"].f64(), t["scheduler_calls"].u64()});
  });
  return r;
}

}  // namespace

std::string state_text(const CompilationState& state) { return layout(state, true); }

std::string deterministic_state_text(const CompilationState& state) { return layout(state, false); }

void write_state(const CompilationState& state, const std::string& path, const std::string& what) {
  write_file_atomically(path, state_text(state), what);
}

CompilationState parse_state(const std::string& text, const std::string& origin) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e16384
    throw Error(origin + ": not a state file: " + e.what());
  }
  const Node root(document, origin);
  if (!document.is_object() || !document.contains("format") || document["format"] != kFormat)
    root.fail("not a tessera state file (no \"format\": \"tessera-state\")");
  if (root["version"].u64() != kStateFormatVersion)
    root["version"].fail(
        fmt::format("format version {} is not {}, the one this tessera reads; write the state again "
                    "with this build",
                    root["version"].u64(), kStateFormatVersion));
  root.keys({"format", "version", "compiler_version", "facts", "target", "model", "graph", "program", "package",
             "estimates", "record"});
  CompilationState state;
  root["compiler_version"].str();
  root["facts"].each([&](const Node& f) { state.facts.insert(f.str()); });
  state.target = read_target(root["target"]);
  state.model = read_graph(root["model"]);
  state.graph = read_graph(root["graph"]);
  state.program = read_program(root["program"], state.target);
  if (state.facts.count(facts::plan))
    if (const std::string problem = verify_program(state.program, state.target); !problem.empty())
      root["program"].fail("the program is invalid: " + problem);
  state.package = read_package_part(root["package"], state.target);
  state.estimates = read_estimates(root["estimates"]);
  state.record = read_record(root["record"]);
  return state;
}

CompilationState read_state(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": state file not found");
  std::string text = read_bounded_file(path, "the state file", kMaxStateFileBytes);
  try {
    return parse_state(text, path);
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: not enough memory to read this state ({} bytes; reading takes 20 to 30 times that)",
                            path, text.size()));
  }
}

bool DumpFilter::shows_tile(std::uint32_t tile) const {
  if (tiles.empty()) return true;
  return std::any_of(tiles.begin(), tiles.end(), [&](const auto& r) { return tile >= r.first && tile <= r.second; });
}

bool DumpFilter::shows_op(const Graph& graph, std::size_t op) const {
  if (ops.empty()) return true;
  const Op& o = graph.ops[op];
  const std::string label = op_kind_name(o.kind) + std::to_string(op);
  const std::string& output = o.output < graph.tensors.size() ? graph.tensors[o.output].name : label;
  return std::any_of(ops.begin(), ops.end(),
                     [&](const std::string& f) { return f == label || f == output || f == std::to_string(op); });
}

bool DumpFilter::shows_name(const std::string& name) const {
  if (ops.empty()) return true;
  return std::any_of(ops.begin(), ops.end(), [&](const std::string& f) {
    return name.compare(0, f.size(), f) == 0 &&
           (name.size() == f.size() || !std::isalnum(static_cast<unsigned char>(name[f.size()])));
  });
}

std::vector<std::pair<std::string, std::string>> state_sections(const CompilationState& state) {
  std::vector<std::pair<std::string, std::string>> parts = sections(state, false);
  parts.pop_back();  // the record: statistics and remarks, not the IR
  return parts;
}

std::string dump_state(const CompilationState& state, const DumpFilter& filter) {
  std::ostringstream out;
  out << "# tessera state: model " << state.model.name << ", target " << state.target.name << "\nfacts:";
  for (const auto& fact : state.facts) out << " " << fact;
  out << "\n\ngraph " << state.graph.name << " (" << state.graph.ops.size() << " ops)\n";
  for (std::size_t i = 0; i < state.graph.ops.size(); ++i) {
    if (!filter.shows_op(state.graph, i)) continue;
    const Op& op = state.graph.ops[i];
    out << "  op " << i << " " << op_kind_name(op.kind) << (op.relu ? "+relu" : "") << " (";
    for (std::size_t j = 0; j < op.inputs.size(); ++j) out << (j ? ", " : "") << state.graph.tensors[op.inputs[j]].name;
    const Tensor& output = state.graph.tensors[op.output];
    out << ") -> " << output.name << " [";
    for (std::size_t j = 0; j < output.shape.size(); ++j) out << (j ? ", " : "") << output.shape[j];
    out << "]\n";
  }
  const Program& program = state.program;
  out << "\nbuffers " << program.buffers.size() << "\n";
  for (std::size_t i = 0; i < program.buffers.size(); ++i) {
    const Buffer& b = program.buffers[i];
    if (!filter.shows_tile(b.tile) || !filter.shows_name(b.name)) continue;
    out << "  buffer " << i << " tile=" << b.tile << " name=" << b.name << " bytes=" << b.bytes
        << " region=" << region_name(b.region) << " live=" << b.first_use << ".." << b.last_use
        << " offset=" << b.offset << "\n";
  }
  out << "\nsupersteps " << program.supersteps.size() << "\n";
  for (std::size_t s = 0; s < program.supersteps.size(); ++s) {
    const Superstep& step = program.supersteps[s];
    if (!filter.shows_name(step.label)) continue;
    out << "  superstep " << s << " " << step.label << ": compute=" << step.compute.size()
        << " copies=" << step.copies.size() << " transfers=" << step.exchange.transfers.size()
        << " segments=" << step.schedule.segments.size() << "\n";
    for (const auto& call : step.compute) {
      if (!filter.shows_tile(call.tile)) continue;
      out << "    tile " << call.tile << " " << codelet_name(call.codelet) << " operands=";
      for (const auto& o : call.operands) out << o.buffer << "+" << o.word_offset << " ";
      out << "params=";
      for (auto p : call.params) out << p << " ";
      out << "\n";
    }
    for (std::size_t t = 0; t < step.exchange.transfers.size(); ++t) {
      const Transfer& transfer = step.exchange.transfers[t];
      const bool touches =
          filter.shows_tile(transfer.source) || std::any_of(transfer.destinations.begin(), transfer.destinations.end(),
                                                            [&](std::uint32_t d) { return filter.shows_tile(d); });
      if (filter.tiles.empty() || !touches) continue;  // unfiltered dumps keep the counts only
      out << "    transfer " << t << " " << transfer.source << " -> "
          << fmt::format("{}", fmt::join(transfer.destinations, ",")) << " words=" << transfer.words << "\n";
    }
  }
  out << "\nstreams " << program.streams.size() << "\n";
  for (const auto& stream : program.streams) {
    if (!filter.shows_name(stream.tensor) && !filter.ops.empty()) continue;
    out << "  " << stream_kind_name(stream.kind) << " " << stream.tensor << " [" << stream.rows << " x " << stream.cols
        << "] slices=" << stream.slices.size() << "\n";
  }
  return out.str();
}

DumpFilter parse_dump_filter(const std::string& text) {
  DumpFilter filter;
  std::stringstream fields(text);
  for (std::string field; std::getline(fields, field, ',');) {
    const auto equals = field.find('=');
    const std::string key = field.substr(0, equals),
                      value = equals == std::string::npos ? "" : field.substr(equals + 1);
    if (value.empty())
      throw Error("--dump-filter: " + yaml::echoed_token(field) + " is not KEY=VALUE (e.g. tile=0-3,op=dense1)");
    if (key == "op") {
      filter.ops.push_back(value);  // a name, kind+index or index; matched when dumping
    } else if (key == "tile") {
      const auto dash = value.find('-');
      std::int64_t low = 0, high = 0;
      if (!yaml::parse_int(value.substr(0, dash), low) ||
          !yaml::parse_int(dash == std::string::npos ? value : value.substr(dash + 1), high) || low < 0 || high < low ||
          high > UINT32_MAX)
        throw Error("--dump-filter: tile=" + yaml::echoed_token(value) +
                    " is not a tile or a range LOW-HIGH (e.g. tile=0-3)");
      filter.tiles.emplace_back(static_cast<std::uint32_t>(low), static_cast<std::uint32_t>(high));
    } else {
      throw Error("--dump-filter: unknown field " + yaml::echoed_token(key) + " (the fields are tile and op)");
    }
  }
  return filter;
}

}  // namespace tessera
