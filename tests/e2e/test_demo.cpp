// End-to-end: the headline, mlp-b2-n3 on 1,472 simulated tiles, numbers checked.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;

TEST_CASE("demo compiles mlp-b2-n3 for t1472 and passes the numerical test", "[e2e][demo]") {
  TempDir dir;
  // From a folder outside the source tree with the defaults only, as a newcomer types it.
  auto r = run_command(
      {"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" demo --lock device.lock", dir.path().string(), tessera_binary()},
      {std::string("TESSERA_PLUGIN_PATH=")});
  INFO(r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("package=tessera-demo/mlp-b2-n3.tpkg tiles=1472 "));
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
  CHECK(std::filesystem::is_regular_file(dir.path() / "tessera-demo/mlp-b2-n3.tpkg"));
  std::smatch error;
  REQUIRE(std::regex_search(r.out, error, std::regex("referenceMaximumAbsoluteError=([0-9.e+-]+)")));
  CHECK(std::stod(error[1]) < 1e-3);
  // Quiet by default: the result lines on stdout, nothing on stderr (the phases' lines are -v's).
  CHECK(r.err.empty());
}
