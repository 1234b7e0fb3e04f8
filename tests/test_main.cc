// The one Catch2 main of all test binaries (compiled once: it is the slowest TU of the tree).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
