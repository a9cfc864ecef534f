// Tests of the simulator: exact results and cycles on a hand-built package, and every
// exchange and memory rule it enforces.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "sim_fixture.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/runtime/host_exchange.hpp"
#include "tessera/runtime/reference.hpp"
#include "tessera/runtime/sim_device.hpp"

using namespace tessera;
using namespace tessera::runtime;
using Catch::Matchers::Contains;

namespace {

HostTensors host_values(const Graph& graph) {
  HostTensors values = initial_host_tensors(graph, TensorKind::weight);
  values.merge(initial_host_tensors(graph, TensorKind::input));
  return values;
}

/// Loads `package` into a fresh simulator and returns the load error's message ("" if none).
std::string load_error(const Package& package) {
  SimDevice device;
  device.attach();
  try {
    device.load(package);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

/// y computed in float32 in the same order as the tiles do: two partial sums, then
/// partial0 + partial1 + b, then ReLU.
std::vector<float> expected_y(const HostTensors& values) {
  const auto& x = values.at("x");
  const auto& w = values.at("w");
  const auto& b = values.at("b");
  std::vector<float> y(8);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) {
      float half[2] = {0, 0};
      for (int part = 0; part < 2; ++part)
        for (int k = part * 4; k < part * 4 + 4; ++k) half[part] += x[r * 8 + k] * w[k * 4 + c];
      const float sum = (0.0f + half[0]) + half[1];
      y[r * 4 + c] = std::max(sum + b[c], 0.0f);
    }
  return y;
}

}  // namespace

TEST_CASE("sim device computes a split matmul with exchange, reduce and multicast exactly", "[runtime][sim]") {
  const Package package = testing::small_mlp_package();
  const HostTensors values = host_values(package.graph);
  SimDevice device;
  device.attach();
  device.load(package);
  device.initialize(values);
  const HostTensors outputs = device.run(values);

  REQUIRE(outputs.count("y") == 1);
  const std::vector<float> want = expected_y(values);
  CHECK(outputs.at("y") == want);
  // The received copies themselves, not only the replica on tile 0.
  CHECK(device.read_words(2, testing::layout::y_row0, 4) == std::vector<float>(want.begin(), want.begin() + 4));
  CHECK(device.read_words(3, testing::layout::y_all, 8) == want);

  const NumericalReport report =
      compare_with_reference(package.graph, outputs, execute_reference(package.graph, values));
  CHECK(report.passed);
  CHECK(report.max_abs_error < 1e-6);

  // Memory is held only up to each tile's highest buffer byte.
  CHECK(device.tile_memory_bytes(0) == 208);
  CHECK(device.tile_memory_bytes(1) == 128);
  CHECK(device.tile_memory_bytes(2) == 16);
  CHECK(device.allocated_bytes() == 208 + 128 + 16 + 32);
}

TEST_CASE("sim device loading and releasing a package consumes its supersteps and computes the same",
          "[runtime][sim]") {
  const Package package = testing::small_mlp_package();
  const HostTensors values = host_values(package.graph);
  SimDevice kept;
  kept.attach();
  kept.load(package);
  kept.initialize(values);
  const HostTensors want = kept.run(values);

  Package consumed = package;
  SimDevice device;
  device.attach();
  device.load_releasing(consumed);
  for (std::size_t tile = 0; tile < consumed.tiles.size(); ++tile) {
    INFO("tile " << tile);
    CHECK(consumed.tiles[tile].buffers.size() == package.tiles[tile].buffers.size());  // only the supersteps go
    for (const TileSuperstep& step : consumed.tiles[tile].supersteps) {
      CHECK(step.compute.empty());
      CHECK(step.sends.empty());
      CHECK(step.receives.empty());
    }
  }
  device.initialize(values);
  CHECK(device.run(values) == want);
  CHECK(device.profile().cycles.total() == kept.profile().cycles.total());
  CHECK(device.allocated_bytes() == kept.allocated_bytes());
}

TEST_CASE("sim device charges the codelet formulas, barriers and exchange horizons", "[runtime][sim]") {
  const Package package = testing::small_mlp_package();
  const Target& t = package.target;
  const HostTensors values = host_values(package.graph);
  SimDevice device;
  device.attach();
  device.load(package);
  device.initialize(values);
  (void)device.run(values);
  const ExecutionProfile& profile = device.profile();

  // Superstep 0: both tiles run one matmul; tile 1's 8 words leave at cycles 0..7 and
  // arrive at tile 0 (same column) latency cycles later.
  const std::uint64_t matmul = codelet_cycles(Codelet::matmul, std::vector<std::uint32_t>{2, 4, 4, 0}, t);
  const std::uint64_t horizon0 = 0 + t.latency(1, 0) + 8;
  // Superstep 1: tile 0 reduces and adds the bias; its 8 words reach tile 3 (next column)
  // last, at cycle 7 + latency.
  const std::uint64_t reduce_bias = codelet_cycles(Codelet::reduce_add, std::vector<std::uint32_t>{2, 8}, t) +
                                    codelet_cycles(Codelet::bias_add, std::vector<std::uint32_t>{2, 4, 1}, t);
  const std::uint64_t horizon1 = 7 + t.latency(0, 3) + 1;

  REQUIRE(profile.supersteps.size() == 2);
  CHECK(profile.supersteps[0].label == "matmul");
  CHECK(profile.supersteps[0].tile_compute_cycles == std::vector<std::uint64_t>{matmul, matmul, 0, 0});
  CHECK(profile.supersteps[0].exchange_horizon == horizon0);
  CHECK(profile.supersteps[0].exchange_cycles == horizon0 + t.exchange_phase_overhead);
  CHECK(profile.supersteps[1].tile_compute_cycles == std::vector<std::uint64_t>{reduce_bias, 0, 0, 0});
  CHECK(profile.supersteps[1].busiest_tile == 0);
  CHECK(profile.supersteps[1].exchange_horizon == horizon1);
  CHECK(profile.cycles.compute == matmul + reduce_bias);
  CHECK(profile.cycles.sync == 2 * t.sync_cycles);
  CHECK(profile.cycles.exchange == horizon0 + horizon1 + 2 * t.exchange_phase_overhead);
  // The same sum with the numbers of this target written out: 449 + 90 + 114 + 1009 + 90 + 115.
  CHECK(profile.cycles.total() == 1867);
  CHECK(profile.samples() == 8);

  // Word accounting: 8 + 8 sent by tile 0 and 1 in total with 2 unreceived; multicast words
  // count once when sent and once per receiver.
  CHECK(profile.supersteps[0].words_sent == 8);
  CHECK(profile.supersteps[0].words_received == 8);
  CHECK(profile.supersteps[1].words_sent == 10);
  CHECK(profile.supersteps[1].words_received == 12);
  CHECK(profile.supersteps[1].words_unreceived == 2);
}

TEST_CASE("sim device refuses two sends from one tile in one cycle", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  package.tiles[1].supersteps[0].sends.push_back({3, testing::layout::x1, 2});
  const std::string error = load_error(package);
  CHECK_THAT(error, Contains("superstep 0 ('matmul'), tile 1, cycle 3") && Contains("sends two words in one cycle"));
}

TEST_CASE("sim device refuses an unknown function of the unary, binary and binary_row codelets", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  // Tile 0's bias add becomes a binary_row with a function past the last.
  package.tiles[0].supersteps[1].compute[1] =
      testing::call(Codelet::binary_row, {testing::layout::y, testing::layout::b}, {2, 4, kBinaryFunctionCount});
  CHECK_THAT(load_error(package),
             Contains("superstep 1 ('reduce-bias-relu'), tile 0, call 1") &&
                 Contains(fmt::format("binary_row's function must be below {0}, got {0}", kBinaryFunctionCount)));
  package.tiles[0].supersteps[1].compute[1] =
      testing::call(Codelet::unary, {testing::layout::y, testing::layout::y}, {8, kUnaryFunctionCount, 0});
  CHECK_THAT(load_error(package),
             Contains(fmt::format("unary's function must be below {0}, got {0}", kUnaryFunctionCount)));
  package.tiles[0].supersteps[1].compute[1] =
      testing::call(Codelet::reduce_rows, {testing::layout::y, testing::layout::y}, {2, 4, kReduceFunctionCount});
  CHECK_THAT(load_error(package),
             Contains(fmt::format("reduce_rows' function must be below {0}, got {0}", kReduceFunctionCount)));
  // The same with a valid function loads.
  package.tiles[0].supersteps[1].compute[1] =
      testing::call(Codelet::unary, {testing::layout::y, testing::layout::y}, {8, 0, 0});
  CHECK(load_error(package).empty());
}

TEST_CASE("sim device refuses two arrivals at one tile in one cycle", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  // A second receive on tile 0 overlapping arrivals 6..13.
  package.tiles[0].supersteps[0].receives.push_back({10, 1, testing::layout::partial1, 2});
  const std::string error = load_error(package);
  CHECK_THAT(error, Contains("superstep 0 ('matmul'), tile 0, cycle 10") && Contains("two words arrive in one cycle"));
}

TEST_CASE("sim device refuses a receive without a matching send", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  // Arrivals 7..14 need sends at 1..8, but tile 1 sends at 0..7: the last word is missing.
  package.tiles[0].supersteps[0].receives[0].arrival = 7;
  std::string error = load_error(package);
  CHECK_THAT(error, Contains("superstep 0 ('matmul'), tile 0, cycle 14") && Contains("no matching send") &&
                        Contains("cycle 8"));

  // An arrival earlier than the latency allows has no send at all.
  package.tiles[0].supersteps[0].receives[0].arrival = 5;
  error = load_error(package);
  CHECK_THAT(error, Contains("tile 0, cycle 5") && Contains("no matching send"));

  // Listening to the wrong sender.
  package = testing::small_mlp_package();
  package.tiles[0].supersteps[0].receives[0].sender = 2;
  CHECK_THAT(load_error(package), Contains("no matching send") && Contains("tile 2"));
}

TEST_CASE("sim device enforces the receive-mux switch cost", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  package.tiles[2].buffers.push_back({16, 8});
  // Tile 2 listens to tile 0 for arrivals 7..10; tile 1's 2 words sent at cycle 4 arrive
  // at 4 + latency(1, 2) = 11: no idle cycle to switch.
  package.tiles[1].supersteps[1].sends = {{4, testing::layout::x1, 2}};
  package.tiles[2].supersteps[1].receives.push_back({11, 1, 16, 2});
  REQUIRE(package.target.latency(1, 2) == 7);
  CHECK_THAT(load_error(package),
             Contains("superstep 1 ('reduce-bias-relu'), tile 2, cycle 11") && Contains("switch_cost"));

  // One cycle later the receiver has its idle cycle.
  package.tiles[1].supersteps[1].sends = {{5, testing::layout::x1, 2}};
  package.tiles[2].supersteps[1].receives.back().arrival = 12;
  CHECK(load_error(package).empty());
}

TEST_CASE("sim device refuses storing a word twice in one phase", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  // Tile 3 takes y's 8 words at 7..14, then tile 1's 2 words (sent at 9, latency 7) over the last two.
  package.tiles[1].supersteps[1].sends = {{9, testing::layout::x1, 2}};
  package.tiles[3].supersteps[1].receives.push_back({16, 1, testing::layout::y_row1 + 8, 2});
  CHECK_THAT(load_error(package), Contains("superstep 1 ('reduce-bias-relu'), tile 3, cycle 16") &&
                                      Contains("stores byte address 24 twice"));
}

TEST_CASE("sim device refuses multicast on a target without it", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  package.target.multicast = false;
  // Tiles 2 and 3 both take the words tile 0 sends at cycles 0..3.
  CHECK_THAT(load_error(package), Contains("tile 3, cycle 7") && Contains("tile 0 sends at cycle 0") &&
                                      Contains("this tile and tile 2") && Contains("no multicast"));
  // Without the shared words it loads.
  package.tiles[3].supersteps[1].receives = {{11, 0, 16, 4}};
  CHECK(load_error(package).empty());
}

TEST_CASE("sim device refuses sending a word received earlier in the same phase", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  // Tile 0 would forward what it receives at 6..13 by sending it at 20..27.
  package.tiles[0].supersteps[0].sends = {{20, testing::layout::partial1, 8}};
  CHECK_THAT(load_error(package), Contains("tile 0, cycle 20") && Contains("forwarding"));
  // Sending it before the new words arrive is well defined (the old values leave).
  package.tiles[0].supersteps[0].sends = {{0, testing::layout::partial1, 4}};
  CHECK(load_error(package).empty());
}

TEST_CASE("sim device checks every address against the tile's memory", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  package.tiles[1].supersteps[0].compute[0].addresses[2] = 120;  // c spans 120..152 > 128
  CHECK_THAT(load_error(package), Contains("superstep 0 ('matmul'), tile 1, call 0") && Contains("[120, 152)"));

  package = testing::small_mlp_package();
  package.tiles[2].buffers.push_back({4090, 16});  // past the target's 4096 bytes
  CHECK_THAT(load_error(package), Contains("tile 2 buffer-table entry 1") && Contains("4096"));

  package = testing::small_mlp_package();
  package.tiles[0].supersteps[0].receives[0].address = 130;  // not word aligned
  CHECK_THAT(load_error(package), Contains("tile 0") && Contains("not 4-byte aligned"));

  package = testing::small_mlp_package();
  package.tiles[0].supersteps[1].compute[1].params[2] = 2;  // relu flag
  CHECK_THAT(load_error(package), Contains("relu flag"));

  package = testing::small_mlp_package();
  package.tiles[0].supersteps[0].compute[0].addresses[2] = 32;  // matmul writing over w
  CHECK_THAT(load_error(package), Contains("alias"));
}

TEST_CASE("sim device refuses sizes that wrap around 64 bits", "[runtime][sim]") {
  // An in-place softmax of 2^31 x 2^31: 2^62 words, whose byte count 2^64 wraps to 0.
  Package package = testing::small_mlp_package();
  package.tiles[0].supersteps[0].compute.push_back(testing::call(
      Codelet::softmax, {testing::layout::y, testing::layout::y}, {1u << 31, 1u << 31, float_param(1.0f)}));
  CHECK_THAT(load_error(package), Contains("superstep 0 ('matmul'), tile 0, call 1") && Contains("softmax operand 0") &&
                                      Contains("buffer table ends at byte 208"));

  // reduce_bias's parts x rows x cols can pass 2^64 words.
  package = testing::small_mlp_package();
  package.tiles[0].supersteps[0].compute.push_back(testing::call(
      Codelet::reduce_bias, {testing::layout::x0, testing::layout::w0, testing::layout::b, testing::layout::y},
      {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0}));
  CHECK_THAT(load_error(package), Contains("reduce_bias operand 0") && Contains("buffer table ends"));

  // A send whose last cycle would wrap past 2^64.
  package = testing::small_mlp_package();
  package.tiles[1].supersteps[0].sends[0].cycle = ~std::uint64_t{0} - 3;
  CHECK_THAT(load_error(package), Contains("tile 1") && Contains("ends past cycle"));
}

TEST_CASE("sim device holds only the bytes the buffer tables cover", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  // A buffer far above the others on tile 2: the gap below it is not held.
  package.tiles[2].buffers.push_back({3000, 40});
  const HostTensors values = host_values(package.graph);
  SimDevice device;
  device.attach();
  device.load(package);
  CHECK(device.tile_memory_bytes(2) == 16 + 40);
  device.initialize(values);
  CHECK(device.run(values).at("y") == expected_y(values));
  CHECK(device.read_words(2, 3000, 10) == std::vector<float>(10, 0.0f));
  CHECK_THROWS_WITH(device.read_words(2, 16, 1), Contains("[16, 20)") && Contains("no buffer-table entry"));

  // An operand in the gap is refused, though it lies below the table's highest byte.
  package.tiles[2].supersteps[0].compute = {testing::call(Codelet::relu, {2000}, {4})};
  CHECK_THAT(load_error(package),
             Contains("tile 2, call 0") && Contains("[2000, 2016)") && Contains("no buffer-table entry"));
}

TEST_CASE("sim device checks host streams cover their tensors", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  package.streams[1].slices.pop_back();  // w rows 4..7 no longer reach tile 1
  CHECK_THAT(load_error(package), Contains("host stream 'w' (weight)") && Contains("[4, 0]"));

  package = testing::small_mlp_package();
  package.streams[3].slices.clear();
  package.streams[3].slices.push_back({3, testing::layout::y_all, 0, 2, 0, 4});
  CHECK(load_error(package).empty());
  package.streams.pop_back();  // no output stream for y at all
  CHECK_THAT(load_error(package), Contains("graph output 'y' has no output host stream"));
}

TEST_CASE("sim device checks the package's shape against its target", "[runtime][sim]") {
  Package package = testing::small_mlp_package();
  package.tiles.pop_back();
  CHECK_THAT(load_error(package), Contains("3 tile images") && Contains("4 tiles"));

  package = testing::small_mlp_package();
  package.tiles[2].supersteps.pop_back();
  CHECK_THAT(load_error(package), Contains("tile 2 has 1 supersteps"));

  package = testing::small_mlp_package();
  package.codelet_set_version = kCodeletSetVersion + 1;
  CHECK_THAT(load_error(package), Contains("codelet set version"));
}

TEST_CASE("sim device keeps its loaded package when a bad one fails to load", "[runtime][sim]") {
  const Package good = testing::small_mlp_package();
  const HostTensors values = host_values(good.graph);
  SimDevice device;
  device.attach();
  device.load(good);
  Package bad = good;
  bad.tiles[0].supersteps[0].receives[0].arrival = 7;
  CHECK_THROWS_AS(device.load(bad), Error);
  device.initialize(values);
  CHECK(device.run(values).at("y") == expected_y(values));
}

TEST_CASE("device calls must come in order", "[runtime][sim]") {
  SimDevice device;
  const Package package = testing::small_mlp_package();
  CHECK_THROWS_AS(device.load(package), std::logic_error);
  device.attach();
  CHECK_THROWS_AS(device.run({}), std::logic_error);
  device.load(package);
  CHECK_THROWS_AS(device.run({}), std::logic_error);
  CHECK_THROWS_WITH(device.initialize({}), Contains("no host values for weight tensor"));
  CHECK_THROWS_WITH(open_device("ipu"), Contains("unknown device backend 'ipu'"));
  CHECK(open_device("sim")->backend() == "sim");
}

namespace {

/// small_mlp_package with tile 1's weights stored [n, k] (a transposed slice) and multiplied
/// swapped, as the planner lays out constant weights for the swapped orientation: the product
/// leaves c^T [4, 2] in a scratch buffer, which a transpose lays out into the partial.
Package with_transposed_weights(Package package, Codelet as_is, Codelet swapped) {
  using namespace testing::layout;
  constexpr std::uint32_t scratch = 128;
  package.tiles[0].supersteps[0].compute = {testing::call(as_is, {x0, w0, partials}, {2, 4, 4, 0})};
  package.tiles[1].buffers.push_back({scratch, 32});
  package.tiles[1].supersteps[0].compute = {testing::call(swapped, {x1, w1, scratch}, {2, 4, 4, 1}),
                                            testing::call(Codelet::transpose, {scratch, p1}, {4, 2})};
  for (PackageStream& stream : package.streams)
    if (stream.tensor == "w") stream.slices[1].transposed = true;
  return package;
}

Package with_half_weights(Package package) {
  for (Tensor& tensor : package.graph.tensors)
    if (tensor.name == "w") tensor.dtype = DType::float16;
  for (PackageStream& stream : package.streams)
    if (stream.tensor == "w") stream.dtype = DType::float16;
  return package;
}

HostTensors run_package(const Package& package) {
  SimDevice device;
  device.attach();
  device.load(package);
  const HostTensors values = host_values(package.graph);
  device.initialize(values);
  return device.run(values);
}

}  // namespace

TEST_CASE("sim device multiplies by weights the host wrote transposed", "[runtime][sim]") {
  const Package plain = testing::small_mlp_package();
  const Package transposed = with_transposed_weights(plain, Codelet::matmul, Codelet::matmul_transposed);
  CHECK(run_package(transposed).at("y") == expected_y(host_values(plain.graph)));
  // The round trip through the file keeps the flag.
  const testing::TempDir dir;
  const std::string file = (dir.path() / "transposed.tpkg").string();
  write_package(transposed, file);
  CHECK(read_package(file).streams[1].slices[1].transposed);

  // matmul_half reads b [n, k] when swapped: the same sums as the plain layout, bit for bit.
  const Package half = with_half_weights(with_transposed_weights(plain, Codelet::matmul_half, Codelet::matmul_half));
  Package half_plain = with_half_weights(plain);
  for (TileImage& tile : half_plain.tiles)
    for (TileCodeletCall& call : tile.supersteps[0].compute) call.codelet = Codelet::matmul_half;
  const std::vector<float> want = run_package(half_plain).at("y");
  CHECK(run_package(half).at("y") == want);
  // Stored the other way round, the weights give other numbers: the layout is what is read.
  Package half_wrong = half;
  half_wrong.streams[1].slices[1].transposed = false;
  CHECK(run_package(half_wrong).at("y") != want);

  Package bad = transposed;
  bad.streams[3].slices[0].transposed = true;
  CHECK_THAT(load_error(bad), Contains("slice 0, tile 0: an output slice cannot be transposed"));
}
