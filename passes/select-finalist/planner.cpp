// Plans the canonical graph op by op: dense ops from costed candidates, elementwise ops in place.
#include "planner.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/lowering.hpp"
#include "block_plans.hpp"
#include "capacity.hpp"
#include "dense_plan.hpp"

namespace tessera::select_finalist {

namespace {

constexpr std::uint64_t kDoesNotFit = std::numeric_limits<std::uint64_t>::max();

struct CostedCandidate {
  DenseCandidate candidate;
  std::uint64_t peak_tile_bytes = 0;
  TileBytes peak_region_bytes;  ///< the most bytes any tile has in each region
  bool mapped = false;          ///< the tile-mapping screening replaced the mapping
  CostEstimate estimate;
  std::uint64_t host_input_cycles = 0;  ///< per run; the cost model does not see the host link
  std::uint64_t refined_exchange_cycles = 0;
  std::uint64_t refined_cycles = 0;
  std::optional<Fragment> fragment;  ///< built when costed, or later for a finalist
  /// What ranks costed candidates: the cost model's total plus the host link at every run.
  std::uint64_t score() const { return estimate.total() + host_input_cycles; }
};

/// Runs work(worker, i) for every i in [0, count) on up to `threads` workers (worker 0 is the
/// caller); rethrows the failure of the lowest i, so errors do not depend on the thread count.
template <typename Work>
void parallel_for(std::size_t count, unsigned threads, Work&& work) {
  const std::size_t workers = std::min<std::size_t>(std::max(threads, 1u), count);
  if (workers <= 1) {
    for (std::size_t i = 0; i < count; ++i) work(0u, i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(count);
  auto drain = [&](unsigned worker) {
    for (std::size_t i; (i = next.fetch_add(1)) < count;) try {
        work(worker, i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
  };
  std::vector<std::thread> pool;
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(drain, static_cast<unsigned>(w));
  drain(0u);
  for (std::thread& thread : pool) thread.join();
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

/// Log lines made on worker threads, written in a fixed order once they have joined.
class LogLines {
public:
  template <typename... Args>
  void info(fmt::format_string<Args...> format, Args&&... args) {
    lines_.emplace_back(false, fmt::format(format, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void debug(fmt::format_string<Args...> format, Args&&... args) {
    lines_.emplace_back(true, fmt::format(format, std::forward<Args>(args)...));
  }
  void write(const PassContext& context) const {
    for (const auto& [debug, line] : lines_)
      if (debug) context.logger.debug("{}: {}", context.span, line);
      else context.info("{}", line);
  }

private:
  std::vector<std::pair<bool, std::string>> lines_;
};

class Planner {
public:
  Planner(const Graph& graph, PassContext& context, const PlannerOptions& options, Program& program)
      : graph_(graph),
        target_(context.target),
        context_(context),
        options_(options),
        program_(program),
        distributions_(graph.tensors.size()),
        readers_(graph.tensors.size(), 0),
        is_output_(graph.tensors.size(), false),
        support_bytes_(context.target.tiles, 0),
        codelets_run_(context.target.tiles, 0) {
    for (const Op& op : graph.ops)
      for (std::uint32_t input : op.inputs) ++readers_.at(input);
    for (std::uint32_t output : graph.outputs) is_output_.at(output) = true;
    // Each extra worker gets its own cost model when the core can make one (plugins need
    // not be thread-safe). Without one (an isolated model) the planner stays on its own
    // thread: an isolated plugin's process is tied to the thread that first called it.
    if (context.new_cost_model)
      for (unsigned worker = 1; worker < context.threads; ++worker) worker_models_.push_back(context.new_cost_model());
    cost_threads_ = static_cast<unsigned>(worker_models_.size()) + 1;
  }

  Status plan(const Graph& model) {
    if (Status status = resolve_pins(model); !status.ok) return status;
    group_by_shape();
    for (std::uint32_t i = 0; i < graph_.ops.size(); ++i) {
      context_.progress(i, graph_.ops.size(), "ops");
      const Op& op = graph_.ops[i];
      reserve_ = later_weights(i);
      later_support_ = later_support(i);
      weight_share_ = weight_share(i);
      Status status = is_block_op(graph_, op)                                 ? plan_block(i)
                      : op.kind == OpKind::dense || op.kind == OpKind::matmul ? plan_dense(i)
                                                                              : plan_elementwise(i);
      if (!status.ok) return status;
      if (context_.logger.should_log(spdlog::level::debug)) log_resident(i);
      if (Status verdict = support_verdict(i); !verdict.ok) {
        // A pass holding weights more than once stops here and plans again with one row
        // group (row groups add gathers, so descriptors); otherwise the model is refused now.
        if (most_row_groups_ > 1 && options_.max_row_groups != 1 && options_.row_groups == 0) {
          support_over_op_ = i;
          return Status::success();
        }
        return verdict;
      }
    }
    return plan_outputs();
  }

  /// Numbers the ops by shape (kind, flags, operand and result shapes): a deep model repeats a
  /// few shapes, and an op plans much as the earlier ops of its shape did.
  void group_by_shape() {
    std::map<std::string, std::uint32_t> groups;
    shape_group_.clear();
    for (const Op& op : graph_.ops) {
      std::string key =
          fmt::format("{}:{}:{}:{}:{}", static_cast<int>(op.kind), op.relu, op.transpose_b, op.batch, op.heads);
      for (std::uint32_t input : op.inputs) key += fmt::format("|{}", fmt::join(tensor(input).shape, "x"));
      key += fmt::format(">{}", fmt::join(tensor(op.output).shape, "x"));
      shape_group_.push_back(groups.emplace(key, static_cast<std::uint32_t>(groups.size())).first->second);
    }
    later_of_group_.assign(groups.size(), 0);
    for (std::uint32_t group : shape_group_) ++later_of_group_[group];
    least_support_of_group_.assign(groups.size(), std::nullopt);
    repeated_before_ = 0;
  }

  /// After op `op_index`: support memory (code, vertex states, exchange descriptors) never
  /// frees and never leaves the standard region, so once a tile's is past the region no later
  /// op or placement can fit the program. Nor, in all likelihood, when the support memory a mean
  /// tile would hold, if each later op needed the least an earlier op of its shape did (ops of
  /// unseen shapes count nothing), comes to more than twice the region (a mean: the busiest tile
  /// holds more). Either is refused here, in seconds, not after planning ops that cannot fit.
  Status support_verdict(std::uint32_t op_index) {
    const Op& op = graph_.ops[op_index];
    const std::uint32_t group = shape_group_[op_index];
    // Vertex states and descriptors only: a codelet's code is held once per tile, by its first op.
    const std::uint64_t added = repeated_support_ - repeated_before_;
    repeated_before_ = repeated_support_;
    --later_of_group_[group];
    auto& least = least_support_of_group_[group];
    least = least ? std::min(*least, added) : added;

    const auto busiest = std::max_element(support_bytes_.begin(), support_bytes_.end());
    if (busiest != support_bytes_.end() && *busiest > target_.interleaved_start)
      return Status::failure(fmt::format(
          "{}: model does not fit: after {} '{}' (op {} of {}), tile {} needs {} bytes of support memory (code, "
          "vertex states, exchange descriptors), more than the {} bytes of its standard region, where support "
          "memory must stay; the later ops only add to it; fix: use a target with more tiles than '{}', or a "
          "model with fewer layers",
          where(op), op_kind_name(op.kind), tensor(op.output).name, op_index + 1, graph_.ops.size(),
          busiest - support_bytes_.begin(), *busiest, target_.interleaved_start, target_.name));

    std::uint64_t total = 0;
    for (std::uint64_t bytes : support_bytes_) total += bytes;
    double projected = static_cast<double>(total);
    for (std::size_t g = 0; g < later_of_group_.size(); ++g)
      if (least_support_of_group_[g]) projected += double(later_of_group_[g]) * double(*least_support_of_group_[g]);
    projected /= target_.tiles;
    if (projected <= 2.0 * static_cast<double>(target_.interleaved_start)) return Status::success();
    return Status::failure(fmt::format(
        "{}: model does not fit: the {} ops planned up to {} '{}' hold {} bytes of support memory (code, vertex "
        "states, exchange descriptors) on a mean tile; the {} later ops, each needing the least an earlier op of its "
        "shape did, bring it to {:.0f} bytes, more than twice the {} bytes of the standard region, where support "
        "memory must stay; fix: use a target with more tiles than '{}', or a model with fewer layers",
        where(op), op_index + 1, op_kind_name(op.kind), tensor(op.output).name, total / target_.tiles,
        graph_.ops.size() - op_index - 1, projected, target_.interleaved_start, target_.name));
  }

  /// The op after which this pass stopped, with some tile's support memory past its standard
  /// region while weights were held more than once.
  std::optional<std::uint32_t> support_over_op() const { return support_over_op_; }

  /// The first op that fit no plan after an earlier op held its weights once per row group
  /// (those copies may be what crowded it out).
  std::optional<std::uint32_t> starved_op() const { return starved_op_; }
  /// The ops no plan fitted, each planned with its smallest plan.
  const std::vector<std::uint32_t>& unfit_ops() const { return unfit_ops_; }
  /// The most row groups a selected dense plan has.
  std::uint32_t most_row_groups() const { return most_row_groups_; }
  /// Per tile, the support memory (code, vertex states, exchange descriptors) of the program.
  const std::vector<std::uint64_t>& support_bytes() const { return support_bytes_; }
  /// Per program buffer, the op that made it.
  const std::vector<std::uint32_t>& buffer_op() const { return buffer_op_; }
  /// Per dense op (by index), the row groups of its selected plan.
  const std::map<std::uint32_t, std::uint32_t>& selected_row_groups() const { return selected_row_groups_; }

private:
  /// Matches each `plans` entry to its dense op: the op's output, or a tensor of the model
  /// as written that lower-mid fused into it (the matmul's and the bias add's outputs).
  Status resolve_pins(const Graph& model) {
    if (options_.plans.empty()) return Status::success();
    std::map<std::string, std::uint32_t> op_of_name;  // tensor name -> canonical op index
    std::string valid;
    for (std::uint32_t i = 0; i < graph_.ops.size(); ++i) {
      const Op& op = graph_.ops[i];
      if (is_block_op(graph_, op) || (op.kind != OpKind::dense && op.kind != OpKind::matmul)) continue;
      std::vector<std::string> names{tensor(op.output).name};
      auto producer = [&](const std::string& name) -> const Op* {
        const std::int64_t index = model.find_tensor(name);
        for (const Op& written : model.ops)
          if (index >= 0 && written.output == static_cast<std::uint32_t>(index)) return &written;
        return nullptr;
      };
      // Walk back over the fused relu, then the fused bias add, to the matmul.
      if (const Op* relu = op.relu ? producer(names.back()) : nullptr; relu && relu->kind == OpKind::relu)
        names.push_back(model.tensors[relu->inputs[0]].name);
      if (const Op* add = op.inputs.size() == 3 ? producer(names.back()) : nullptr; add && add->kind == OpKind::add)
        names.push_back(model.tensors[add->inputs[0]].name);
      for (const std::string& name : names) op_of_name[name] = i;
      valid += (valid.empty() ? "" : ", ") + names[0];
      if (names.size() > 1) {
        valid += " (or";
        for (std::size_t n = 1; n < names.size(); ++n) valid += " " + names[n];
        valid += ")";
      }
    }
    std::map<std::uint32_t, std::string> named;  // op index -> the name that pinned it
    for (const auto& [name, pin] : options_.plans) {
      auto found = op_of_name.find(name);
      if (found == op_of_name.end())
        return Status::failure(
            fmt::format("{}: unknown op '{}' in select-finalist option 'plans'; key a pin by the "
                        "output tensor of a matmul/dense op: {}",
                        pin.place, name, valid.empty() ? "the model has none" : valid));
      if (auto [it, added] = named.emplace(found->second, name); !added)
        return Status::failure(fmt::format("{}: '{}' and '{}' name the same fused dense op in 'plans'; keep one pin",
                                           pin.place, it->second, name));
      pins_[found->second] = {name, pin};
    }
    return Status::success();
  }

  std::string where(const Op& op) const {
    return fmt::format("{}:{}:{}", graph_.source_file, op.place.line, op.place.column);
  }

  Status unsupported(const Op& op, const std::string& why) const {
    return Status::failure(fmt::format("{}: {} '{}' is not supported yet: {}", where(op), op_kind_name(op.kind),
                                       graph_.tensors[op.output].name, why));
  }

  const Tensor& tensor(std::uint32_t index) const { return graph_.tensors.at(index); }

  /// Bytes already committed on each tile while the next op runs: weights (kept for every
  /// run), every buffer still live at the current last superstep, and the support memory of
  /// the calls and copies planned so far (standard region).
  std::vector<TileBytes> resident_bytes() const {
    std::vector<TileBytes> bytes(target_.tiles);
    if (program_.supersteps.empty()) return bytes;
    const auto last = static_cast<std::uint32_t>(program_.supersteps.size() - 1);
    std::vector<bool> whole_program(program_.buffers.size(), false);
    for (std::uint32_t index : whole_program_buffers_) whole_program[index] = true;
    for (std::size_t i = 0; i < program_.buffers.size(); ++i) {
      const Buffer& buffer = program_.buffers[i];
      if (!whole_program[i] && buffer.last_use < last) continue;
      TileBytes& tile = bytes[buffer.tile];
      (buffer.region == Region::interleaved ? tile.interleaved : tile.standard) += aligned_bytes(buffer);
    }
    for (std::uint32_t tile = 0; tile < target_.tiles; ++tile) {
      bytes[tile].standard += support_bytes_[tile];
      bytes[tile].support = support_bytes_[tile];
    }
    return bytes;
  }

  /// What the tiles hold after op `op_index`: the busiest tile and the mean, all told and in
  /// support memory, and what weight copies leave for the later ops (held_back).
  void log_resident(std::uint32_t op_index) const {
    const std::vector<TileBytes> resident = resident_bytes();
    std::uint64_t busiest = 0, total = 0, busiest_support = 0, support = 0;
    std::uint32_t busiest_tile = 0;
    for (std::uint32_t tile = 0; tile < target_.tiles; ++tile) {
      if (resident[tile].total() > busiest) busiest = resident[tile].total(), busiest_tile = tile;
      total += resident[tile].total();
      busiest_support = std::max(busiest_support, support_bytes_[tile]);
      support += support_bytes_[tile];
    }
    context_.logger.debug(
        "{}: resident after op={} busiest_tile={} busiest_tile_bytes={} mean_tile_bytes={} "
        "busiest_support_bytes={} mean_support_bytes={} later_support_bytes={} largest_temporaries_bytes={}",
        context_.span, op_index, busiest_tile, busiest, total / target_.tiles, busiest_support, support / target_.tiles,
        later_support_, largest_temporaries_);
  }

  /// The weights that ops after `op_index` read and no op up to it does, spread evenly over
  /// the tiles (the least any plan of theirs can put on a tile): a plan of this op must leave
  /// room for them, or a plan that holds its weights once per row group could starve the
  /// later ops. Matmul right operands (`interleaved`) may go to either region (dense weights are
  /// standard data place-storage moves to the interleaved region when need be), the rest to standard.
  TileBytes later_weights(std::uint32_t op_index) const {
    std::vector<bool> read_before(graph_.tensors.size(), false), counted(graph_.tensors.size(), false);
    for (std::uint32_t i = 0; i <= op_index; ++i)
      for (std::uint32_t input : graph_.ops[i].inputs) read_before[input] = true;
    TileBytes reserve;
    for (std::uint32_t i = op_index + 1; i < graph_.ops.size(); ++i) {
      const Op& op = graph_.ops[i];
      for (std::size_t slot = 0; slot < op.inputs.size(); ++slot) {
        const std::uint32_t input = op.inputs[slot];
        const Tensor& t = tensor(input);
        if (t.kind != TensorKind::weight || read_before[input] || counted[input]) continue;
        counted[input] = true;
        const std::uint64_t bytes = packed_words(static_cast<std::uint64_t>(t.elements()), t.dtype) * 4;
        const bool matmul_operand = slot == 1 && (op.kind == OpKind::dense || op.kind == OpKind::matmul);
        (matmul_operand ? reserve.interleaved : reserve.standard) += (bytes + target_.tiles - 1) / target_.tiles;
      }
    }
    return reserve;
  }

  /// The support memory (vertex states, exchange descriptors) the ops after `op_index` will
  /// need per tile, taken as the mean the ops planned so far needed per op: without it, early
  /// ops holding their weights per row group fill the room a deep model's later descriptors
  /// need. A guess, so it only bounds weight copies (within_weight_share), never what fits.
  std::uint64_t later_support(std::uint32_t op_index) const {
    if (op_index == 0) return 0;
    const double so_far = static_cast<double>(repeated_support_) / target_.tiles;
    const double later = std::ceil(so_far / op_index * static_cast<double>(graph_.ops.size() - op_index));
    // Support memory lives in the standard region only: more than it holds is no estimate.
    return static_cast<std::uint64_t>(std::min(later, std::max(0.0, target_.interleaved_start - so_far)));
  }

  /// Per tile, what weight copies must leave for the later ops besides their weights: their
  /// support memory, and temporaries as large as the largest an op has held so far.
  std::uint64_t held_back() const { return later_support_ + largest_temporaries_; }

  /// Op `op_index`'s weights (those no earlier op read) as a share of them and every later
  /// op's: the share of each tile's room a plan holding its weights more than once may take.
  double weight_share(std::uint32_t op_index) const {
    std::vector<bool> read_before(graph_.tensors.size(), false), counted(graph_.tensors.size(), false);
    for (std::uint32_t i = 0; i < op_index; ++i)
      for (std::uint32_t input : graph_.ops[i].inputs) read_before[input] = true;
    double own = 0, all = 0;
    for (std::uint32_t i = op_index; i < graph_.ops.size(); ++i)
      for (std::uint32_t input : graph_.ops[i].inputs) {
        const Tensor& t = tensor(input);
        if (t.kind != TensorKind::weight || read_before[input] || counted[input]) continue;
        counted[input] = true;
        const auto bytes = static_cast<double>(packed_words(static_cast<std::uint64_t>(t.elements()), t.dtype) * 4);
        all += bytes;
        if (i == op_index) own += bytes;
      }
    return all > 0 ? own / all : 1.0;
  }

  /// Whether a plan that holds its weights once per row group (row_groups > 1) keeps to its
  /// share of each tile's room (weight_share_): an early op taking all the room the later ops'
  /// weights leave would starve the later ops' row groups, or the later ops outright.
  bool within_weight_share(const std::vector<TileBytes>& resident, const Fragment& fragment) const {
    const std::uint64_t capacity = target_.memory_bytes;
    std::vector<std::uint64_t> held(target_.tiles, 0);
    const auto& buffers = fragment.program.buffers;
    for (std::size_t i = 0; i < buffers.size(); ++i)
      if (fragment.program_buffer[i] == kNewBuffer && fragment.lifetime[i] == Lifetime::whole_program)
        held[buffers[i].tile] += aligned_bytes(buffers[i]);
    for (std::uint32_t tile = 0; tile < target_.tiles; ++tile) {
      const std::uint64_t room = capacity - std::min(capacity, resident[tile].total() + held_back());
      if (static_cast<double>(held[tile]) > weight_share_ * static_cast<double>(room)) return false;
    }
    return true;
  }

  /// The busiest tile's bytes with the candidate's buffers added, or kDoesNotFit when some
  /// tile overflows: its support memory beyond the standard region, its data beyond what the
  /// interleaved region takes besides the standard region's overflow (place-storage moves
  /// standard data there, support memory never), or both together beyond the room the later
  /// ops' weights leave (reserve_: the standard reserve in the standard region, the matmul
  /// weights in either). Conservative: it treats all of them as live together.
  std::uint64_t peak_if_fits(const std::vector<TileBytes>& resident, const std::vector<TileBytes>& added) const {
    const std::uint64_t standard_capacity =
        target_.interleaved_start - std::min(reserve_.standard, target_.interleaved_start);
    const std::uint64_t interleaved_capacity = target_.memory_bytes - target_.interleaved_start;
    const std::uint64_t total_capacity = standard_capacity + interleaved_capacity -
                                         std::min(reserve_.interleaved, standard_capacity + interleaved_capacity);
    std::uint64_t peak = 0;
    for (std::uint32_t tile = 0; tile < target_.tiles; ++tile) {
      const std::uint64_t support = resident[tile].support + added[tile].support;
      const std::uint64_t standard = resident[tile].standard + added[tile].standard;
      const std::uint64_t interleaved = resident[tile].interleaved + added[tile].interleaved;
      const std::uint64_t spilled = standard - std::min(standard, standard_capacity);
      if (support > standard_capacity || interleaved + spilled > interleaved_capacity ||
          standard + interleaved > total_capacity)
        return kDoesNotFit;
      peak = std::max(peak, standard + interleaved);
    }
    return peak;
  }

  /// The most bytes any tile holds in each region with the candidate's buffers added.
  TileBytes region_peaks(const std::vector<TileBytes>& resident, const std::vector<TileBytes>& added) const {
    TileBytes peak;
    for (std::uint32_t tile = 0; tile < target_.tiles; ++tile) {
      peak.standard = std::max(peak.standard, resident[tile].standard + added[tile].standard);
      peak.interleaved = std::max(peak.interleaved, resident[tile].interleaved + added[tile].interleaved);
    }
    return peak;
  }

  std::uint64_t smallest_peak(const std::vector<TileBytes>& resident, const std::vector<TileBytes>& added) const {
    std::uint64_t peak = 0;
    for (std::uint32_t tile = 0; tile < target_.tiles; ++tile)
      peak = std::max(peak, resident[tile].total() + added[tile].total());
    return peak;
  }

  /// Re-costs a finalist's exchange as the phases lower-exchanges will build (multicast
  /// copies merged), optionally scheduled by the exchange-scheduler plugin.
  void refine(unsigned worker, CostedCandidate& costed) {
    const Program& fragment = costed.fragment->program;
    std::uint64_t exchange = 0;
    for (const Superstep& step : fragment.supersteps) {
      const ExchangePhase phase = physical_phase(fragment, step, target_);
      if (options_.schedule_finalists && !phase.transfers.empty()) {
        ScheduleReport report;
        (void)context_.scheduler.schedule(phase, target_, context_.schedule_budget_ms, &report);
        exchange += report.horizon + target_.exchange_phase_overhead;
      } else {
        exchange += cost_model(worker).estimate_exchange(phase, target_);
      }
    }
    costed.refined_exchange_cycles = exchange;
    costed.refined_cycles =
        costed.estimate.compute_cycles + costed.estimate.sync_cycles + exchange + costed.host_input_cycles;
  }

  /// Everything that shapes a dense candidate's fragment apart from names and buffer
  /// numbers: two ops with equal signatures build fragments the cost model cannot tell
  /// apart (the repeated layers of an MLP), so it is asked once.
  std::vector<std::uint64_t> signature(const DenseOp& op, DenseCandidate candidate) const {
    auto kind = [](const Tensor* t) { return t ? std::uint64_t{static_cast<std::uint8_t>(t->kind)} + 1 : 0; };
    std::vector<std::uint64_t> key = {op.m,
                                      op.k,
                                      op.n,
                                      op.relu,
                                      kind(op.x),
                                      kind(op.w),
                                      kind(op.bias),
                                      op.first_superstep,
                                      candidate.column_groups,
                                      candidate.depth_groups,
                                      static_cast<std::uint64_t>(candidate.input),
                                      candidate.serial_splits,
                                      candidate.reduction_blocks,
                                      candidate.serial_row_splits,
                                      candidate.row_groups,
                                      candidate.tile_offset,
                                      candidate.rotated,
                                      candidate.transposed};
    for (const Piece& piece : op.x_pieces) {
      const Buffer& buffer = program_.buffers[piece.buffer];
      key.insert(key.end(), {piece.tile, piece.col_begin, piece.cols, piece.row_begin, piece.rows, buffer.bytes,
                             buffer.alignment, static_cast<std::uint64_t>(buffer.region)});
    }
    return key;
  }

  /// The cost model of a worker: the pipeline's for worker 0 (the planner's own thread).
  CostModel& cost_model(unsigned worker) { return worker == 0 ? context_.cost_model : *worker_models_.at(worker - 1); }

  /// Costs a built candidate, asking the cost model only if it has not seen an identical
  /// one. Thread-safe: workers cost candidates side by side.
  CostedCandidate cost(unsigned worker, const DenseOp& op, DenseCandidate candidate, std::uint64_t peak,
                       Fragment&& built) {
    CostedCandidate entry;
    entry.candidate = candidate;
    entry.peak_tile_bytes = peak;
    entry.fragment = std::move(built);
    std::vector<std::uint64_t> key = signature(op, candidate);
    {
      const std::lock_guard lock(estimates_mutex_);
      if (auto known = estimates_.find(key); known != estimates_.end()) {
        entry.estimate = known->second.estimate;
        entry.host_input_cycles = known->second.host_input_cycles;
        return entry;
      }
    }
    entry.estimate = cost_model(worker).estimate(entry.fragment->program, target_);
    entry.host_input_cycles = host_input_cycles(entry.fragment->program, target_);
    const std::lock_guard lock(estimates_mutex_);
    estimates_.try_emplace(std::move(key), KnownCost{entry.estimate, entry.host_input_cycles});
    return entry;
  }

  /// Screens `mapping_candidates` tile mappings (group offsets) of a finalist by the gather's
  /// exchange load, latency and on-tile copies; a better one that fits replaces the mapping
  /// and is costed again.
  void screen_mappings(unsigned worker, const DenseOp& op, std::uint32_t op_index, std::size_t index,
                       CostedCandidate& finalist, const std::vector<TileBytes>& resident, LogLines& log) {
    if (options_.mapping_candidates <= 1) return;
    DenseCandidate best = finalist.candidate;
    MappingLoad best_load = mapping_load(op, best, target_);
    std::uint32_t selected = 0;
    const std::uint32_t count = std::min(options_.mapping_candidates, target_.tiles);
    for (std::uint32_t i = 1; i < count; ++i) {
      // Odd candidates rotate each column group's depth groups; offsets move every group,
      // within one column group first (keeping the reduction's neighbours), then by groups.
      // Every third candidate is transposed, shifted by whole depth blocks.
      DenseCandidate mapped = finalist.candidate;
      const std::uint32_t step = i / 3;
      if (i % 3 == 2) {
        mapped.transposed = true;
        mapped.tile_offset = static_cast<std::uint32_t>((std::uint64_t{step} + 1) * best.column_groups % target_.tiles);
      } else {
        mapped.rotated = i % 3 == 1;
        mapped.tile_offset =
            (finalist.candidate.tile_offset + (step < best.depth_groups ? step : step * best.depth_groups)) %
            target_.tiles;
      }
      if (mapped == finalist.candidate) continue;
      const MappingLoad load = mapping_load(op, mapped, target_);
      log.debug(
          "tile mapping op={} finalist={} candidate={} tile_offset={} rotated={} exchange_load={} "
          "latency={} on_tile_copy_cycles={}",
          op_index, index, i, mapped.tile_offset, mapped.rotated, load.exchange_load, load.latency,
          load.on_tile_cycles);
      if (load.figure() < best_load.figure()) best = mapped, best_load = load, selected = i;
    }
    log.info(
        "screened tile mappings op={} finalist={} candidates={} selected={} tile_offset={} rotated={} "
        "exchange_load={} latency={} on_tile_copy_cycles={}",
        op_index, index, count, selected, best.tile_offset, best.rotated, best_load.exchange_load, best_load.latency,
        best_load.on_tile_cycles);
    if (best == finalist.candidate) return;
    DenseFragment layout(op, best, program_, target_);
    const bool over_budget =
        layout.peak_temporary_bytes() >
        static_cast<std::uint64_t>(options_.available_memory_proportion * double(target_.memory_bytes));
    if (layout.oversized() || over_budget) return;
    if (best.row_groups > 1 && !within_weight_share(resident, layout.laid_out())) return;
    Fragment built = std::move(layout).build();
    const std::vector<TileBytes> added = new_bytes(built, target_);
    const std::uint64_t peak = peak_if_fits(resident, added);
    if (peak == kDoesNotFit) return;
    const TileBytes regions = region_peaks(resident, added);
    finalist = cost(worker, op, best, peak, std::move(built));
    finalist.peak_region_bytes = regions;
    finalist.mapped = true;
  }

  void record(std::vector<TensorDistribution> made) {
    for (TensorDistribution& entry : made) distributions_.at(entry.tensor) = std::move(entry.distribution);
  }

  /// Appends op `op_index`'s chosen fragment to the program, holding its support memory (code,
  /// vertex states, exchange descriptors: kept for the whole program) on its tiles.
  void commit(Fragment&& fragment, std::uint32_t op_index) {
    const Program& made = fragment.program;
    std::vector<std::uint64_t> temporaries(target_.tiles, 0);
    for (std::size_t i = 0; i < made.buffers.size(); ++i)
      if (fragment.program_buffer[i] == kNewBuffer && fragment.lifetime[i] == Lifetime::transient)
        temporaries.at(made.buffers[i].tile) += aligned_bytes(made.buffers[i]);
    for (std::uint64_t bytes : temporaries) largest_temporaries_ = std::max(largest_temporaries_, bytes);
    for (const Superstep& step : made.supersteps) {
      for (const CodeletCall& call : step.compute) {
        const std::uint32_t bit = 1u << static_cast<std::uint32_t>(call.codelet);
        if (!(codelets_run_[call.tile] & bit)) support_bytes_[call.tile] += codelet_code_bytes(call.codelet);
        codelets_run_[call.tile] |= bit;
        support_bytes_[call.tile] += vertex_state_bytes(call.codelet);
        repeated_support_ += vertex_state_bytes(call.codelet);
      }
    }
    const std::vector<std::uint64_t> descriptors = exchange_descriptor_bytes(made, target_.tiles, target_.multicast);
    for (std::uint32_t tile = 0; tile < target_.tiles; ++tile) {
      support_bytes_[tile] += descriptors[tile];
      repeated_support_ += descriptors[tile];
    }
    record(commit_fragment(std::move(fragment), program_, whole_program_buffers_));
    buffer_op_.resize(program_.buffers.size(), op_index);
  }

  Status plan_dense(std::uint32_t op_index) {
    const Op& op = graph_.ops[op_index];
    const std::size_t max_inputs = op.kind == OpKind::dense ? 3 : 2;
    if (op.inputs.size() < 2 || op.inputs.size() > max_inputs)
      return Status::failure(fmt::format("{}: {} has {} inputs; run lower-mid to canonicalise the graph", where(op),
                                         op_kind_name(op.kind), op.inputs.size()));
    const Tensor& x = tensor(op.inputs[0]);
    const Tensor& w = tensor(op.inputs[1]);
    const Tensor* bias = op.inputs.size() == 3 ? &tensor(op.inputs[2]) : nullptr;
    if (w.kind == TensorKind::intermediate)
      return unsupported(op, fmt::format("its right operand '{}' is computed by the graph; only weights "
                                         "and inputs can be multiplied by so far",
                                         w.name));
    if (bias && bias->kind == TensorKind::intermediate)
      return unsupported(op, fmt::format("its bias '{}' is computed by the graph; only weights and "
                                         "inputs can be biases so far",
                                         bias->name));
    if (x.shape.size() != 2 || w.shape.size() != 2 || x.cols() != w.rows())
      return Status::failure(
          fmt::format("{}: operands '{}' and '{}' do not multiply; run lower-mid to "
                      "check shapes",
                      where(op), x.name, w.name));

    DenseOp dense;
    dense.name = fmt::format("dense{}", op_index);
    dense.m = static_cast<std::uint32_t>(x.rows());
    dense.k = static_cast<std::uint32_t>(x.cols());
    dense.n = static_cast<std::uint32_t>(w.cols());
    dense.x_index = op.inputs[0];
    dense.output_index = op.output;
    dense.first_superstep = program_.supersteps.empty();
    dense.x = &x;
    dense.w = &w;
    dense.bias = bias;
    dense.relu = op.kind == OpKind::dense && op.relu;
    // x is gathered from its pieces once it has some (computed, or a graph input an
    // earlier op spread); otherwise the host writes it, directly or spread once.
    if (const auto& distribution = distributions_[op.inputs[0]]) {
      dense.x_pieces = distribution->pieces;
      std::sort(dense.x_pieces.begin(), dense.x_pieces.end(),
                [](const Piece& a, const Piece& b) { return a.col_begin < b.col_begin; });
    } else if (x.kind == TensorKind::intermediate) {
      return Status::failure(fmt::format("{}: '{}' is read before it is produced", where(op), x.name));
    } else {
      dense.scatter_layout = scatter_layout(dense.k, target_.tiles);
    }
    dense.orientation = options_.orientation;

    // Screen every enumerated candidate cheaply, then build and cost the best that fit.
    std::vector<std::pair<std::uint64_t, DenseCandidate>> screened;
    std::vector<DenseCandidate> candidates = enumerate_dense_candidates(dense, target_.tiles);
    DensePins pins{options_.column_groups,    options_.depth_groups, options_.serial_splits,
                   options_.reduction_blocks, options_.row_groups,   options_.serial_row_splits};
    if (auto pinned = pins_.find(op_index); pinned != pins_.end()) {
      const OpPin& pin = pinned->second.second;
      for (auto [field, value] : {std::pair{&pins.column_groups, pin.column_groups},
                                  {&pins.depth_groups, pin.depth_groups},
                                  {&pins.serial_splits, pin.serial_splits},
                                  {&pins.reduction_blocks, pin.reduction_blocks},
                                  {&pins.serial_row_splits, pin.serial_row_splits},
                                  {&pins.row_groups, pin.row_groups}})
        if (value != 0) *field = value;
      // The same clamping as pin_candidates: rows to the op and tiles, columns and depth to
      // the op and the row groups' share of the tiles (0: free).
      const std::uint32_t row_groups = pins.row_groups, column_groups = pins.column_groups,
                          depth_groups = pins.depth_groups;
      const std::uint32_t used_rows = row_groups ? std::min({row_groups, dense.m, target_.tiles}) : 0;
      const std::uint32_t share = target_.tiles / std::max(1u, used_rows);
      const std::uint32_t used_columns = column_groups ? std::min({column_groups, dense.n, share}) : 0;
      const std::uint32_t used_depth =
          depth_groups ? std::min(depth_groups, std::max(1u, std::min(dense.k, share / std::max(1u, used_columns))))
                       : 0;
      // Serial splits, reduction blocks and serial row splits clamp per candidate: logged as asked.
      context_.info(
          "pinned operator plan op={} name={} column_groups={} depth_groups={} row_groups={} "
          "requested_column_groups={} requested_depth_groups={} requested_row_groups={} clamped={} "
          "serial_splits={} reduction_blocks={} serial_row_splits={}",
          op_index, pinned->second.first, used_columns, used_depth, used_rows, column_groups, depth_groups, row_groups,
          used_columns != column_groups || used_depth != depth_groups || used_rows != row_groups, pins.serial_splits,
          pins.reduction_blocks, pins.serial_row_splits);
    }
    // Planning again with fewer copies of the weights: everywhere, or for the ops live where memory overflowed.
    std::uint32_t row_group_cap = options_.max_row_groups;
    if (auto cap = options_.row_group_caps.find(op_index); cap != options_.row_group_caps.end())
      row_group_cap = row_group_cap ? std::min(row_group_cap, cap->second) : cap->second;
    if (row_group_cap != 0)
      std::erase_if(candidates, [&](const DenseCandidate& c) { return c.row_groups > row_group_cap; });
    if (pins.any()) candidates = pin_candidates(candidates, dense, target_.tiles, pins);
    const std::vector<TileBytes> resident = resident_bytes();
    // A candidate holding its weights per row group whose weight block alone exceeds its share
    // of the roomiest tile can never pass within_weight_share: not worth a screening slot.
    std::uint64_t most_room = 0;
    for (const TileBytes& bytes : resident)
      most_room = std::max(
          most_room, target_.memory_bytes - std::min<std::uint64_t>(target_.memory_bytes, bytes.total() + held_back()));
    auto over_share = [&](const DenseCandidate& c) {
      if (c.row_groups <= 1 || (pins.row_groups != 0 && c.row_groups == pins.row_groups)) return false;
      const std::uint64_t block = packed_words(std::uint64_t{(dense.k + c.depth_groups - 1) / c.depth_groups} *
                                                   ((dense.n + c.column_groups - 1) / c.column_groups),
                                               dense.w->dtype) *
                                  4;
      return static_cast<double>(block) > weight_share_ * static_cast<double>(most_room);
    };
    // Screens candidates cheaply, best first, keeping max_candidates; returns how many there were.
    auto screen = [&](const std::vector<DenseCandidate>& all) {
      screened.clear();
      for (const DenseCandidate& candidate : all)
        if (!over_share(candidate)) screened.emplace_back(screening_cycles(dense, candidate, target_), candidate);
      std::sort(screened.begin(), screened.end());
      if (screened.size() > options_.max_candidates) screened.resize(options_.max_candidates);
      return all.size();
    };
    std::size_t enumerated = screen(candidates);

    std::vector<CostedCandidate> finalists;  // best first, at most options_.finalists
    std::size_t rejected = 0, costed = 0;
    const auto temporary_budget =
        static_cast<std::uint64_t>(options_.available_memory_proportion * double(target_.memory_bytes));
    std::optional<std::pair<std::uint64_t, DenseCandidate>> smallest;
    // Candidates are laid out, checked and costed in windows of as many as are still wanted,
    // side by side; the bookkeeping then runs in screening order, as a serial loop would.
    struct Trial {
      std::uint64_t needed = kDoesNotFit;  ///< busiest tile's bytes when it does not fit
      std::optional<CostedCandidate> costed;
      TileBytes regions;          ///< the most bytes any tile holds in each region with it
      const char* why = nullptr;  ///< what rejected it
    };
    // Lays out, checks and costs the screened candidates until costed_candidates fit.
    auto try_screened = [&] {
      for (std::size_t next = 0; costed < options_.costed_candidates && next < screened.size();) {
        const std::size_t window = std::min<std::size_t>(options_.costed_candidates - costed, screened.size() - next);
        std::vector<Trial> trials(window);
        parallel_for(window, cost_threads_, [&](unsigned worker, std::size_t i) {
          const DenseCandidate& candidate = screened[next + i].second;
          // Its buffers are checked as soon as they are laid out; a candidate they fit is built
          // and checked again with the support memory (code, vertex states, exchange
          // descriptors) its calls and copies need. A candidate refused before it is built
          // reports its buffers' bytes alone (the least it needs).
          DenseFragment layout(dense, candidate, program_, target_);
          if (layout.oversized()) return;
          const bool over_budget = layout.peak_temporary_bytes() > temporary_budget;
          const bool over_share = candidate.row_groups > 1 && candidate.row_groups != pins.row_groups &&
                                  !within_weight_share(resident, layout.laid_out());
          const std::vector<TileBytes> buffers = new_buffer_bytes(layout.laid_out(), target_.tiles);
          auto refuse = [&](const std::vector<TileBytes>& added, const char* why) {
            trials[i].needed = smallest_peak(resident, added);
            trials[i].regions = region_peaks(resident, added);
            trials[i].why = why;
          };
          if (over_budget || over_share || peak_if_fits(resident, buffers) == kDoesNotFit)
            return refuse(buffers, over_budget ? "temporaries" : over_share ? "weight_share" : "region");
          Fragment built = std::move(layout).build();
          const std::vector<TileBytes> added = new_bytes(built, target_);
          const std::uint64_t peak = peak_if_fits(resident, added);
          if (peak == kDoesNotFit) return refuse(added, "region");
          trials[i].costed = cost(worker, dense, candidate, peak, std::move(built));
          trials[i].costed->peak_region_bytes = region_peaks(resident, added);
        });
        for (std::size_t i = 0; i < window; ++i) {
          const auto& [screening, candidate] = screened[next + i];
          if (!trials[i].costed) {
            ++rejected;
            context_.logger.debug(
                "{}: rejected operator plan op={} column_groups={} depth_groups={} row_groups={} serial_splits={} "
                "serial_row_splits={} reason={} peak_standard_bytes={} peak_interleaved_bytes={}",
                context_.span, op_index, candidate.column_groups, candidate.depth_groups, candidate.row_groups,
                candidate.serial_splits, candidate.serial_row_splits, trials[i].why ? trials[i].why : "oversized",
                trials[i].regions.standard, trials[i].regions.interleaved);
            if (!smallest || trials[i].needed < smallest->first) smallest.emplace(trials[i].needed, candidate);
            continue;
          }
          CostedCandidate& entry = *trials[i].costed;
          ++costed;
          context_.logger.debug(
              "{}: costed operator plan op={} column_groups={} depth_groups={} row_groups={} "
              "serial_splits={} reduction_blocks={} serial_row_splits={} input={} screening_cycles={} "
              "estimated_cycles={} host_input_cycles={}",
              context_.span, op_index, candidate.column_groups, candidate.depth_groups, candidate.row_groups,
              candidate.serial_splits, candidate.reduction_blocks, candidate.serial_row_splits,
              input_source_name(candidate.input), screening, entry.estimate.total(), entry.host_input_cycles);
          auto position = std::find_if(finalists.begin(), finalists.end(), [&](const CostedCandidate& kept) {
            return std::tuple(entry.score(), entry.candidate) < std::tuple(kept.score(), kept.candidate);
          });
          finalists.insert(position, std::move(entry));
          if (finalists.size() > options_.finalists) finalists.pop_back();
        }
        next += window;
      }
    };
    try_screened();
    context_.info("screened operator plans op={} candidates={} screened={} rejected_for_memory={} costed={}", op_index,
                  enumerated, screened.size(), rejected, costed);
    // Memory is short: the same splits again with their columns in serial slices (unless pinned).
    if (finalists.empty() && pins.serial_splits == 0) {
      const auto smallest_plain = smallest;  // what a does-not-fit report shows: the simpler plan
      enumerated = screen(serial_candidates(candidates, dense, {2, 4, 8, 16}));
      rejected = 0;
      try_screened();
      context_.info("screened serial splits op={} candidates={} screened={} rejected_for_memory={} costed={}", op_index,
                    enumerated, screened.size(), rejected, costed);
      if (finalists.empty()) smallest = smallest_plain;
    }
    // Still short: the splits that hold the weights once (one row group), which screening ranks
    // below the faster ones that copy them, plain then in serial slices (unless pinned).
    if (finalists.empty() && pins.row_groups == 0) {
      std::vector<DenseCandidate> single = candidates;
      std::erase_if(single, [](const DenseCandidate& c) { return c.row_groups > 1; });
      if (!single.empty() && single.size() < candidates.size()) {
        const auto smallest_before = smallest;
        enumerated = screen(single);
        rejected = 0;
        try_screened();
        if (finalists.empty() && pins.serial_splits == 0) {
          screen(serial_candidates(single, dense, {2, 4, 8, 16}));
          try_screened();
        }
        context_.info("screened one row group op={} candidates={} rejected_for_memory={} costed={}", op_index,
                      enumerated, rejected, costed);
        if (finalists.empty()) smallest = smallest_before;
      }
    }
    // Still short (a large batch): the rows in serial chunks that share their buffers (unless pinned).
    if (finalists.empty() && !pins.any()) {
      const auto smallest_before = smallest;
      enumerated = screen(serial_row_candidates(candidates, dense, {2, 4, 8, 16, 32}));
      rejected = 0;
      try_screened();
      context_.info("screened serial row splits op={} candidates={} screened={} rejected_for_memory={} costed={}",
                    op_index, enumerated, screened.size(), rejected, costed);
      if (finalists.empty()) smallest = smallest_before;
    }

    if (finalists.empty()) {
      if (most_row_groups_ > 1 && !starved_op_) starved_op_ = op_index;
      if (!smallest || smallest->first == kDoesNotFit)
        return Status::failure(
            fmt::format("{}: model does not fit: every plan of {} '{}' needs a buffer of "
                        "4 GiB or more on one tile; use a target with more tiles",
                        where(op), op_kind_name(op.kind), tensor(op.output).name));
      // Nothing fits: carry on with the smallest plan so place-storage reports every tile
      // over, with its buffers, which says far more than a refusal here could.
      context_.info(
          "no operator plan fits in tile memory op={} column_groups={} depth_groups={} "
          "row_groups={} serial_splits={} reduction_blocks={} serial_row_splits={} peak_tile_bytes={} memory_bytes={}",
          op_index, smallest->second.column_groups, smallest->second.depth_groups, smallest->second.row_groups,
          smallest->second.serial_splits, smallest->second.reduction_blocks, smallest->second.serial_row_splits,
          smallest->first, target_.memory_bytes);
      unfit_ops_.push_back(op_index);
      finalists.push_back(cost(0, dense, smallest->second, smallest->first,
                               DenseFragment(dense, smallest->second, program_, target_).build()));
    }

    // Finalists are screened, built and refined side by side; their lines are logged in order.
    std::vector<LogLines> notes(finalists.size());
    // The scheduler (schedule_finalists) may be isolated too: it is called from this thread.
    parallel_for(
        finalists.size(), options_.schedule_finalists ? 1 : cost_threads_, [&](unsigned worker, std::size_t i) {
          CostedCandidate& finalist = finalists[i];
          screen_mappings(worker, dense, op_index, i, finalist, resident, notes[i]);
          refine(worker, finalist);
          notes[i].info(
              "retained operator-plan finalist op={} finalist={} column_groups={} depth_groups={} "
              "row_groups={} serial_splits={} reduction_blocks={} serial_row_splits={} input={} estimated_cycles={} "
              "estimated_exchange_cycles={} "
              "host_input_cycles={} refined_cycles={} refined_exchange_cycles={} peak_tile_bytes={} "
              "peak_standard_bytes={} peak_interleaved_bytes={}",
              op_index, i, finalist.candidate.column_groups, finalist.candidate.depth_groups,
              finalist.candidate.row_groups, finalist.candidate.serial_splits, finalist.candidate.reduction_blocks,
              finalist.candidate.serial_row_splits, input_source_name(finalist.candidate.input),
              finalist.estimate.total(), finalist.estimate.exchange_cycles, finalist.host_input_cycles,
              finalist.refined_cycles, finalist.refined_exchange_cycles, finalist.peak_tile_bytes,
              finalist.peak_region_bytes.standard, finalist.peak_region_bytes.interleaved);
          if (options_.schedule_finalists)
            notes[i].info(
                "scheduled operator-plan finalist op={} finalist={} mapped={} analytical_cycles={} "
                "analytical_exchange_cycles={} scheduled_exchange_cycles={} refined_cycles={}",
                op_index, i, finalist.mapped, finalist.score(), finalist.estimate.exchange_cycles,
                finalist.refined_exchange_cycles, finalist.refined_cycles);
        });
    for (const LogLines& lines : notes) lines.write(context_);
    auto best = std::min_element(finalists.begin(), finalists.end(),
                                 [](const auto& a, const auto& b) { return a.refined_cycles < b.refined_cycles; });
    const BusiestMatmul busiest = busiest_matmul(dense, best->candidate, target_);
    context_.info(
        "selected operator plan op={} finalist={} column_groups={} depth_groups={} row_groups={} "
        "serial_splits={} reduction_blocks={} serial_row_splits={} input={} estimated_cycles={} "
        "estimated_exchange_cycles={} busiest_matmul={}x{}x{} orientation={} as_is_cycles={} swapped_cycles={} "
        "reduce_scatter={}",
        op_index, best - finalists.begin(), best->candidate.column_groups, best->candidate.depth_groups,
        best->candidate.row_groups, best->candidate.serial_splits, best->candidate.reduction_blocks,
        best->candidate.serial_row_splits, input_source_name(best->candidate.input), best->refined_cycles,
        best->refined_exchange_cycles, busiest.m, busiest.k, busiest.n, busiest.orientation == 0 ? "as_is" : "swapped",
        busiest.cycles(0, target_), busiest.cycles(1, target_), reduce_scatter_name(dense, best->candidate));
    context_.remark({op_index, op_kind_name(op.kind), "operator", best->candidate.column_groups,
                     best->candidate.depth_groups, best->candidate.row_groups, finalists.size(), best->refined_cycles});
    most_row_groups_ = std::max(most_row_groups_, best->candidate.row_groups);
    selected_row_groups_[op_index] = best->candidate.row_groups;
    commit(std::move(*best->fragment), op_index);
    return Status::success();
  }

  /// Binary ops (add, sub, mul, div) and unary ones (relu, sigmoid, ...) that lower-mid left
  /// alone run where their first input lives, appended to the compute of the last superstep
  /// (where or after it was produced). They write new buffers unless this op is the value's
  /// only reader and it is no graph output or weight (nobody else can see the change).
  Status plan_elementwise(std::uint32_t op_index) {
    const Op& op = graph_.ops[op_index];
    const bool binary = is_binary(op.kind);
    if (!binary && !is_unary(op.kind)) return unsupported(op, "the planner has no plan for this kind of op");
    if (op.inputs.size() != (binary ? 2u : 1u))
      return Status::failure(fmt::format("{}: {} has {} inputs", where(op), op_kind_name(op.kind), op.inputs.size()));
    const std::uint32_t first = op.inputs[0];
    // A graph input (or a weight: a constant output's copy) no earlier op spread: the host writes
    // it in row groups (a block plan).
    if (!distributions_[first] && tensor(first).kind != TensorKind::intermediate) return plan_block(op_index);
    if (!distributions_[first] || program_.supersteps.empty())
      return unsupported(op, fmt::format("its first operand '{}' is a graph input or weight no earlier op "
                                         "spread over the tiles; elementwise ops run where their first operand "
                                         "lives",
                                         tensor(first).name));
    const Distribution& input = *distributions_[first];
    // Weights must survive for the next run, so they are never overwritten.
    const bool in_place = readers_[first] == 1 && !is_output_[first] && tensor(first).kind != TensorKind::weight;
    const std::string name = fmt::format("{}{}", op_kind_name(op.kind), op_index);
    const std::uint32_t alignment = std::max(target_.alignment, 8u);
    const Region region = region_for(Region::standard, target_);
    const std::uint32_t rows = input.rows;

    FragmentBuilder builder(program_, 0);
    Distribution output{rows, {}};
    // The buffer that receives the result: the input itself, or a copy of it.
    auto result_buffer = [&](const Piece& piece, std::uint32_t source, bool copy_input) {
      if (in_place) return source;
      const std::uint32_t words = piece.row_count(rows) * piece.cols;
      const std::uint32_t out =
          builder.create(name + ".out", piece.tile, words, region, alignment, Lifetime::transient);
      if (copy_input) builder.call(0, piece.tile, Codelet::copy, {{source, 0}, {out, 0}}, {words});
      return out;
    };

    if (!binary) {
      for (const Piece& piece : input.pieces) {
        const std::uint32_t source = builder.existing(piece.buffer);
        const std::uint32_t count = piece.row_count(rows) * piece.cols;
        // relu works in place (on a copy); the others read one buffer and write another, or the same.
        const bool relu = op.kind == OpKind::relu;
        const std::uint32_t out = result_buffer(piece, source, relu);
        if (relu) builder.call(0, piece.tile, Codelet::relu, {{out, 0}}, {count});
        else call_unary(builder, 0, piece.tile, graph_, op, source, out, count);
        output.pieces.push_back({piece.tile, piece.col_begin, piece.cols, out, piece.row_begin, piece.rows});
      }
    } else {
      const Tensor& other = tensor(op.inputs[1]);
      if (other.kind == TensorKind::intermediate) {
        const auto& second = distributions_[op.inputs[1]];
        auto key = [](const Piece& p) { return std::tuple(p.col_begin, p.cols, p.row_begin, p.rows, p.tile); };
        std::vector<Piece> a = input.pieces, b = second ? second->pieces : std::vector<Piece>{};
        auto by_key = [&](const Piece& l, const Piece& r) { return key(l) < key(r); };
        std::sort(a.begin(), a.end(), by_key);
        std::sort(b.begin(), b.end(), by_key);
        const bool same =
            second && second->rows == rows && a.size() == b.size() &&
            std::equal(a.begin(), a.end(), b.begin(), [&](const Piece& l, const Piece& r) { return key(l) == key(r); });
        // Differently spread operands (or a row vector): the second is gathered into the first's blocks.
        if (!same || other.shape != tensor(first).shape) return plan_block(op_index);
        for (std::size_t i = 0; i < a.size(); ++i) {
          const std::uint32_t words = a[i].row_count(rows) * a[i].cols;
          const std::uint32_t out =
              builder.create(name + ".out", a[i].tile, words, region, alignment, Lifetime::transient);
          call_binary(builder, 0, a[i].tile, op.kind, tensor(first).dtype, builder.existing(a[i].buffer),
                      builder.existing(b[i].buffer), out, words);
          output.pieces.push_back({a[i].tile, a[i].col_begin, a[i].cols, out, a[i].row_begin, a[i].rows});
        }
      } else {
        // A weight or input operand arrives from the host in the same pieces (its columns of a
        // row vector, its rows of a column).
        const Broadcast broadcast = binary_broadcast(tensor(first), other);
        const bool row_vector = broadcast == Broadcast::row, column = broadcast == Broadcast::column;
        const StreamKind kind = other.kind == TensorKind::weight ? StreamKind::weight : StreamKind::input;
        const Lifetime lifetime = other.kind == TensorKind::weight ? Lifetime::whole_program : Lifetime::from_start;
        for (const Piece& piece : input.pieces) {
          const std::uint32_t source = builder.existing(piece.buffer);
          const std::uint32_t piece_rows = piece.row_count(rows);
          const std::uint32_t operand_rows = row_vector ? 1 : piece_rows, operand_cols = column ? 1 : piece.cols;
          const std::uint32_t operand = builder.create(
              name + ".operand", piece.tile, packed_words(std::uint64_t{operand_rows} * operand_cols, other.dtype),
              region, alignment, lifetime);
          builder.host_slice(other, kind, operand, row_vector ? 0 : piece.row_begin, operand_rows,
                             column ? 0 : piece.col_begin, operand_cols);
          std::uint32_t out;
          if (row_vector) {
            out = result_buffer(piece, source, true);
            call_binary_row(builder, 0, piece.tile, op.kind, other.dtype, out, operand, piece_rows, piece.cols);
          } else if (column) {
            out = result_buffer(piece, source, true);
            call_binary_column(builder, 0, piece.tile, op.kind, other.dtype, out, operand, piece_rows, piece.cols);
          } else {
            out = result_buffer(piece, source, false);
            call_binary(builder, 0, piece.tile, op.kind, other.dtype, source, operand, out, piece_rows * piece.cols);
          }
          output.pieces.push_back({piece.tile, piece.col_begin, piece.cols, out, piece.row_begin, piece.rows});
        }
      }
    }
    program_.supersteps.back().label += "+" + name;
    std::vector<TensorDistribution> made;
    made.push_back({op.output, std::move(output)});
    commit(builder.finish(std::move(made)), op_index);
    context_.info("planned elementwise op op={} kind={} in_place={} pieces={}", op_index, op_kind_name(op.kind),
                  in_place, distributions_[op.output]->pieces.size());
    context_.remark({op_index, op_kind_name(op.kind), "elementwise", 0, 0, 0, 1, 0});
    return Status::success();
  }

  /// softmax, layer_norm, products of activations and adds of differently spread
  /// activations: block plans (block_plans.hpp), costed by the cost model.
  Status plan_block(std::uint32_t op_index) {
    const Op& op = graph_.ops[op_index];
    const std::vector<TileBytes> resident = resident_bytes();
    BlockPlanContext plan{
        graph_,
        op,
        op_index,
        program_,
        target_,
        context_,
        distributions_,
        [&](const std::vector<TileBytes>& added) { return peak_if_fits(resident, added) != kDoesNotFit; },
        options_.orientation,
        tile_cursor_,
        &unfit_ops_};
    std::optional<Fragment> fragment;
    if (Status status = plan_block_op(plan, fragment); !status.ok) return status;
    tile_cursor_ = plan.tile_cursor;
    commit(std::move(*fragment), op_index);
    return Status::success();
  }

  /// Output streams read every piece of each graph output after the last superstep, so
  /// those buffers (and the weights, written once for every run) live to the end.
  Status plan_outputs() {
    const auto last = static_cast<std::uint32_t>(program_.supersteps.empty() ? 0 : program_.supersteps.size() - 1);
    for (std::uint32_t index : whole_program_buffers_) program_.buffers[index].last_use = last;
    for (std::uint32_t index : graph_.outputs) {
      const Tensor& output = tensor(index);
      const auto& distribution = distributions_[index];
      if (!distribution)
        return Status::failure(fmt::format("{}: graph output '{}' is not computed by any op the planner ran",
                                           graph_.source_file, output.name));
      HostStream stream;
      stream.tensor = output.name;
      stream.kind = StreamKind::output;
      stream.dtype = output.dtype;  // int32 and bool outputs stream their words
      stream.rows = static_cast<std::uint32_t>(output.rows());
      stream.cols = static_cast<std::uint32_t>(output.cols());
      for (const Piece& piece : distribution->pieces) {
        program_.buffers[piece.buffer].last_use = last;
        stream.slices.push_back(
            {{piece.buffer, 0}, piece.row_begin, piece.row_count(distribution->rows), piece.col_begin, piece.cols});
      }
      program_.streams.push_back(std::move(stream));
    }
    return Status::success();
  }

  const Graph& graph_;
  const Target& target_;
  PassContext& context_;
  PlannerOptions options_;
  Program& program_;
  std::vector<std::optional<Distribution>> distributions_;  ///< per tensor, once computed
  std::vector<std::uint32_t> readers_;                      ///< per tensor: ops reading it
  std::vector<bool> is_output_;
  std::vector<std::uint32_t> whole_program_buffers_;
  TileBytes reserve_;                      ///< per tile, for the weights of the ops not planned yet (later_weights)
  std::uint64_t later_support_ = 0;        ///< per tile, for the support memory of the ops not planned yet
  std::uint64_t largest_temporaries_ = 0;  ///< the most transient bytes an op planned so far put on a tile
  std::uint64_t repeated_support_ = 0;     ///< over all tiles: vertex states and descriptors planned so far
  double weight_share_ = 1.0;              ///< this op's share of the room for weights held per row group
  std::uint32_t most_row_groups_ = 1;      ///< of the selected dense plans: above 1, weights are held more than once
  std::map<std::uint32_t, std::uint32_t> selected_row_groups_;  ///< op index -> row groups of its dense plan
  std::uint32_t tile_cursor_ = 0;  ///< the tile the next block op starts on (BlockPlanContext)
  std::optional<std::uint32_t> starved_op_;
  std::optional<std::uint32_t> support_over_op_;                      ///< support_over_op()
  std::vector<std::uint32_t> shape_group_;                            ///< per op, its shape group (group_by_shape)
  std::vector<std::uint32_t> later_of_group_;                         ///< per shape group, its ops not planned yet
  std::vector<std::optional<std::uint64_t>> least_support_of_group_;  ///< the least support an op of it added
  std::uint64_t repeated_before_ = 0;                                 ///< repeated_support_ before the op being planned
  std::vector<std::uint32_t> unfit_ops_;                              ///< ops no plan fitted (unfit_ops())
  std::vector<std::uint64_t> support_bytes_;  ///< per tile: code, vertex states, descriptors planned so far
  std::vector<std::uint32_t> codelets_run_;   ///< per tile: a bit per codelet whose code it holds
  std::vector<std::uint32_t> buffer_op_;      ///< per program buffer: the op whose fragment made it
  std::map<std::uint32_t, std::pair<std::string, OpPin>> pins_;  ///< op index -> (name used, pin)
  struct KnownCost {
    CostEstimate estimate;
    std::uint64_t host_input_cycles = 0;
  };
  std::map<std::vector<std::uint64_t>, KnownCost> estimates_;  ///< by fragment signature
  std::mutex estimates_mutex_;
  std::vector<std::unique_ptr<CostModel>> worker_models_;  ///< workers 1.. when the core can make them
  unsigned cost_threads_ = 1;  ///< workers that cost candidates: each with a cost model of its own
};

/// Where a planned program overflows tile memory even if place-storage packed it perfectly.
struct Overflow {
  std::uint32_t tiles = 0;       ///< tiles whose live bytes at their peaks exceed the regions
  std::set<std::uint32_t> ops;   ///< the ops whose buffers are live where each tile is most over
  std::uint64_t most_bytes = 0;  ///< the most bytes a tile is over by
};

/// Sweeps each tile's buffers over the program's supersteps: where the standard region's live
/// bytes exceed it (less the support memory place-storage reserves at its top) by more than the
/// interleaved region has free then, place-storage could not move the excess there, so the
/// tile is over and the ops live where it is most over are named. The same capacities as
/// peak_if_fits: a stricter guard re-plans programs whose ops all fitted.
Overflow live_overflow(const Program& program, const Target& target, const std::vector<std::uint64_t>& support,
                       const std::vector<std::uint32_t>& buffer_op) {
  std::vector<std::vector<std::uint32_t>> members(std::size_t{target.tiles} * 2);
  for (std::uint32_t i = 0; i < program.buffers.size(); ++i) {
    const Buffer& buffer = program.buffers[i];
    members[std::size_t{buffer.tile} * 2 + (buffer.region == Region::interleaved)].push_back(i);
  }
  Overflow overflow;
  struct Change {
    std::uint64_t superstep;
    std::int64_t standard, interleaved;  ///< bytes coming live (negative: freed)
    auto operator<=>(const Change&) const = default;
  };
  std::vector<Change> changes;  // frees first within a superstep
  const std::uint64_t interleaved_capacity = target.memory_bytes - target.interleaved_start;
  for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
    const std::uint64_t standard_capacity =
        target.interleaved_start - std::min(support[tile], std::uint64_t{target.interleaved_start});
    changes.clear();
    for (const bool interleaved : {false, true})
      for (std::uint32_t index : members[std::size_t{tile} * 2 + interleaved]) {
        const Buffer& buffer = program.buffers[index];
        const auto bytes = static_cast<std::int64_t>(aligned_bytes(buffer));
        changes.push_back({buffer.first_use, interleaved ? 0 : bytes, interleaved ? bytes : 0});
        changes.push_back({std::uint64_t{buffer.last_use} + 1, interleaved ? 0 : -bytes, interleaved ? -bytes : 0});
      }
    std::sort(changes.begin(), changes.end());
    // Over where the interleaved region overflows, or the standard region's excess (which
    // place-storage moves to the interleaved region) exceeds what that region has free.
    std::int64_t standard = 0, interleaved = 0;
    std::optional<std::uint64_t> over_at;  // the superstep where the tile is most over
    std::uint64_t most_over = 0;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      standard += changes[i].standard;
      interleaved += changes[i].interleaved;
      if (i + 1 < changes.size() && changes[i + 1].superstep == changes[i].superstep) continue;
      const auto live_standard = static_cast<std::uint64_t>(standard);
      const auto live_interleaved = static_cast<std::uint64_t>(interleaved);
      const std::uint64_t spilled = live_standard - std::min(live_standard, standard_capacity);
      const std::uint64_t needed = live_interleaved + spilled;
      if (needed > interleaved_capacity && needed - interleaved_capacity > most_over) {
        most_over = needed - interleaved_capacity;
        over_at = changes[i].superstep;
      }
    }
    overflow.most_bytes = std::max(overflow.most_bytes, most_over);
    if (!over_at) continue;
    ++overflow.tiles;
    for (const bool interleaved : {false, true})
      for (std::uint32_t index : members[std::size_t{tile} * 2 + interleaved]) {
        const Buffer& buffer = program.buffers[index];
        if (buffer.first_use <= *over_at && *over_at <= buffer.last_use && index < buffer_op.size())
          overflow.ops.insert(buffer_op[index]);
      }
  }
  return overflow;
}

}  // namespace

Status plan_program(const Graph& graph, const Graph& model, PassContext& context, const PlannerOptions& options,
                    Program& program, PackageEstimates& estimates) {
  program = Program{};
  // A model no placement could hold is refused in milliseconds, not after planning it.
  if (Status status = check_capacity(graph, context.target, context); !status.ok) return status;
  auto planner = std::make_unique<Planner>(graph, context, options, program);
  if (Status status = planner->plan(model); !status.ok) return status;
  // Weights held once per row group are worth it only with room to spare. When they left a
  // later op no plan, plan again with at most half the row groups everywhere (ops pinned
  // otherwise keep their pins), or one if this was a re-plan already. When some tile
  // overflows at a superstep, plan again with half the row groups for the ops live there.
  bool replanned = false;
  for (PlannerOptions capped = options; options.row_groups == 0; replanned = true) {
    // A pass stopped where support memory outgrew the standard region counts as starved there.
    const auto starved = planner->support_over_op() ? planner->support_over_op() : planner->starved_op();
    const std::uint32_t most = planner->most_row_groups();
    const Overflow overflow =
        most > 1 && !starved ? live_overflow(program, context.target, planner->support_bytes(), planner->buffer_op())
                             : Overflow{};
    std::vector<std::uint32_t> capped_ops;
    if (starved) {
      // Halve the cap each time, not the most row groups seen: an op pinned to more keeps them,
      // and would otherwise hold the cap where it is, planning again forever. Starved in a
      // re-plan: memory is that short, so one row group at once (each pass plans everything).
      const std::uint32_t cap = capped.max_row_groups ? std::min(capped.max_row_groups, most) : most;
      capped.max_row_groups = replanned || planner->support_over_op() ? 1 : std::max(1u, cap / 2);
    } else if (overflow.tiles > 0) {
      for (std::uint32_t op : overflow.ops) {
        const auto selected = planner->selected_row_groups().find(op);
        if (selected == planner->selected_row_groups().end() || selected->second <= 1) continue;
        const auto known = capped.row_group_caps.find(op);
        const std::uint32_t cap =
            known == capped.row_group_caps.end() ? selected->second : std::min(known->second, selected->second);
        if (cap <= 1) continue;  // pinned above its cap: nothing left to halve
        capped.row_group_caps[op] = cap / 2;
        capped_ops.push_back(op);
      }
      if (capped_ops.empty()) break;
    } else {
      break;
    }
    context.info(
        "re-planning with fewer row groups max_row_groups={} starved_op={} tiles_over_at_peak={} most_bytes_over={} "
        "capped_ops={}",
        capped.max_row_groups, starved ? fmt::format("{}", *starved) : "none", overflow.tiles, overflow.most_bytes,
        capped_ops.empty() ? "all" : fmt::format("{}", fmt::join(capped_ops, ",")));
    program = Program{};
    planner = std::make_unique<Planner>(graph, context, capped, program);
    if (Status status = planner->plan(model); !status.ok) return status;
    if (starved && capped.max_row_groups == 1) break;
  }
  // Only the final pass's (an earlier pass's unfit ops may have fitted when planned again),
  // and no warning: this check treats all resident bytes as live at once, so place-storage
  // often fits these plans, and when it does not, its refusal names the tiles and buffers.
  if (const std::vector<std::uint32_t>& unfit = planner->unfit_ops(); !unfit.empty())
    context.info(
        "planned with their smallest plans ops={} count={}: no plan fitted beside every resident byte; "
        "place-storage checks them with buffers' live ranges",
        fmt::join(unfit, ","), unfit.size());
  const CostEstimate total = context.cost_model.estimate(program, context.target);
  estimates.estimated_cycles = total.total();
  estimates.estimated_exchange_cycles = total.exchange_cycles;
  std::size_t copies = 0;
  for (const Superstep& step : program.supersteps) copies += step.copies.size();
  context.info(
      "planned program supersteps={} buffers={} copies={} streams={} estimated_cycles={} "
      "estimated_exchange_cycles={} estimated_compute_cycles={}",
      program.supersteps.size(), program.buffers.size(), copies, program.streams.size(), estimates.estimated_cycles,
      estimates.estimated_exchange_cycles, total.compute_cycles);
  return Status::success();
}

}  // namespace tessera::select_finalist
