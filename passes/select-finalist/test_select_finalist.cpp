// Tests of the select-finalist planner plugin, loaded through the real PluginHost.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <map>
#include <set>

#include "pass_bench.hpp"
#include "tessera/lowering.hpp"
#include "tessera/pass_manager.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::config_path;
using tessera::testing::log_field;
using tessera::testing::PassBench;
using tessera::testing::TempDir;

namespace {

/// Checks that every element of each weight tensor is written by weight stream slices
/// exactly once per row group of the dense op that reads it (from its `selected operator
/// plan` line; a bias once per depth group too when they own rows; evenly for any other
/// weight) and returns those counts by tensor name.
std::map<std::string, int> check_weights_covered(const PassBench& bench) {
  std::map<std::string, int> expected;
  for (const std::string& line : bench.log_lines("selected operator plan op=")) {
    const Op& op = bench.state.graph.ops.at(log_field(line, "op"));
    const int row_groups = int(log_field(line, "row_groups"));
    const bool owns_rows = line.find(" reduce_scatter=rows") != std::string::npos;
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      expected[bench.state.graph.tensors.at(op.inputs[i]).name] =
          i == 2 && owns_rows ? row_groups * int(log_field(line, "depth_groups")) : row_groups;
  }
  std::map<std::string, int> copies;
  for (const Tensor& tensor : bench.state.model.tensors) {
    if (tensor.kind != TensorKind::weight) continue;
    std::vector<int> covered(static_cast<std::size_t>(tensor.elements()), 0);
    for (const HostStream& stream : bench.state.program.streams) {
      if (stream.tensor != tensor.name) continue;
      CHECK(stream.kind == StreamKind::weight);
      CHECK(stream.rows == tensor.rows());
      CHECK(stream.cols == tensor.cols());
      for (const HostSlice& slice : stream.slices)
        for (std::uint32_t r = 0; r < slice.rows; ++r)
          for (std::uint32_t c = 0; c < slice.cols; ++c)
            ++covered.at(std::size_t(slice.row_begin + r) * stream.cols + slice.col_begin + c);
    }
    INFO("weight " << tensor.name);
    // A weight an elementwise op reads is written per piece of its other operand: evenly.
    const int times = expected.count(tensor.name) ? expected.at(tensor.name) : covered.front();
    CHECK(times >= 1);
    CHECK(std::all_of(covered.begin(), covered.end(), [&](int n) { return n == times; }));
    copies[tensor.name] = covered.front();
  }
  return copies;
}

/// What every planned program must be: valid for its target, each weight element written
/// once per row group (counts returned per tensor), and the outputs of its package on the simulator
/// within the run's tolerances of the float64 reference.
std::map<std::string, int> check_planned_program(PassBench& bench) {
  REQUIRE(verify_program(bench.state.program, bench.state.target) == "");
  std::map<std::string, int> copies = check_weights_covered(bench);
  CHECK(bench.simulate().passed);
  return copies;
}

/// Three rows, a deep, uneven reduction (k = 70) into 5 columns with a float32 bias, then
/// 5 into 9 without one: depth splits leave reduce-scatter pieces empty and chunks uneven.
std::string deep_model(const TempDir& dir) {
  return dir.write("deep.yaml",
                   "model: deep\nseed: 11\ntensors:\n"
                   "  - {name: x, shape: [3, 70], kind: input}\n"
                   "  - {name: w0, shape: [70, 5], kind: weight, scale: 0.3}\n"
                   "  - {name: b0, shape: [5], kind: weight}\n"
                   "  - {name: w1, shape: [5, 9], kind: weight}\n"
                   "ops:\n"
                   "  - {op: matmul, inputs: [x, w0], output: h}\n"
                   "  - {op: add, inputs: [h, b0], output: a}\n"
                   "  - {op: relu, inputs: [a], output: y}\n"
                   "  - {op: matmul, inputs: [y, w1], output: z}\n"
                   "outputs: [z]\n");
}

/// `layers` dense layers of width 64 with a bias and ReLU, batch 4: one shape, repeated.
std::string deep_mlp(const TempDir& dir, int layers) {
  std::string tensors = "  - {name: x, shape: [4, 64], kind: input}\n", ops, previous = "x";
  for (int i = 0; i < layers; ++i) {
    tensors += fmt::format(
        "  - {{name: w{0}, shape: [64, 64], kind: weight, scale: 0.125}}\n"
        "  - {{name: b{0}, shape: [64], kind: weight}}\n",
        i);
    ops += fmt::format(
        "  - {{op: matmul, inputs: [{1}, w{0}], output: h{0}}}\n"
        "  - {{op: add, inputs: [h{0}, b{0}], output: a{0}}}\n"
        "  - {{op: relu, inputs: [a{0}], output: y{0}}}\n",
        i, previous);
    previous = fmt::format("y{}", i);
  }
  return dir.write(fmt::format("mlp-{}.yaml", layers),
                   "model: deep-mlp\nseed: 3\ntensors:\n" + tensors + "ops:\n" + ops + "outputs: [" + previous + "]\n");
}

std::string model_file(const TempDir& dir, const std::string& ops, const std::string& outputs) {
  return dir.write("m.yaml",
                   "model: m\nseed: 5\ntensors:\n"
                   "  - {name: x, shape: [3, 40], kind: input}\n"
                   "  - {name: w, shape: [40, 24], kind: weight, scale: 0.2}\n"
                   "  - {name: b, shape: [24], kind: weight}\n"
                   "  - {name: c, shape: [3, 24], kind: weight}\n"
                   "ops:\n" +
                       ops + "outputs: " + outputs + "\n");
}

}  // namespace

TEST_CASE("select-finalist plans mlp-small on t16 into a verified program", "[select-finalist]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  const Program& program = bench.state.program;
  CHECK(verify_program(program, bench.state.target) == "");
  CHECK(bench.state.facts.count(facts::plan) == 1);
  REQUIRE_FALSE(program.supersteps.empty());
  for (const Superstep& step : program.supersteps) CHECK_FALSE(step.label.empty());
  CHECK(program.supersteps.front().label.rfind("dense0.", 0) == 0);
  CHECK(bench.state.estimates.estimated_cycles > 0);

  // Two finalists and one selection per dense op, with the figures a script parses.
  CHECK(bench.log_lines("retained operator-plan finalist op=0 ").size() == 2);
  CHECK(bench.log_lines("retained operator-plan finalist op=1 ").size() == 2);
  const auto selected = bench.log_lines("selected operator plan");
  REQUIRE(selected.size() == 2);
  for (const std::string& line : selected) {
    const std::uint64_t columns = log_field(line, "column_groups"), depth = log_field(line, "depth_groups");
    CHECK(columns * depth <= bench.state.target.tiles);
    CHECK(log_field(line, "estimated_cycles") > 0);
  }
  for (const std::string& line : bench.log_lines("retained operator-plan finalist"))
    CHECK(log_field(line, "peak_tile_bytes") <= bench.state.target.memory_bytes);
}

TEST_CASE("select-finalist writes every weight element once per row group", "[select-finalist]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  check_weights_covered(bench);
  // Weights are written once at initialize and must survive every run: never shared.
  for (const Buffer& buffer : bench.state.program.buffers)
    if (buffer.name.find(".w") != std::string::npos) {
      CHECK(buffer.first_use == 0);
      CHECK(buffer.last_use == bench.state.program.supersteps.size() - 1);
      // Standard data, which place-storage moves to the interleaved region when need be.
      CHECK(buffer.region == Region::standard);
      CHECK(buffer.alignment >= 16);
    }
}

TEST_CASE("select-finalist plans compute the model's outputs", "[select-finalist]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  CHECK(bench.simulate().passed);
}

TEST_CASE("select-finalist plans every split of a dense op correctly", "[select-finalist]") {
  TempDir dir;
  // A deep, uneven reduction (k = 70) into few columns (5, then 9 without bias): depth
  // splits leave some reduce-scatter pieces empty, and chunks differ in size.
  const std::string model = deep_model(dir);
  std::set<std::string> sources;
  std::set<std::pair<std::uint64_t, std::uint64_t>> splits;
  // A slow host link makes replicated input slices expensive, so host_scatter wins too.
  for (double host_bytes_per_cycle : {16.0, 0.05})
    for (std::int64_t columns : {0, 1, 2, 3, 5})
      for (std::int64_t depth : {0, 1, 2, 3, 4, 7, 16}) {
        PassBench bench(model, config_path("targets/t16.yaml"));
        bench.state.target.host_bytes_per_cycle = host_bytes_per_cycle;
        INFO("column_groups " << columns << " depth_groups " << depth << " host " << host_bytes_per_cycle);
        REQUIRE(bench.run("lower-mid").ok);
        Options options;
        options.values["column_groups"] = columns;
        options.values["depth_groups"] = depth;
        REQUIRE(bench.run("select-finalist", options).ok);
        check_planned_program(bench);
        for (const std::string& line : bench.log_lines("selected operator plan")) {
          splits.emplace(log_field(line, "column_groups"), log_field(line, "depth_groups"));
          sources.insert(line.substr(line.find(" input=") + 7,
                                     line.find(' ', line.find(" input=") + 1) - line.find(" input=") - 7));
          if (columns != 0) CHECK(log_field(line, "column_groups") <= std::uint64_t(columns));
        }
      }
  CHECK(splits.size() >= 15);
  CHECK(splits.count({1, 16}) == 1);  // 16 depth groups over 5 columns: 11 empty pieces
  CHECK(sources == std::set<std::string>{"distributed", "host_scatter", "host_slices"});
}

TEST_CASE("select-finalist honours its options", "[select-finalist]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  Options options;
  options.values["finalists"] = std::int64_t{1};
  options.values["max_candidates"] = std::int64_t{3};
  REQUIRE(bench.run("select-finalist", options).ok);
  CHECK(bench.log_lines("retained operator-plan finalist op=0 ").size() == 1);
  const auto screened = bench.log_lines("screened operator plans op=0 ");
  REQUIRE(screened.size() == 1);
  CHECK(log_field(screened[0], "screened") == 3);
  CHECK(log_field(screened[0], "costed") <= 3);

  options.values["finalists"] = std::int64_t{0};
  CHECK_THROWS_WITH(bench.run("select-finalist", options), Catch::Contains("finalists"));
}

TEST_CASE("select-finalist plans the same program and log with any thread count", "[select-finalist]") {
  auto plan = [](unsigned threads, bool isolate_cost_model) {
    PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
    bench.threads = threads;
    bench.isolate_cost_model = isolate_cost_model;
    Options options;
    options.values["finalists"] = std::int64_t{3};
    options.values["costed_candidates"] = std::int64_t{5};
    options.values["mapping_candidates"] = std::int64_t{4};
    REQUIRE(bench.run("lower-mid").ok);
    REQUIRE(bench.run("select-finalist", options).ok);
    CHECK(verify_program(bench.state.program, bench.state.target) == "");
    std::string pass_log;  // the pass's lines: the pass manager's carry wall times
    for (const std::string& line : bench.log_lines("select_finalist"))
      if (line.find("package build phase finished") == std::string::npos) pass_log += line + "\n";
    return std::pair(dump_state(bench.state), pass_log);
  };
  const auto [serial_dump, serial_log] = plan(1, false);
  CHECK(serial_log.find("retained operator-plan finalist op=0 finalist=2 ") != std::string::npos);
  // An isolated cost model cannot be copied for the workers (no PassContext::new_cost_model).
  for (const auto& [threads, isolated] : {std::pair(2u, false), std::pair(3u, false), std::pair(2u, true)}) {
    INFO("threads=" << threads << " isolated cost model=" << isolated);
    const auto [dump, log] = plan(threads, isolated);
    CHECK(dump == serial_dump);
    CHECK(log == serial_log);  // lines made by workers are written in a fixed order
  }
}

TEST_CASE("select-finalist re-costs finalists with the scheduler when asked", "[select-finalist]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  Options options;
  options.values["schedule_finalists"] = true;
  REQUIRE(bench.run("select-finalist", options).ok);
  std::size_t with_exchange = 0;
  for (const std::string& line : bench.log_lines("retained operator-plan finalist")) {
    // A scheduled phase costs its overhead at least (a plan may have no exchange at all);
    // compute and barriers come on top.
    const std::uint64_t exchange = log_field(line, "refined_exchange_cycles");
    CHECK((exchange == 0 || exchange >= bench.state.target.exchange_phase_overhead));
    with_exchange += exchange > 0;
    CHECK(log_field(line, "refined_cycles") > exchange);
  }
  CHECK(with_exchange > 0);  // the second layer gathers its input from the first
  // Each finalist's analytical figures beside the scheduled ones, as the reference log has them.
  const auto retained = bench.log_lines("retained operator-plan finalist");
  const auto scheduled = bench.log_lines("scheduled operator-plan finalist");
  REQUIRE(scheduled.size() == retained.size());
  for (std::size_t i = 0; i < scheduled.size(); ++i) {
    CHECK(log_field(scheduled[i], "scheduled_exchange_cycles") == log_field(retained[i], "refined_exchange_cycles"));
    CHECK(log_field(scheduled[i], "refined_cycles") == log_field(retained[i], "refined_cycles"));
    CHECK(log_field(scheduled[i], "analytical_exchange_cycles") == log_field(retained[i], "estimated_exchange_cycles"));
    CHECK(log_field(scheduled[i], "analytical_cycles") ==
          log_field(retained[i], "estimated_cycles") + log_field(retained[i], "host_input_cycles"));
    // Region peaks are parts of the busiest tile's total.
    CHECK(log_field(retained[i], "peak_standard_bytes") + log_field(retained[i], "peak_interleaved_bytes") >=
          log_field(retained[i], "peak_tile_bytes"));
    CHECK(log_field(retained[i], "peak_interleaved_bytes") > 0);
  }
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
}

TEST_CASE("select-finalist serial splits write every weight element once per row group and verify",
          "[select-finalist][serial]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  Options options;
  options.values["column_groups"] = std::int64_t{2};
  options.values["depth_groups"] = std::int64_t{4};
  options.values["serial_splits"] = std::int64_t{3};
  REQUIRE(bench.run("select-finalist", options).ok);
  check_planned_program(bench);
  const auto selected = bench.log_lines("selected operator plan");
  REQUIRE(selected.size() == 2);
  for (const std::string& line : selected) {
    CHECK(log_field(line, "depth_groups") == 4);
    CHECK(log_field(line, "serial_splits") == 3);
  }
  // Per op: three matmul supersteps, the later two beside the previous slice's reduction,
  // then the last slice's reduction (the next op's gather joins it).
  std::string labels;
  for (const Superstep& step : bench.state.program.supersteps) labels += step.label + " ";
  for (const std::string op : {"dense0", "dense1"})
    CHECK_THAT(labels, Catch::Contains(op + ".matmul0 " + op + ".reduce0+matmul1 " + op + ".reduce1+matmul2 " + op +
                                       ".reduce2"));
}

TEST_CASE("select-finalist reduce-scatters whole rows when every depth group can own some, one copy a sender",
          "[select-finalist][serial]") {
  TempDir dir;
  // 12 rows, k = 64 in 4 depth groups, 10 columns (float32 bias: reduce_bias), with and
  // without serial slices; 3 rows are fewer than the depth groups: column pieces, a copy a row.
  for (std::int64_t rows : {12, 3})
    for (std::int64_t slices : {1, 2}) {
      const std::string model =
          dir.write("rows.yaml", fmt::format("model: rows\nseed: 3\ntensors:\n"
                                             "  - {{name: x, shape: [{}, 64], kind: input}}\n"
                                             "  - {{name: w, shape: [64, 10], kind: weight, scale: 0.2}}\n"
                                             "  - {{name: b, shape: [10], kind: weight}}\n"
                                             "ops:\n"
                                             "  - {{op: matmul, inputs: [x, w], output: h}}\n"
                                             "  - {{op: add, inputs: [h, b], output: a}}\n"
                                             "  - {{op: relu, inputs: [a], output: y}}\n"
                                             "outputs: [y]\n",
                                             rows));
      PassBench bench(model, config_path("targets/t16.yaml"));
      INFO("rows " << rows << " serial_splits " << slices);
      REQUIRE(bench.run("lower-mid").ok);
      Options options;
      options.values["column_groups"] = std::int64_t{1};
      options.values["depth_groups"] = std::int64_t{4};
      options.values["row_groups"] = std::int64_t{1};
      options.values["serial_splits"] = slices;
      REQUIRE(bench.run("select-finalist", options).ok);
      check_planned_program(bench);
      const auto selected = bench.log_lines("selected operator plan");
      REQUIRE(selected.size() == 1);
      const bool by_rows = rows >= 4;
      CHECK_THAT(selected[0], Catch::EndsWith(by_rows ? "reduce_scatter=rows" : "reduce_scatter=columns"));
      // Each slice's reduce-scatter: every depth group sends its part to the 3 other owners
      // (the owner's own partial stays in place for reduce_bias): a copy each by rows, a copy
      // per row by columns.
      std::size_t copies = 0;  // a slice's reduce-scatter is its matmul superstep's exchange
      for (const Superstep& step : bench.state.program.supersteps)
        if (step.label.find("matmul") != std::string::npos) copies += step.copies.size();
      CHECK(copies == std::size_t(slices) * 4 * 3 * (by_rows ? 1 : std::size_t(rows)));
    }
}

TEST_CASE("select-finalist two-stage reductions compute the outputs for every block count",
          "[select-finalist][two-stage]") {
  TempDir dir;
  // k = 70 into 5 columns (float32 bias: reduce_bias in stage two) and 5 into 9 without a
  // bias (reduce_add): uneven blocks, stage pieces narrower than the blocks, empty pieces.
  const std::string model = deep_model(dir);
  std::set<std::uint64_t> blocks_used;
  for (std::int64_t columns : {1, 2, 3})
    for (std::int64_t depth : {4, 5, 7, 16})
      for (std::int64_t blocks : {2, 3, 8}) {
        PassBench bench(model, config_path("targets/t16.yaml"));
        INFO("column_groups " << columns << " depth_groups " << depth << " reduction_blocks " << blocks);
        REQUIRE(bench.run("lower-mid").ok);
        Options options;
        options.values["column_groups"] = columns;
        options.values["depth_groups"] = depth;
        options.values["reduction_blocks"] = blocks;
        REQUIRE(bench.run("select-finalist", options).ok);
        check_planned_program(bench);
        for (const std::string& line : bench.log_lines("selected operator plan")) {
          const std::uint64_t used_depth = log_field(line, "depth_groups"), used = log_field(line, "reduction_blocks");
          // Clamped to depth_groups / 2 (every block two depth groups or more); one stage below 4.
          CHECK(used == (used_depth < 4 ? 1 : std::min<std::uint64_t>(blocks, used_depth / 2)));
          blocks_used.insert(used);
        }
        std::string labels;
        for (const Superstep& step : bench.state.program.supersteps) labels += step.label + " ";
        CHECK_THAT(labels, Catch::Contains("dense0.matmul dense0.reduce.stage1 dense0.reduce.stage2"));
      }
  // 4: 8 blocks pinned on 8 depth groups (two columns on 16 tiles) clamp to 8 / 2.
  CHECK(blocks_used == std::set<std::uint64_t>{2, 3, 4, 8});
}

TEST_CASE("select-finalist row groups hold the weights once per row group and compute the outputs",
          "[select-finalist][rows]") {
  TempDir dir;
  // Three rows: two row groups split them unevenly (2 + 1), three give each group one row.
  const std::string model = deep_model(dir);
  for (std::int64_t rows : {2, 3})
    for (auto [columns, depth] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {2, 2}, {1, 5}})
      for (const char* extra : {"", "serial_splits", "reduction_blocks"}) {
        PassBench bench(model, config_path("targets/t16.yaml"));
        INFO("row_groups " << rows << " column_groups " << columns << " depth_groups " << depth << " " << extra);
        REQUIRE(bench.run("lower-mid").ok);
        Options options;
        options.values["row_groups"] = rows;
        options.values["column_groups"] = columns;
        options.values["depth_groups"] = depth;
        if (*extra) options.values[extra] = std::int64_t{2};
        REQUIRE(bench.run("select-finalist", options).ok);
        const std::map<std::string, int> copies = check_planned_program(bench);
        const auto selected = bench.log_lines("selected operator plan");
        REQUIRE(selected.size() == 2);
        CHECK(log_field(selected[0], "row_groups") == std::uint64_t(rows));
        CHECK(log_field(selected[1], "row_groups") == std::uint64_t(rows));
        CHECK(copies.at("w0") == rows);
        CHECK(copies.at("w1") == rows);
      }
}

/// x [m, k] into n columns with a bias and relu, then n into `out` with a bias, weights and biases
/// of `dtype` (a float32 bias is fused into the reduction, reduce_bias; a float16 one is added
/// after it, reduce_add then bias_add_half). The second op gathers x from the first's pieces.
std::string two_layer_model(const TempDir& dir, int m, int k, int n, int out, const char* dtype = "float32") {
  return dir.write(fmt::format("two-layer-{}-{}.yaml", m, dtype),
                   fmt::format("model: two_layer\nseed: 5\ntensors:\n"
                               "  - {{name: x, shape: [{0}, {1}], kind: input}}\n"
                               "  - {{name: w0, shape: [{1}, {2}], dtype: {4}, kind: weight, scale: 0.1}}\n"
                               "  - {{name: b0, shape: [{2}], dtype: {4}, kind: weight}}\n"
                               "  - {{name: w1, shape: [{2}, {3}], dtype: {4}, kind: weight, scale: 0.1}}\n"
                               "  - {{name: b1, shape: [{3}], dtype: {4}, kind: weight}}\n"
                               "ops:\n"
                               "  - {{op: matmul, inputs: [x, w0], output: h}}\n"
                               "  - {{op: add, inputs: [h, b0], output: a}}\n"
                               "  - {{op: relu, inputs: [a], output: r}}\n"
                               "  - {{op: matmul, inputs: [r, w1], output: z}}\n"
                               "  - {{op: add, inputs: [z, b1], output: y}}\n"
                               "outputs: [y]\n",
                               m, k, n, out, dtype));
}

TEST_CASE("select-finalist serial row splits multiply the batch in chunks on shared buffers and compute the outputs",
          "[select-finalist][serial-rows]") {
  TempDir dir;
  // 13 rows: uneven chunks; k = 64 into 10, then 10 into 9. Float32 biases go through the fused
  // reduction; float16 ones through the epilogue (each chunk's, the bias written once).
  for (const char* dtype : {"float32", "float16"})
    for (std::int64_t chunks : {2, 3, 5})
      for (std::int64_t rows : {1, 2})
        for (auto [columns, depth] : {std::pair<std::int64_t, std::int64_t>{1, 4}, {2, 2}, {2, 4}}) {
          if (dtype == std::string("float16") && chunks != 3) continue;  // the epilogue's path, once per split
          const std::string model = two_layer_model(dir, 13, 64, 10, 9, dtype);
          PassBench bench(model, config_path("targets/t16.yaml"));
          INFO(dtype << " serial_row_splits " << chunks << " row_groups " << rows << " column_groups " << columns
                     << " depth_groups " << depth);
          REQUIRE(bench.run("lower-mid").ok);
          Options options;
          options.values["serial_row_splits"] = chunks;
          options.values["row_groups"] = rows;
          options.values["column_groups"] = columns;
          options.values["depth_groups"] = depth;
          REQUIRE(bench.run("select-finalist", options).ok);
          // Valid, numerically right, and every weight and bias element written once per row group
          // (per depth group too for an owner's bias): the chunks share them.
          const std::map<std::string, int> copies = check_planned_program(bench);
          CHECK(copies.at("w0") == rows);
          CHECK(copies.at("w1") == rows);
          const auto selected = bench.log_lines("selected operator plan");
          REQUIRE(selected.size() == 2);
          // The second op gathers its x from the first's pieces, so it can always chunk; the first
          // may take its x from host slices, which cannot.
          const std::uint64_t second = log_field(selected[1], "serial_row_splits");
          CHECK(second == std::uint64_t(chunks));
          CHECK((log_field(selected[0], "serial_row_splits") == 1 ||
                 log_field(selected[0], "serial_row_splits") == std::uint64_t(chunks)));
          // Chunk after chunk, each gathering beside the last one's reduction (the first chunk's
          // gather joins the first op's reduction).
          std::string labels;
          for (const Superstep& step : bench.state.program.supersteps) labels += step.label + " ";
          std::string expected = "dense0.reduce dense1.matmul0 ";
          for (std::int64_t c = 1; c < chunks; ++c)
            expected += fmt::format("dense1.reduce{}+gather{} dense1.matmul{} ", c - 1, c, c);
          CHECK_THAT(labels, Catch::Contains(expected + fmt::format("dense1.reduce{}", chunks - 1)));
          // One x chunk and partial per group, sized for the largest chunk (13 rows in `chunks`).
          const std::uint64_t largest_chunk = (13 + chunks - 1) / chunks;
          const std::uint64_t group_rows = (largest_chunk + rows - 1) / rows, deepest = (10 + depth - 1) / depth;
          std::uint64_t x_words = 0;
          for (const Buffer& buffer : bench.state.program.buffers)
            if (buffer.name == "dense1.x") x_words = std::max<std::uint64_t>(x_words, buffer.bytes / 4);
          CHECK(x_words == group_rows * deepest);
        }
}

TEST_CASE("select-finalist splits a batch whose activations fit no other plan into serial row chunks",
          "[select-finalist][serial-rows]") {
  TempDir dir;
  // 512 rows of 128 into 128 and again: 256 KiB of x, 256 KiB of activations after the first
  // op, on 16 tiles of 128 KiB each, where the second op fits no plan without serial row chunks
  // (they are screened only when nothing else fits).
  const std::string model = two_layer_model(dir, 512, 128, 128, 128);
  PassBench bench(model, config_path("targets/t16.yaml"));
  bench.state.target.memory_bytes = 128 * 1024;
  bench.state.target.interleaved_start = 64 * 1024;
  const Status status = bench.run_through("select-finalist");
  INFO(status.message);
  REQUIRE(status.ok);
  check_planned_program(bench);
  std::uint64_t most = 0;
  for (const std::string& line : bench.log_lines("selected operator plan"))
    most = std::max(most, log_field(line, "serial_row_splits"));
  CHECK(most > 1);
  CHECK(bench.log_lines("no operator plan fits").empty());
}

TEST_CASE("select-finalist plans unfused add and relu on their input's distribution", "[select-finalist]") {
  TempDir dir;
  // h has three readers, so nothing fuses: add of a row vector, relu, an add of two
  // activations on the same pieces, and an add of a full weight matrix.
  const std::string model = model_file(dir,
                                       "  - {op: matmul, inputs: [x, w], output: h}\n"
                                       "  - {op: add, inputs: [h, b], output: a}\n"
                                       "  - {op: relu, inputs: [h], output: r}\n"
                                       "  - {op: add, inputs: [a, r], output: s}\n"
                                       "  - {op: add, inputs: [h, c], output: t}\n"
                                       "  - {op: relu, inputs: [t], output: u}\n",
                                       "[s, u, h]");
  PassBench bench(model, config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  REQUIRE(bench.state.graph.ops.size() == 6);
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
  check_weights_covered(bench);
  CHECK(bench.simulate().passed);
  // u = relu(t) is t's only reader and t is no output: it runs in place.
  CHECK(bench.log_lines("planned elementwise op op=5 kind=relu in_place=true").size() == 1);
  CHECK(bench.log_lines("planned elementwise op op=2 kind=relu in_place=false").size() == 1);
}

TEST_CASE("select-finalist runs an elementwise op on a weight beside the weight's rows, never over them",
          "[select-finalist]") {
  // As an imported model's constant output is copied out (docs/onnx.md): the weight must hold
  // its values for the next run, so the result goes to buffers of its own.
  TempDir dir;
  const std::string model = model_file(dir, "  - {op: relu, inputs: [c], output: d}\n", "[d]");
  PassBench bench(model, config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
  const Program& program = bench.state.program;
  std::set<std::uint32_t> weight_buffers;
  for (const HostStream& stream : program.streams)
    if (stream.tensor == "c")
      for (const HostSlice& slice : stream.slices) weight_buffers.insert(slice.destination.buffer);
  REQUIRE_FALSE(weight_buffers.empty());
  std::size_t relus = 0;
  for (const Superstep& step : program.supersteps)
    for (const CodeletCall& call : step.compute)
      if (call.codelet == Codelet::relu) {
        ++relus;
        CHECK_FALSE(weight_buffers.count(call.operands.at(0).buffer));  // relu works in place on its operand
      }
  CHECK(relus > 0);
  CHECK(bench.simulate().passed);
}

// ONNX models apply elementwise ops to their inputs directly: the host writes them in row groups.
TEST_CASE("select-finalist plans add and relu of graph inputs over row groups", "[select-finalist]") {
  TempDir dir;
  const std::string model = model_file(dir,
                                       "  - {op: add, inputs: [x, x], output: d}\n"
                                       "  - {op: relu, inputs: [x], output: r}\n"
                                       "  - {op: matmul, inputs: [d, w], output: h}\n",
                                       "[h, r]");
  PassBench bench(model, config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
  CHECK(bench.simulate().passed);
  CHECK(bench.log_lines("selected block plan op=0 kind=add row_groups=3").size() == 1);
  CHECK(bench.log_lines("selected block plan op=1 kind=relu row_groups=3").size() == 1);
}

// Planning speed is measured by make bench / bench-planning, not asserted here.
TEST_CASE("select-finalist plans mlp-b2-n3 on 1472 tiles within memory", "[select-finalist][large]") {
  PassBench bench(config_path("models/mlp-b2-n3.yaml"), config_path("targets/t1472.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  REQUIRE(bench.run("select-finalist").ok);
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
  check_weights_covered(bench);
  for (const std::string& line : bench.log_lines("selected operator plan")) {
    // uses the machine
    CHECK(log_field(line, "row_groups") * log_field(line, "column_groups") * log_field(line, "depth_groups") > 1000);
  }
  for (const std::string& line : bench.log_lines("retained operator-plan finalist"))
    CHECK(log_field(line, "peak_tile_bytes") <= bench.state.target.memory_bytes);
  CHECK(bench.log_lines("no operator plan fits").empty());

  // The host scatters x in depth-group chunks: every receiver of the first gather listens to
  // one sender (many small senders cost a switch and a latency each).
  const auto selected = bench.log_lines("selected operator plan op=0 ");
  REQUIRE(selected.size() == 1);
  REQUIRE(selected[0].find("input=host_scatter") != std::string::npos);
  const Program& program = bench.state.program;
  REQUIRE(program.supersteps.front().label == "dense0.gather");
  std::map<std::uint32_t, std::set<std::uint32_t>> senders;  // by receiving tile
  for (const Copy& copy : program.supersteps.front().copies)
    senders[program.buffers[copy.destination.buffer].tile].insert(program.buffers[copy.source.buffer].tile);
  CHECK(senders.size() > 1000);
  for (const auto& [tile, from] : senders) CHECK(from.size() == 1);
}

TEST_CASE("select-finalist rejects plans whose temporaries exceed the memory budget", "[select-finalist]") {
  auto rejected = [](double proportion) {
    PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
    REQUIRE(bench.run("lower-mid").ok);
    Options options;
    options.values["available_memory_proportion"] = proportion;
    REQUIRE(bench.run("select-finalist", options).ok);
    REQUIRE(verify_program(bench.state.program, bench.state.target) == "");
    CHECK(bench.simulate().passed);
    std::uint64_t count = 0;
    for (const std::string& line : bench.log_lines("screened operator plans"))
      count += log_field(line, "rejected_for_memory");
    return count;
  };
  CHECK(rejected(0.6) == 0);
  // 319 bytes of temporaries per tile: the plans with the widest chunks are refused.
  CHECK(rejected(0.0005) > 0);

  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  Options options;
  options.values["available_memory_proportion"] = 1.5;
  CHECK_THROWS_WITH(bench.run("select-finalist", options), Catch::Contains("available_memory_proportion"));
}

TEST_CASE(
    "select-finalist counts standard data beyond the region against the interleaved room, as place-storage "
    "moves it",
    "[select-finalist]") {
  // A 16 KiB standard region holds the support memory and little else: the plans stay those of
  // the full 256 KiB region (they were slower ones before), and place-storage then fits them.
  auto selected = [](std::uint32_t interleaved_start) {
    PassBench bench(config_path("models/mlp-b16-n8-w256.yaml"), config_path("targets/t16.yaml"));
    bench.state.target.interleaved_start = interleaved_start;
    REQUIRE(bench.run_through("place-storage").ok);
    REQUIRE(verify_program(bench.state.program, bench.state.target) == "");
    CHECK(bench.log_lines("no operator plan fits").empty());
    CHECK(bench.log_lines("re-planning").empty());
    CHECK(bench.simulate().passed);
    return bench.log_lines("selected operator plan");
  };
  const std::vector<std::string> small = selected(16384);
  CHECK(small.size() == 8);
  CHECK(small == selected(262144));
}

TEST_CASE("select-finalist refuses, early, a model whose support memory outgrows the standard region",
          "[select-finalist]") {
  // Support memory: code, vertex states, exchange descriptors, per tile, of a planned program.
  auto support = [](const PassBench& bench) {
    const std::uint32_t tiles = bench.state.target.tiles;
    std::vector<std::uint64_t> bytes = call_support_bytes(bench.state.program, tiles);
    const std::vector<std::uint64_t> descriptors =
        exchange_descriptor_bytes(bench.state.program, tiles, bench.state.target.multicast);
    for (std::uint32_t t = 0; t < tiles; ++t) bytes[t] += descriptors[t];
    return bytes;
  };
  TempDir dir;
  PassBench shallow(deep_mlp(dir, 2), config_path("targets/t16.yaml"));
  REQUIRE(shallow.run_through("select-finalist").ok);
  const std::vector<std::uint64_t> two_layers = support(shallow);
  const std::uint64_t busiest_two = *std::max_element(two_layers.begin(), two_layers.end());
  PassBench deep(deep_mlp(dir, 48), config_path("targets/t16.yaml"));
  REQUIRE(deep.run_through("select-finalist").ok);
  const std::vector<std::uint64_t> all_layers = support(deep);
  std::uint64_t total = 0;
  for (std::uint64_t bytes : all_layers) total += bytes;
  const std::uint64_t mean = total / all_layers.size();
  const std::uint64_t busiest = *std::max_element(all_layers.begin(), all_layers.end());
  INFO("busiest tile after 2 layers " << busiest_two << ", after 48: mean " << mean << ", busiest " << busiest);
  REQUIRE(mean > 3 * busiest_two);

  SECTION("48 layers of one shape, projected past twice the region after a few: refused then") {
    PassBench bench(deep_mlp(dir, 48), config_path("targets/t16.yaml"));
    bench.state.target.interleaved_start = static_cast<std::uint32_t>(busiest_two + 64);
    const Status status = bench.run_through("select-finalist");
    REQUIRE_FALSE(status.ok);
    INFO(status.message);
    CHECK_THAT(status.message, Catch::Contains("mlp-48.yaml:"));
    CHECK_THAT(status.message, Catch::Contains("model does not fit: the "));
    CHECK_THAT(status.message, Catch::Contains("bytes of support memory"));
    CHECK_THAT(status.message, Catch::Contains("fix: "));
    CHECK(bench.log_lines("selected operator plan").size() < 8);
  }
  SECTION("a tile's support past the region: refused where it happens, not after the last op") {
    PassBench bench(deep_mlp(dir, 48), config_path("targets/t16.yaml"));
    // Over half the mean (the projection comes to about the mean); below the busiest tile's.
    const std::uint64_t region = std::max(3 * mean / 4, busiest_two + 64);
    REQUIRE(region < busiest);
    bench.state.target.interleaved_start = static_cast<std::uint32_t>(region);
    const Status status = bench.run_through("select-finalist");
    REQUIRE_FALSE(status.ok);
    INFO(status.message);
    CHECK_THAT(status.message,
               Catch::Contains("more than the " + std::to_string(region) + " bytes of its standard region"));
    CHECK(bench.log_lines("selected operator plan").size() < 48);
  }
}

TEST_CASE("select-finalist screens tile mappings and moves groups off tiles holding their x", "[select-finalist]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  Options options;
  options.values["mapping_candidates"] = std::int64_t{8};
  REQUIRE(bench.run("select-finalist", options).ok);
  REQUIRE(verify_program(bench.state.program, bench.state.target) == "");
  const auto lines = bench.log_lines("screened tile mappings");
  REQUIRE_FALSE(lines.empty());
  for (const std::string& line : lines) {
    CHECK(log_field(line, "candidates") == 8);
    CHECK(log_field(line, "selected") < 8);
  }
  CHECK(bench.simulate().passed);
}

TEST_CASE("select-finalist lays constant weights out as the chosen orientation streams them", "[select-finalist]") {
  TempDir dir;
  const std::string model = deep_model(dir);
  for (const std::string orientation : {"as_is", "swapped", "auto"}) {
    INFO("orientation " << orientation);
    PassBench bench(model, config_path("targets/t16.yaml"));
    REQUIRE(bench.run("lower-mid").ok);
    Options options;
    options.values["orientation"] = orientation;
    REQUIRE(bench.run("select-finalist", options).ok);
    check_planned_program(bench);
    std::size_t matmuls = 0;
    for (const Superstep& step : bench.state.program.supersteps)
      for (const CodeletCall& call : step.compute) {
        if (!is_matmul(call.codelet)) continue;
        ++matmuls;
        const std::uint32_t swapped = static_cast<std::uint32_t>(MatmulOrientation::swapped);
        if (orientation != "auto")
          CHECK((call.params[kMatmulOrientationParam] == swapped) == (orientation == "swapped"));
        // Neither orientation transposes constant weights on the tile.
        CHECK_FALSE(matmul_transposes_b(call.codelet, call.params[kMatmulOrientationParam]));
        const bool n_by_k = matmul_b_is_n_by_k(call.codelet, call.params[kMatmulOrientationParam]);
        // The host writes the call's weight slice in the layout the codelet reads.
        std::size_t slices = 0;
        for (const HostStream& stream : bench.state.program.streams)
          for (const HostSlice& slice : stream.slices)
            if (slice.destination.buffer == call.operands[1].buffer) {
              ++slices;
              CHECK(slice.transposed == n_by_k);
            }
        CHECK(slices == 1);
      }
    CHECK(matmuls > 0);
  }
}

// A gather moves each stretch contiguous in both its source piece and its output piece as one
// copy: a whole row of a row-group piece is one copy, a transposed or strided element one each;
// parts of a graph weight are host slices, not copies.
TEST_CASE("select-finalist plans gathers with one copy per contiguous stretch", "[select-finalist]") {
  TempDir dir;
  // r = relu(x) lies in 3 row pieces of [1, 40]. t = r^T [40, 3]; y = [r | c] [3, 64]; s = r[:, ::2].
  const std::string model = model_file(dir,
                                       "  - {op: relu, inputs: [x], output: r}\n"
                                       "  - {op: gather, inputs: [r], output: t, shape: [40, 3],\n"
                                       "     runs: [[0, 0, 0, 3, 40, 40, 3, 1]]}\n"
                                       "  - {op: gather, inputs: [r, c], output: y, shape: [3, 64],\n"
                                       "     runs: [[0, 0, 0, 40, 1, 3, 64, 40], [40, 1, 0, 24, 1, 3, 64, 24]]}\n"
                                       "  - {op: gather, inputs: [r], output: s, shape: [3, 20],\n"
                                       "     runs: [[0, 0, 0, 20, 2, 3, 20, 40]]}\n",
                                       "[t, y, s]");
  PassBench bench(model, config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  CHECK(bench.log_lines("selected block plan op=0 kind=relu row_groups=3").size() == 1);
  const std::vector<std::string> gathers = bench.log_lines("kind=gather");
  REQUIRE(gathers.size() == 3);
  CHECK(log_field(gathers[0], "copies") == 120);  // every element of the transpose on its own
  CHECK(log_field(gathers[1], "copies") == 3);    // a row of r each; c comes from the host
  CHECK(log_field(gathers[2], "copies") == 60);   // a strided slice: an element each
  std::size_t c_slices = 0;
  for (const HostStream& stream : bench.state.program.streams)
    if (stream.tensor == "c") c_slices += stream.slices.size();
  CHECK(c_slices == 3);  // one row of c for each output row
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
  CHECK(bench.simulate().passed);
}

TEST_CASE("a gather whose runs miss or repeat an output element is refused at load, naming the place",
          "[select-finalist]") {
  TempDir dir;
  const std::string missing = model_file(dir,
                                         "  - {op: gather, inputs: [x], output: t, shape: [3, 40],\n"
                                         "     runs: [[0, 0, 0, 119, 1, 1, 0, 0]]}\n",
                                         "[t]");
  CHECK_THROWS_WITH(load_model(missing), Catch::Contains("m.yaml:9:5") && Catch::Contains("write 119 of the 120"));
  const std::string outside = model_file(dir,
                                         "  - {op: gather, inputs: [x], output: t, shape: [3, 40],\n"
                                         "     runs: [[0, 0, 1, 120, 1, 1, 0, 0]]}\n",
                                         "[t]");
  CHECK_THROWS_WITH(load_model(outside), Catch::Contains("reads outside input 'x' of 120 elements"));
  const std::string twice = model_file(dir,
                                       "  - {op: gather, inputs: [x], output: t, shape: [3, 40],\n"
                                       "     runs: [[0, 0, 0, 60, 1, 1, 0, 0], [59, 0, 0, 60, 1, 1, 0, 0]]}\n",
                                       "[t]");
  CHECK_THROWS_WITH(load_model(twice), Catch::Contains("write output element 59 twice"));
}

namespace {

/// out = table[ids]: a [rows, cols] weight table looked up by `count` int32 ids (a graph input).
Graph embedding_graph(std::int64_t rows, std::int64_t cols, std::int64_t count) {
  Graph g;
  g.name = "lookup";
  g.source_file = "lookup.onnx";
  g.seed = 9;
  auto tensor = [&](const char* name, std::vector<std::int64_t> shape, TensorKind kind, DType dtype) {
    Tensor t;
    t.name = name;
    t.shape = std::move(shape);
    t.kind = kind;
    t.dtype = dtype;
    g.tensors.push_back(std::move(t));
  };
  tensor("table", {rows, cols}, TensorKind::weight, DType::float32);
  tensor("ids", {count}, TensorKind::input, DType::int32);
  tensor("rows", {count, cols}, TensorKind::intermediate, DType::float32);
  Op op;
  op.kind = OpKind::embedding;
  op.inputs = {0, 1};
  op.output = 2;
  g.ops.push_back(op);
  g.outputs = {2};
  REQUIRE(check_graph(g).empty());
  return g;
}

}  // namespace

TEST_CASE("select-finalist spreads an embedding table by columns, by rows too when a column block does not fit",
          "[select-finalist][embedding]") {
  // t16's interleaved region holds 376832 bytes: 400 x 32 floats fit whole, 20000 x 16 do not.
  for (const auto& [rows, by_rows] : {std::pair{400, false}, std::pair{20000, true}}) {
    PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
    bench.state.model = embedding_graph(rows, 32, 24);
    REQUIRE(bench.run_through("select-finalist").ok);
    const auto selected = bench.log_lines("selected block plan op=0 kind=embedding");
    REQUIRE(selected.size() == 1);
    INFO(selected[0]);
    CHECK((log_field(selected[0], "row_groups") > 1) == by_rows);
    CHECK(log_field(selected[0], "column_groups") <= 2);  // blocks of 16 columns at least
    check_planned_program(bench);                         // every table element written once; the lookups right
  }
}

TEST_CASE("select-finalist plans BERT-base's token table (30522 x 768, 94 MB) on t1472",
          "[select-finalist][embedding]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t1472.yaml"));
  bench.state.model = embedding_graph(30522, 768, 128);
  REQUIRE(bench.run_through("select-finalist").ok);
  const auto selected = bench.log_lines("selected block plan op=0 kind=embedding");
  REQUIRE(selected.size() == 1);
  INFO(selected[0]);
  const std::uint64_t rows = log_field(selected[0], "row_groups"), columns = log_field(selected[0], "column_groups");
  CHECK(columns == 48);  // 768 columns in blocks of 16
  CHECK(rows > 1);       // 30522 x 16 floats (1.95 MB) do not fit a tile
  CHECK(rows * columns <= bench.state.target.tiles);
  CHECK(bench.log_lines("capacity check passed weight_bytes=93763584 ").size() == 1);
  check_planned_program(bench);
}

TEST_CASE("select-finalist splits a wide field's image-rows by output columns, halo and padding included",
          "[select-finalist][window]") {
  TempDir dir;
  // One image of 3 x 41 pixels, 8 channels: 3 image-rows cannot fill 16 tiles, so each row's
  // output columns split too. Padding on both edges, a stride, a dilation, both pool kinds.
  const std::string model = dir.write("wide.yaml",
                                      "model: wide\nseed: 13\ntensors:\n"
                                      "  - {name: x, shape: [123, 8], kind: input}\n"
                                      "  - {name: w, shape: [72, 8], kind: weight, scale: 0.3}\n"
                                      "  - {name: b, shape: [8], kind: weight}\n"
                                      "ops:\n"
                                      "  - {op: conv, inputs: [x, w, b], output: c, batch: 1, field: [3, 41], "
                                      "kernel: [3, 3], pads: [1, 2, 1, 1], dilations: [1, 2], relu: true}\n"
                                      "  - {op: max_pool, inputs: [c], output: m, batch: 1, field: [3, 40], "
                                      "kernel: [3, 3], strides: [1, 2], pads: [1, 1, 1, 1]}\n"
                                      "  - {op: avg_pool, inputs: [c], output: a, batch: 1, field: [3, 40], "
                                      "kernel: [2, 5], strides: [1, 3], pads: [0, 2, 1, 2]}\n"
                                      "outputs: [m, a]\n");
  PassBench bench(model, config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  const std::vector<std::string> windows = bench.log_lines("selected block plan op=");
  REQUIRE(windows.size() == 3);
  for (const std::string& line : windows) {
    INFO(line);
    CHECK(log_field(line, "row_groups") == 3);
    CHECK(log_field(line, "field_groups") > 1);
  }
  check_planned_program(bench);
}
