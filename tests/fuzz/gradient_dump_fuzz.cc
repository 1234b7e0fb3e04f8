// Fuzz harness: gradient dumps (common/wire/gradient_dump.h), which `sketchps bench --input` reads:
// bytes (fuzz_target.h FileBytes: a file, or a payload framed here) -> ParseGradientDumpBytes (framing, CRC, parse,
// layout, values). Invariants: refusals are named; an accepted dump has one value per element of a valid layout and a
// worker id below the worker count.
#include "common/wire/framed_file.h"
#include "common/wire/gradient_dump.h"
#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  constexpr char kHarness[] = "gradient_dump_fuzz";
  auto dump = ParseGradientDumpBytes(fuzz::FileBytes(data, size, kGradientDumpMagic, &FrameBytes), "fuzz.skgd");
  fuzz::RequireNamed(dump.status(), kHarness);
  if (!dump.ok()) return 0;
  fuzz::Require(dump->values.size() == dump->layers.dim(), kHarness, "values do not cover the layout");
  fuzz::Require(ValidateLayerTable(dump->layers).ok(), kHarness, "an accepted dump has an invalid layout");
  fuzz::Require(dump->worker_id < dump->num_workers, kHarness, "worker_id >= num_workers");
  fuzz::NoteAccepted();
  return 0;
}
