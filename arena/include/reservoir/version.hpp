// reservoir/version.hpp - the library version (kept equal to project(VERSION) in CMakeLists.txt).
#pragma once

#define RESERVOIR_VERSION_MAJOR 0
#define RESERVOIR_VERSION_MINOR 1
#define RESERVOIR_VERSION_PATCH 0
#define RESERVOIR_VERSION \
  (RESERVOIR_VERSION_MAJOR * 10000 + RESERVOIR_VERSION_MINOR * 100 + RESERVOIR_VERSION_PATCH)
