// Tests of the codelet set: names, operand shapes and the cycle formulas the simulator charges.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "sim_fixture.hpp"
#include "tessera/codelets.hpp"

using namespace tessera;

TEST_CASE("codelets name themselves and declare operand and param counts", "[codelets]") {
  CHECK(std::string(codelet_name(Codelet::matmul)) == "matmul");
  CHECK(std::string(codelet_name(Codelet::reduce_add)) == "reduce_add");
  CHECK(std::string(codelet_name(Codelet::bias_add)) == "bias_add");
  CHECK(std::string(codelet_name(Codelet::relu)) == "relu");
  CHECK(std::string(codelet_name(Codelet::add)) == "add");
  CHECK(std::string(codelet_name(Codelet::copy)) == "copy");
  CHECK(codelet_operand_count(Codelet::matmul) == 3);
  CHECK(codelet_param_count(Codelet::matmul) == 3);
  CHECK(codelet_operand_count(Codelet::reduce_add) == 2);
  CHECK(codelet_param_count(Codelet::bias_add) == 3);
  CHECK(codelet_operand_count(Codelet::relu) == 1);
  CHECK(codelet_operand_count(Codelet::add) == 3);
  CHECK(codelet_param_count(Codelet::copy) == 1);
  CHECK_THROWS_AS(codelet_name(static_cast<Codelet>(kCodeletCount)), std::logic_error);
}

TEST_CASE("codelet operand spans follow the shape params", "[codelets]") {
  const std::vector<std::uint32_t> mkn = {3, 5, 7};
  CHECK(codelet_operand_words(Codelet::matmul, mkn, 0) == 15);
  CHECK(codelet_operand_words(Codelet::matmul, mkn, 1) == 35);
  CHECK(codelet_operand_words(Codelet::matmul, mkn, 2) == 21);
  const std::vector<std::uint32_t> parts_count = {4, 10};
  CHECK(codelet_operand_words(Codelet::reduce_add, parts_count, 0) == 40);
  CHECK(codelet_operand_words(Codelet::reduce_add, parts_count, 1) == 10);
  const std::vector<std::uint32_t> bias = {2, 6, 1};
  CHECK(codelet_operand_words(Codelet::bias_add, bias, 0) == 12);
  CHECK(codelet_operand_words(Codelet::bias_add, bias, 1) == 6);
  CHECK(codelet_operand_words(Codelet::add, std::vector<std::uint32_t>{9}, 2) == 9);
  // Large shapes must not overflow 32 bits.
  const std::vector<std::uint32_t> big = {65536, 65536, 1};
  CHECK(codelet_operand_words(Codelet::matmul, big, 0) == 4294967296ull);
  CHECK_THROWS_AS(codelet_operand_words(Codelet::matmul, std::vector<std::uint32_t>{1, 2}, 0),
                  std::logic_error);
  CHECK_THROWS_AS(codelet_operand_words(Codelet::relu, std::vector<std::uint32_t>{4}, 1),
                  std::logic_error);
}

TEST_CASE("codelet cycle formulas charge the documented machine model", "[codelets]") {
  const Target target = testing::four_tile_target();  // 6 workers, 16 fp32 MACs per cycle
  // matmul: 40 + ceil(m*k*n / 16)
  CHECK(codelet_cycles(Codelet::matmul, std::vector<std::uint32_t>{2, 4, 4}, target) == 42);
  CHECK(codelet_cycles(Codelet::matmul, std::vector<std::uint32_t>{2, 4096, 3}, target) ==
        40 + 1536);
  CHECK(codelet_cycles(Codelet::matmul, std::vector<std::uint32_t>{1, 1, 1}, target) == 41);
  // elementwise: 4*workers + 6 * ceil(ceil(count/workers)/2) * instructions per vector
  CHECK(codelet_cycles(Codelet::copy, std::vector<std::uint32_t>{12}, target) == 24 + 6 * 1 * 1);
  CHECK(codelet_cycles(Codelet::copy, std::vector<std::uint32_t>{1200}, target) == 24 + 6 * 100);
  CHECK(codelet_cycles(Codelet::relu, std::vector<std::uint32_t>{13}, target) == 24 + 6 * 2 * 1);
  CHECK(codelet_cycles(Codelet::add, std::vector<std::uint32_t>{1200}, target) == 24 + 6 * 100 * 2);
  CHECK(codelet_cycles(Codelet::bias_add, std::vector<std::uint32_t>{2, 600, 0}, target) ==
        24 + 6 * 100 * 2);
  CHECK(codelet_cycles(Codelet::bias_add, std::vector<std::uint32_t>{2, 600, 1}, target) ==
        24 + 6 * 100 * 3);
  // reduce_add: one load-add per part plus the store, per output vector.
  CHECK(codelet_cycles(Codelet::reduce_add, std::vector<std::uint32_t>{4, 1200}, target) ==
        24 + 6 * 100 * 5);
  // reduce_bias: per vector one load-add per part and for the own partial, the bias, the
  // store and the fused relu; an odd row width pays a whole vector (2 x 3 -> 2 x 4 floats).
  CHECK(codelet_cycles(Codelet::reduce_bias, std::vector<std::uint32_t>{15, 2, 3, 45, 1}, target) ==
        24 + 6 * 1 * (15 + 1 + 1 + 1 + 1));
  CHECK(codelet_cycles(Codelet::reduce_bias, std::vector<std::uint32_t>{3, 2, 600, 600, 0}, target) ==
        24 + 6 * 100 * (3 + 1 + 1 + 1));
  CHECK(codelet_operand_words(Codelet::reduce_bias, std::vector<std::uint32_t>{3, 2, 5, 9, 0}, 0) == 30);
  CHECK(codelet_operand_words(Codelet::reduce_bias, std::vector<std::uint32_t>{3, 2, 5, 9, 0}, 1) == 14);
  CHECK(codelet_operand_words(Codelet::reduce_bias, std::vector<std::uint32_t>{3, 2, 5, 9, 0}, 2) == 5);
  CHECK(codelet_operand_words(Codelet::reduce_bias, std::vector<std::uint32_t>{3, 2, 5, 9, 0}, 3) == 10);
  // Fewer workers: a longer share each, and a cheaper launch.
  Target three_workers = target;
  three_workers.worker_threads = 3;
  CHECK(codelet_cycles(Codelet::copy, std::vector<std::uint32_t>{1200}, three_workers) ==
        12 + 6 * 200);
  // A faster AMP unit halves the MAC term only.
  Target wide = target;
  wide.fp32_macs_per_cycle = 32;
  CHECK(codelet_cycles(Codelet::matmul, std::vector<std::uint32_t>{2, 4096, 3}, wide) == 40 + 768);
}

TEST_CASE("block and half-weight codelets declare their operands and charge their formulas", "[codelets]") {
  const Target target = testing::four_tile_target();  // 6 workers, 16 fp32 / 64 fp16 MACs per cycle
  const std::vector<std::uint32_t> mkn = {3, 5, 7};
  CHECK(codelet_operand_words(Codelet::matmul_transposed, mkn, 1) == 35);
  CHECK(codelet_operand_words(Codelet::matmul_half, mkn, 1) == 18);  // 35 halves, padded to a word
  CHECK(codelet_operand_words(Codelet::bias_add_half, std::vector<std::uint32_t>{2, 5, 0}, 1) == 3);
  CHECK(codelet_operand_count(Codelet::layer_norm) == 4);
  CHECK(codelet_operand_words(Codelet::layer_norm, std::vector<std::uint32_t>{4, 10, 0}, 2) == 10);
  CHECK(codelet_operand_words(Codelet::softmax, std::vector<std::uint32_t>{4, 10, 0}, 1) == 40);
  CHECK(param_float(float_param(0.125f)) == 0.125f);
  // matmul_transposed: matmul + the workers' transpose of b (2 instructions per vector).
  CHECK(codelet_cycles(Codelet::matmul_transposed, std::vector<std::uint32_t>{2, 4096, 3}, target) ==
        40 + 1536 + 24 + 6 * 1024 * 2);
  // matmul_half: 64 MACs per cycle after converting a to half (1 instruction per vector).
  CHECK(codelet_cycles(Codelet::matmul_half, std::vector<std::uint32_t>{2, 4096, 3}, target) ==
        40 + 384 + 24 + 6 * 683 * 1);
  CHECK(codelet_cycles(Codelet::bias_add_half, std::vector<std::uint32_t>{2, 600, 1}, target) ==
        24 + 6 * 100 * 4);
  // Row codelets: ceil(rows / workers) rows per worker, 6 cycles per instruction.
  // softmax per row: 5 vectors * (1 + 9 + 1) + 2 * 4 + 8 = 71 instructions.
  CHECK(codelet_cycles(Codelet::softmax, std::vector<std::uint32_t>{7, 10, 0}, target) == 24 + 6 * 2 * 71);
  // layer_norm per row: 5 vectors * (1 + 2 + 4) + 2 * 4 + 10 + 8 = 61 instructions.
  CHECK(codelet_cycles(Codelet::layer_norm, std::vector<std::uint32_t>{6, 10, 0}, target) == 24 + 6 * 1 * 61);
}
