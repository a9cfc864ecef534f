#!/usr/bin/env bash
# Installs the optional Debian packages `make fuzz` needs (clang 14 and its libFuzzer and
# sanitizer runtimes, llvm-symbolizer); not part of the default bootstrap.
exec "$(dirname "$0")/bootstrap.sh" clang-14 libclang-rt-14-dev llvm-14
