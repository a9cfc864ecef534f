// ONNX Runtime as a differential reference: the run's inputs through tools/onnxruntime/run.js.
#pragma once
#include <string>
#include <vector>

#include "model_data.hpp"
#include "tessera/runtime/reference.hpp"
#include "tessera/runtime/run.hpp"

namespace tessera {
struct Package;
}

namespace tessera::cli {

struct DifferentialOutput {
  std::string name;
  runtime::ExpectationReport report;  ///< the device's output against ONNX Runtime's
  double atol = 0;                    ///< as compared: options' atol, widened for float16-stored weights
};

struct DifferentialReport {
  std::vector<DifferentialOutput> outputs;  ///< in the model's order
  std::string onnxruntime_version;          ///< as run.js reported it
  bool passed = false;                      ///< every output within options' atol and rtol
};

/// Runs `prepared.model` on ONNX Runtime's CPU provider with the inputs the device got (the
/// given ones, and the generated ones for the rest) and compares each output of `device` with
/// it at options.expect_atol / expect_rtol. With weights the compile stored as float16 that ONNX
/// Runtime runs in float32, atol grows by the reference check's float16 share of the output's
/// largest magnitude (float16_relative_tolerance). Node and tools/onnxruntime (scripts/bootstrap.sh)
/// must be installed; TESSERA_ONNXRUNTIME_DIR names another folder holding run.js. Throws Error
/// naming what is missing and the fix.
DifferentialReport differential_check(const Package& package, const PreparedRun& prepared,
                                      const runtime::RunOptions& options, const runtime::HostTensors& device);

}  // namespace tessera::cli
