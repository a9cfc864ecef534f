// The program verifier catches what a buggy pass could leave behind.
#include <catch2/catch.hpp>

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
