// tessera-plugin-host: runs one plugin for the compiler in a child process (`isolate: process`).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tessera/isolation.hpp"
#include "tessera/log.hpp"

int main(int argc, char** argv) {
  int channel_fd = -1;
  std::string level = "warn", probe;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--channel-fd") == 0) channel_fd = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--log-level") == 0) level = argv[i + 1];
    else if (std::strcmp(argv[i], "--probe") == 0) probe = argv[i + 1];
  }
  if (!probe.empty() && argc % 2 == 1) {
    // Loads one library and reports on fd 3 (the compiler does this before loading it itself).
    tessera::configure_logging(level);
    return tessera::probe_plugin_library(probe, 3);
  }
  if (channel_fd < 0 || argc % 2 == 0) {
    // Only the compiler starts this program; a person running it needs to know that.
    std::fprintf(stderr,
                 "usage: tessera-plugin-host --channel-fd FD [--log-level LEVEL]\n"
                 "       tessera-plugin-host --probe LIBRARY [--log-level LEVEL]  (reports on fd 3)\n"
                 "Started by tessera for pipeline entries with 'isolate: process' and to load each plugin library "
                 "first; it speaks protocol "
                 "version %u on FD and is not meant to be run by hand.\n",
                 static_cast<unsigned>(tessera::kPluginHostProtocolVersion));
    return 2;
  }
  tessera::configure_logging(level);
  return tessera::serve_plugin_requests(channel_fd);
}
