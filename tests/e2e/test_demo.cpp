// End-to-end: the headline, mlp-b2-n3 on 1,472 simulated tiles, numbers checked.
#include <catch2/catch.hpp>

#include <regex>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;

TEST_CASE("demo compiles mlp-b2-n3 for t1472 and passes the numerical test", "[e2e][demo]") {
  TempDir dir;
  const std::string package = (dir.path() / "model.tpkg").string();
  auto r = run_command({tessera_binary(), "demo", "--model", source_path("configs/models/mlp-b2-n3.yaml"), "--pipeline",
                        pipeline_copy(dir, source_path("configs/pipelines/default.yaml"), "greedy", "greedy"),
                        "--output", package, "--lock", (dir.path() / "device.lock").string()},
                       {std::string("TESSERA_PLUGIN_PATH=")});
  INFO(r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("package=" + package + " tiles=1472 "));
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
  std::smatch error;
  REQUIRE(std::regex_search(r.out, error, std::regex("referenceMaximumAbsoluteError=([0-9.e+-]+)")));
  CHECK(std::stod(error[1]) < 1e-3);
  // Quiet by default: the result lines on stdout, nothing on stderr (the phases' lines are -v's).
  CHECK(r.err.empty());
}
