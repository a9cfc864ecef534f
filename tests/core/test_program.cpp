// The program verifier catches what a buggy pass could leave behind.
#include <catch2/catch.hpp>

#include "tessera/lowering.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"

using namespace tessera;

static Target four_tiles() {
  Target t;
  t.name = "t4";
  t.tiles = 4;
  t.memory_bytes = 65536;
  t.interleaved_start = 32768;
  return t;
}

static Program two_tile_program() {
  Program p;
  p.buffers = {{"a", 0, 64, Region::standard, 8, 0, 1}, {"b", 1, 64, Region::standard, 8, 0, 1}};
  p.supersteps.resize(2);
  p.supersteps[0].compute.push_back({0, Codelet::relu, {{0, 0}}, {16}});
  p.supersteps[0].copies.push_back({{0, 0}, {1, 0}, 16});
  return p;
}

TEST_CASE("program verifier accepts a well-formed program", "[program]") {
  CHECK(verify_program(two_tile_program(), four_tiles()) == "");
}

TEST_CASE("program verifier finds bad references and ranges", "[program]") {
  Target target = four_tiles();
  Program p = two_tile_program();
  p.supersteps[0].compute[0].params = {17};
  CHECK_THAT(verify_program(p, target), Catch::Contains("overrun buffer 'a'"));
  p = two_tile_program();
  p.supersteps[0].copies[0].destination.buffer = 0;
  CHECK_THAT(verify_program(p, target), Catch::Contains("same tile"));
  p = two_tile_program();
  p.supersteps[0].compute[0].tile = 1;
  CHECK_THAT(verify_program(p, target), Catch::Contains("operand 0 is buffer 'a' on tile 0"));
  p = two_tile_program();
  p.buffers[1].tile = 9;
  CHECK_THAT(verify_program(p, target), Catch::Contains("tile out of range"));
}

TEST_CASE("program verifier finds overlapping live buffers and region violations", "[program]") {
  Target target = four_tiles();
  Program p = two_tile_program();
  p.buffers.push_back({"c", 0, 64, Region::standard, 8, 1, 1});
  p.buffers[0].offset = 0;
  p.buffers[1].offset = 0;
  p.buffers[2].offset = 32;
  CHECK_THAT(verify_program(p, target), Catch::Contains("'a' and 'c' on tile 0 overlap"));
  p.buffers[0].last_use = 0;  // no longer live together: sharing is fine
  p.supersteps[0].compute.clear();
  p.supersteps[0].copies.clear();
  CHECK(verify_program(p, target) == "");
  p.buffers[2].offset = 32768 - 32;
  CHECK_THAT(verify_program(p, target), Catch::Contains("outside its standard region"));
}

TEST_CASE("exchange descriptors count a send entry per transfer lower-exchanges makes", "[program][lowering]") {
  // Tile 0's buffer sends words 0..15 to tiles 1 and 2 and twice to tile 1, and words 16..31 to
  // tile 1: with multicast the first run is two transfers (a tile receives each word once),
  // the second one; every copy is still a receive entry.
  Program p;
  p.buffers = {{"source", 0, 128, Region::standard, 8, 0, 0},
               {"one", 1, 64, Region::standard, 8, 0, 0},
               {"two", 2, 64, Region::standard, 8, 0, 0},
               {"again", 1, 64, Region::standard, 8, 0, 0},
               {"more", 1, 64, Region::standard, 8, 0, 0}};
  p.supersteps.resize(1);
  p.supersteps[0].copies = {{{0, 0}, {1, 0}, 16}, {{0, 0}, {2, 0}, 16}, {{0, 0}, {3, 0}, 16}, {{0, 16}, {4, 0}, 16}};
  const std::vector<std::uint64_t> multicast = exchange_descriptor_bytes(p, 4, true);
  CHECK(multicast ==
        std::vector<std::uint64_t>{3 * kSendDescriptorBytes, 3 * kReceiveDescriptorBytes, kReceiveDescriptorBytes, 0});
  CHECK(group_copies(p, p.supersteps[0], true).size() == 3);
  // Without multicast every copy is a transfer of its own: copy_descriptor_bytes.
  CHECK(exchange_descriptor_bytes(p, 4, false) == copy_descriptor_bytes(p, 4));
  CHECK(copy_descriptor_bytes(p, 4)[0] == 4 * kSendDescriptorBytes);
}
