// State files: the compilation state as JSON, written with one record per line and read back
// with every field typed, every index checked and the core's validators run.
#include "tessera/state_file.hpp"

#include <algorithm>
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
constexpr std::uintmax_t kMaxStateFileBytes = std::uintmax_t{1} << 30;
constexpr std::int64_t kMaxLineBytes = 160;  // a container whose compact text is longer is laid out over lines

// ---------------------------------------------------------------------------------------------
// Writing

json place_json(const SourcePlace& p) { return json::array({p.line, p.column}); }
json ref_json(const BufferRef& r) { return json::array({r.buffer, r.word_offset}); }

json target_json(const Target& t) {
  return {{"name", t.name},
          {"source_file", t.source_file},
          {"tiles", t.tiles},
          {"tiles_per_column", t.tiles_per_column},
          {"memory_bytes", t.memory_bytes},
          {"memory_element_bytes", t.memory_element_bytes},
          {"interleaved_start", t.interleaved_start},
          {"alignment", t.alignment},
          {"worker_threads", t.worker_threads},
          {"clock_hz", t.clock_hz},
          {"fp32_macs_per_cycle", t.fp32_macs_per_cycle},
          {"fp16_macs_per_cycle", t.fp16_macs_per_cycle},
          {"amp_fp32_input_channels", t.amp_fp32_input_channels},
          {"amp_fp32_output_channels", t.amp_fp32_output_channels},
          {"amp_fp16_input_channels", t.amp_fp16_input_channels},
          {"amp_fp16_output_channels", t.amp_fp16_output_channels},
          {"load_bytes_per_cycle", t.load_bytes_per_cycle},
          {"exchange_word_bytes", t.exchange_word_bytes},
          {"exchange_base_latency", t.exchange_base_latency},
          {"exchange_latency_per_column", t.exchange_latency_per_column},
          {"switch_cost", t.switch_cost},
          {"multicast", t.multicast},
          {"sync_cycles", t.sync_cycles},
          {"exchange_phase_overhead", t.exchange_phase_overhead},
          {"host_bytes_per_cycle", t.host_bytes_per_cycle},
          {"host_call_latency_cycles", t.host_call_latency_cycles}};
}

json graph_json(const Graph& g) {
  json tensors = json::array(), ops = json::array();
  for (const Tensor& t : g.tensors)
    tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", dtype_name(t.dtype)},
                       {"kind", t.kind == TensorKind::input ? "input" : t.kind == TensorKind::weight ? "weight" : "intermediate"},
                       {"init_scale", t.init_scale}, {"place", place_json(t.place)}});
  for (const Op& op : g.ops)
    ops.push_back({{"kind", op_kind_name(op.kind)}, {"inputs", op.inputs}, {"output", op.output}, {"relu", op.relu},
                   {"transpose_b", op.transpose_b}, {"scale", op.scale}, {"epsilon", op.epsilon},
                   {"exponent", op.exponent}, {"place", place_json(op.place)}});
  return {{"name", g.name}, {"source_file", g.source_file}, {"source_sha256", g.source_sha256}, {"seed", g.seed},
          {"tensors", std::move(tensors)}, {"ops", std::move(ops)}, {"outputs", g.outputs}};
}

json program_json(const Program& p) {
  json buffers = json::array(), supersteps = json::array(), streams = json::array();
  for (const Buffer& b : p.buffers)
    buffers.push_back({{"name", b.name}, {"tile", b.tile}, {"bytes", b.bytes}, {"region", region_name(b.region)},
                       {"alignment", b.alignment}, {"first_use", b.first_use}, {"last_use", b.last_use},
                       {"offset", b.offset}});
  for (const Superstep& s : p.supersteps) {
    json compute = json::array(), copies = json::array(), transfers = json::array(), segments = json::array();
    for (const CodeletCall& c : s.compute) {
      json operands = json::array();
      for (const BufferRef& r : c.operands) operands.push_back(ref_json(r));
      compute.push_back({{"tile", c.tile}, {"codelet", codelet_name(c.codelet)}, {"operands", std::move(operands)},
                         {"params", c.params}});
    }
    // [source buffer, word offset, destination buffer, word offset, words]
    for (const Copy& c : s.copies)
      copies.push_back(json::array({c.source.buffer, c.source.word_offset, c.destination.buffer,
                                    c.destination.word_offset, c.words}));
    for (const Transfer& t : s.exchange.transfers)
      transfers.push_back({{"source", t.source}, {"destinations", t.destinations}, {"words", t.words},
                           {"source_address", t.source_address}, {"destination_addresses", t.destination_addresses}});
    for (const Segment& g : s.schedule.segments) segments.push_back(json::array({g.transfer, g.start, g.words}));
    supersteps.push_back({{"label", s.label}, {"compute", std::move(compute)}, {"copies", std::move(copies)},
                          {"exchange", {{"tiles", s.exchange.tiles}, {"transfers", std::move(transfers)}}},
                          {"schedule", std::move(segments)}});
  }
  for (const HostStream& h : p.streams) {
    json slices = json::array();
    for (const HostSlice& s : h.slices)
      slices.push_back({{"destination", ref_json(s.destination)}, {"row_begin", s.row_begin}, {"rows", s.rows},
                        {"col_begin", s.col_begin}, {"cols", s.cols}, {"transposed", s.transposed}});
    streams.push_back({{"tensor", h.tensor}, {"kind", stream_kind_name(h.kind)}, {"rows", h.rows}, {"cols", h.cols},
                       {"dtype", dtype_name(h.dtype)}, {"slices", std::move(slices)}});
  }
  return {{"buffers", std::move(buffers)}, {"supersteps", std::move(supersteps)}, {"streams", std::move(streams)}};
}

json package_json(const Package& p) {
  json streams = json::array(), tiles = json::array();
  for (const PackageStream& s : p.streams) {
    json slices = json::array();
    for (const PackageSlice& l : s.slices)
      slices.push_back({{"tile", l.tile}, {"address", l.address}, {"row_begin", l.row_begin}, {"rows", l.rows},
                        {"col_begin", l.col_begin}, {"cols", l.cols}, {"transposed", l.transposed}});
    streams.push_back({{"tensor", s.tensor}, {"kind", stream_kind_name(s.kind)}, {"rows", s.rows}, {"cols", s.cols},
                       {"dtype", dtype_name(s.dtype)}, {"slices", std::move(slices)}});
  }
  for (const TileImage& t : p.tiles) {
    json buffers = json::array(), steps = json::array();
    for (const TileBufferEntry& b : t.buffers) buffers.push_back(json::array({b.offset, b.bytes, region_name(b.region)}));
    for (const TileSuperstep& s : t.supersteps) {
      json compute = json::array(), sends = json::array(), receives = json::array();
      for (const TileCodeletCall& c : s.compute)
        compute.push_back({{"codelet", codelet_name(c.codelet)}, {"addresses", c.addresses}, {"params", c.params}});
      for (const TileSend& x : s.sends) sends.push_back(json::array({x.cycle, x.address, x.words}));
      for (const TileReceive& x : s.receives) receives.push_back(json::array({x.arrival, x.sender, x.address, x.words}));
      steps.push_back({{"compute", std::move(compute)}, {"sends", std::move(sends)}, {"receives", std::move(receives)}});
    }
    tiles.push_back({{"tile", t.tile}, {"buffers", std::move(buffers)}, {"supersteps", std::move(steps)}});
  }
  return {{"streams", std::move(streams)}, {"tiles", std::move(tiles)}};
}

json estimates_json(const PackageEstimates& e) {
  return {{"estimated_cycles", e.estimated_cycles}, {"estimated_exchange_cycles", e.estimated_exchange_cycles},
          {"scheduled_exchange_cycles", e.scheduled_exchange_cycles}, {"exchange_lower_bound", e.exchange_lower_bound},
          {"peak_tile_bytes", e.peak_tile_bytes}};
}

json record_json(const CompileRecord& r, bool with_timings) {
  json statistics = json::array(), plans = json::array(), schedules = json::array(), timings = json::array();
  for (const Statistic& s : r.statistics) statistics.push_back({{"pass", s.pass}, {"name", s.name}, {"value", s.value}});
  for (const PlanRemark& p : r.plans)
    plans.push_back({{"op", p.op}, {"op_kind", p.op_kind}, {"plan", p.plan}, {"column_groups", p.column_groups},
                     {"depth_groups", p.depth_groups}, {"row_groups", p.row_groups}, {"candidates", p.candidates},
                     {"estimated_cycles", p.estimated_cycles}});
  for (const ScheduleRemark& s : r.schedules) {
    json remark = {{"phase", s.phase}, {"scheduler", s.scheduler}, {"transfers", s.transfers}, {"words", s.words},
                   {"widest_multicast", s.widest_multicast}, {"segments", s.segments}, {"horizon", s.horizon},
                   {"endpoint_lower_bound", s.endpoint_lower_bound}, {"lower_bound", s.lower_bound}};
    if (with_timings) remark["elapsed_ms"] = s.elapsed_ms;
    schedules.push_back(std::move(remark));
  }
  json record = {{"statistics", std::move(statistics)}, {"plans", std::move(plans)}, {"schedules", std::move(schedules)}};
  if (with_timings) {
    for (const PassTiming& t : r.timings)
      timings.push_back({{"pass", t.pass}, {"wall_ms", t.wall_ms}, {"verify_ms", t.verify_ms},
                         {"cost_model_ms", t.cost_model_ms}, {"cost_model_calls", t.cost_model_calls},
                         {"scheduler_ms", t.scheduler_ms}, {"scheduler_calls", t.scheduler_calls}});
    record["timings"] = std::move(timings);
  }
  return record;
}

json state_json(const CompilationState& s, bool with_timings) {
  return {{"format", kFormat},
          {"version", kStateFormatVersion},
          {"compiler_version", kCoreVersion},
          {"facts", s.facts},
          {"target", target_json(s.target)},
          {"model", graph_json(s.model)},
          {"graph", graph_json(s.graph)},
          {"program", program_json(s.program)},
          {"package", package_json(s.package)},
          {"estimates", estimates_json(s.estimates)},
          {"record", record_json(s.record, with_timings)}};
}

// The text of a value on one line, with ", " and ": " between items.
void write_compact(const json& j, std::string& out) {
  if (!j.is_structured()) {
    out += j.dump();
    return;
  }
  out += j.is_object() ? '{' : '[';
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ", ";
    first = false;
    if (j.is_object()) out += json(it.key()).dump() + ": ";
    write_compact(it.value(), out);
  }
  out += j.is_object() ? '}' : ']';
}

// What is left of `budget` after the compact text of `j`, or -1 once it runs out: bounded work
// however large `j` is.
std::int64_t fits(const json& j, std::int64_t budget) {
  if (!j.is_structured()) return budget - static_cast<std::int64_t>(j.dump().size());
  budget -= 2;
  for (auto it = j.begin(); it != j.end() && budget >= 0; ++it) {
    if (it != j.begin()) budget -= 2;  // ", "
    if (j.is_object()) budget -= static_cast<std::int64_t>(json(it.key()).dump().size()) + 2;
    budget = fits(it.value(), budget);
  }
  return budget;
}

// Compact when short, else one member or element per line: records stay on one line each.
void layout(const json& j, const std::string& indent, std::string& out) {
  if (!j.is_structured() || j.empty() || fits(j, kMaxLineBytes) >= 0) {
    write_compact(j, out);
    return;
  }
  const std::string inner = indent + "  ";
  out += j.is_object() ? '{' : '[';
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it != j.begin()) out += ',';
    out += '\n';
    out += inner;
    if (j.is_object()) out += json(it.key()).dump() + ": ";
    layout(it.value(), inner, out);
  }
  out += '\n';
  out += indent;
  out += j.is_object() ? '}' : ']';
}

std::string layout(const json& j) {
  std::string out;
  layout(j, "", out);
  return out + "\n";
}

// ---------------------------------------------------------------------------------------------
// Reading: every value typed and in range, every problem named by its JSON place.

class Node {
public:
  Node(const json& value, std::string where, const std::string& origin) : j_(value), where_(std::move(where)), origin_(origin) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(origin_ + ": at " + (where_.empty() ? "/" : where_) + ": " + problem +
                " (a state file is written by `tessera compile --dump-after` or `tessera opt`; edit it only "
                "where docs/state-files.md says how)");
  }

  Node operator[](const char* key) const {
    if (!j_.is_object()) fail("expected an object");
    const auto found = j_.find(key);
    if (found == j_.end()) fail(std::string("missing key '") + key + "'");
    return {*found, where_ + "/" + key, origin_};
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
  Node at(std::size_t i) const { return {j_[i], where_ + "/" + std::to_string(i), origin_}; }
  template <typename F> void each(F&& f) const {
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
    if (j_.is_number_unsigned() && j_.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) fail("integer too large");
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
  template <typename E, typename Name> E enumeration(std::uint32_t count, Name name) const {
    const std::string text = str();
    for (std::uint32_t i = 0; i < count; ++i)
      if (text == name(static_cast<E>(i))) return static_cast<E>(i);
    std::string list;
    for (std::uint32_t i = 0; i < count; ++i) list += (i ? ", " : "") + std::string(name(static_cast<E>(i)));
    fail(yaml::echoed_token(text) + " is not one of " + list);
  }

private:
  const json& j_;
  std::string where_;
  const std::string& origin_;
};

const char* tensor_kind_name(TensorKind k) {
  return k == TensorKind::input ? "input" : k == TensorKind::weight ? "weight" : "intermediate";
}

SourcePlace read_place(const Node& n) {
  n.size(2);
  return {n.at(0).u32(), n.at(1).u32()};
}

Target read_target(const Node& n) {
  n.keys({"name", "source_file", "tiles", "tiles_per_column", "memory_bytes", "memory_element_bytes",
          "interleaved_start", "alignment", "worker_threads", "clock_hz", "fp32_macs_per_cycle", "fp16_macs_per_cycle",
          "amp_fp32_input_channels", "amp_fp32_output_channels", "amp_fp16_input_channels", "amp_fp16_output_channels",
          "load_bytes_per_cycle", "exchange_word_bytes", "exchange_base_latency", "exchange_latency_per_column",
          "switch_cost", "multicast", "sync_cycles", "exchange_phase_overhead", "host_bytes_per_cycle",
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
  n.keys({"name", "source_file", "source_sha256", "seed", "tensors", "ops", "outputs"});
  Graph g;
  g.name = n["name"].str();
  g.source_file = n["source_file"].str();
  g.source_sha256 = n["source_sha256"].str();
  g.seed = n["seed"].u64();
  n["tensors"].each([&](const Node& t) {
    t.keys({"name", "shape", "dtype", "kind", "init_scale", "place"});
    Tensor tensor;
    tensor.name = t["name"].str();
    t["shape"].each([&](const Node& d) { tensor.shape.push_back(d.i64()); });
    tensor.dtype = t["dtype"].enumeration<DType>(2, dtype_name);
    tensor.kind = t["kind"].enumeration<TensorKind>(3, tensor_kind_name);
    tensor.init_scale = t["init_scale"].f64();
    tensor.place = read_place(t["place"]);
    g.tensors.push_back(std::move(tensor));
  });
  n["ops"].each([&](const Node& o) {
    o.keys({"kind", "inputs", "output", "relu", "transpose_b", "scale", "epsilon", "exponent", "place"});
    Op op;
    op.kind = o["kind"].enumeration<OpKind>(kOpKindCount, op_kind_name);
    op.inputs = o["inputs"].u32s();
    op.output = o["output"].u32();
    op.relu = o["relu"].boolean();
    op.transpose_b = o["transpose_b"].boolean();
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
    if (result.buffer > last_buffer) r.fail(fmt::format("buffer {} does not exist (the program has {})", result.buffer, p.buffers.size()));
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
      if (transfer.destination_addresses.size() != transfer.destinations.size() && !transfer.destination_addresses.empty())
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
    stream.dtype = h["dtype"].enumeration<DType>(2, dtype_name);
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
    stream.dtype = s["dtype"].enumeration<DType>(2, dtype_name);
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
      if (std::uint64_t{entry.offset} + entry.bytes > target.memory_bytes) b.fail("the buffer runs past the end of tile memory");
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
                       p["depth_groups"].u32(), p["row_groups"].u32(), p["candidates"].u64(), p["estimated_cycles"].u64()});
  });
  n["schedules"].each([&](const Node& s) {
    s.keys({"phase", "scheduler", "transfers", "words", "widest_multicast", "segments", "horizon",
            "endpoint_lower_bound", "lower_bound", "elapsed_ms"});
    ScheduleRemark remark{s["phase"].u32(), s["scheduler"].str(), s["transfers"].u64(), s["words"].u64(),
                          s["widest_multicast"].u64(), s["segments"].u64(), s["horizon"].u64(),
                          s["endpoint_lower_bound"].u64(), s["lower_bound"].u64(), 0};
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

std::string state_text(const CompilationState& state) { return layout(state_json(state, true)); }

std::string deterministic_state_text(const CompilationState& state) {
  return layout(state_json(state, false));
}

void write_state(const CompilationState& state, const std::string& path, const std::string& what) {
  write_file_atomically(path, state_text(state), what);
}

CompilationState parse_state(const std::string& text, const std::string& origin) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(origin + ": not a state file: " + e.what());
  }
  const Node root(document, "", origin);
  if (!document.is_object() || !document.contains("format") || document["format"] != kFormat)
    root.fail("not a tessera state file (no \"format\": \"tessera-state\")");
  if (root["version"].u64() != kStateFormatVersion)
    root["version"].fail(fmt::format("format version {} is not {}, the one this tessera reads; write the state again "
                                     "with this build", root["version"].u64(), kStateFormatVersion));
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
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": state file not found");
  if (const std::uintmax_t bytes = std::filesystem::file_size(path, ec); !ec && bytes > kMaxStateFileBytes)
    throw Error(fmt::format("{}: {} bytes; a state file may hold at most 1 GiB", path, bytes));
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw Error(path + ": cannot be read");
  return parse_state(std::move(text).str(), path);
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
    return name.compare(0, f.size(), f) == 0 && (name.size() == f.size() || !std::isalnum(static_cast<unsigned char>(name[f.size()])));
  });
}

std::vector<std::pair<std::string, std::string>> state_sections(const CompilationState& state) {
  std::vector<std::pair<std::string, std::string>> sections;
  const json document = state_json(state, false);  // items() would outlive a temporary
  for (const auto& [key, value] : document.items())
    if (key != "format" && key != "version" && key != "compiler_version" && key != "record")
      sections.emplace_back(key, value.dump());
  return sections;
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
      const bool touches = filter.shows_tile(transfer.source) ||
                           std::any_of(transfer.destinations.begin(), transfer.destinations.end(),
                                       [&](std::uint32_t d) { return filter.shows_tile(d); });
      if (filter.tiles.empty() || !touches) continue;  // unfiltered dumps keep the counts only
      out << "    transfer " << t << " " << transfer.source << " -> " << fmt::format("{}", fmt::join(transfer.destinations, ","))
          << " words=" << transfer.words << "\n";
    }
  }
  out << "\nstreams " << program.streams.size() << "\n";
  for (const auto& stream : program.streams) {
    if (!filter.shows_name(stream.tensor) && !filter.ops.empty()) continue;
    out << "  " << stream_kind_name(stream.kind) << " " << stream.tensor << " [" << stream.rows << " x "
        << stream.cols << "] slices=" << stream.slices.size() << "\n";
  }
  return out.str();
}

DumpFilter parse_dump_filter(const std::string& text) {
  DumpFilter filter;
  std::stringstream fields(text);
  for (std::string field; std::getline(fields, field, ',');) {
    const auto equals = field.find('=');
    const std::string key = field.substr(0, equals), value = equals == std::string::npos ? "" : field.substr(equals + 1);
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
        throw Error("--dump-filter: tile=" + yaml::echoed_token(value) + " is not a tile or a range LOW-HIGH (e.g. tile=0-3)");
      filter.tiles.emplace_back(static_cast<std::uint32_t>(low), static_cast<std::uint32_t>(high));
    } else {
      throw Error("--dump-filter: unknown field " + yaml::echoed_token(key) + " (the fields are tile and op)");
    }
  }
  return filter;
}

}  // namespace tessera
