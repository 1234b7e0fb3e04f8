#include "common/wire/gradient_dump.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "common/wire/framed_file.h"
#include "common/wire/layout_proto.h"
#include "sketchps/v1/gradient_dump.pb.h"

namespace sketchps {
namespace {

constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 34;

absl::StatusOr<GradientDump> ParsePayload(const std::string& payload, const std::string& path) {
  v1::GradientDump msg;
  if (!msg.ParseFromString(payload)) return absl::DataLossError(absl::StrCat(path, ": payload does not parse"));
  GradientDump dump;
  dump.job_id = msg.job_id();
  dump.model = msg.model();
  dump.worker_id = msg.worker_id();
  dump.num_workers = msg.num_workers();
  dump.round = msg.round();
  auto layers = LayersFromProto(msg.layers(), "layers");
  if (!layers.ok()) return absl::DataLossError(absl::StrCat(path, ": ", layers.status().message()));
  dump.layers = *std::move(layers);
  auto values = ParseF32Bytes(msg.values(), dump.layers.dim(), "values", /*allow_nonfinite=*/true);
  if (!values.ok()) return absl::DataLossError(absl::StrCat(path, ": ", values.status().message()));
  dump.values = *std::move(values);
  if (dump.worker_id >= dump.num_workers) {
    return absl::DataLossError(
        absl::StrCat(path, ": worker_id ", dump.worker_id, " >= num_workers ", dump.num_workers));
  }
  return dump;
}

}  // namespace

std::string GradientDumpName(std::uint64_t round, std::uint32_t worker) {
  return absl::StrFormat("grad-r%08u-w%u.skgd", round, worker);
}

absl::Status WriteGradientDump(const std::string& path, const GradientDump& dump) {
  if (dump.values.size() != dump.layers.dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient dump: ", dump.values.size(), " values for a layout of ", dump.layers.dim()));
  }
  v1::GradientDump msg;
  msg.set_job_id(dump.job_id);
  msg.set_model(dump.model);
  msg.set_worker_id(dump.worker_id);
  msg.set_num_workers(dump.num_workers);
  msg.set_round(dump.round);
  LayersToProto(dump.layers, msg.mutable_layers());
  msg.set_values(F32Bytes(dump.values));
  std::string payload;
  if (!msg.SerializeToString(&payload)) return absl::InternalError("gradient dump does not serialize");
  return WriteFramedFile(path, kGradientDumpMagic, payload);
}

absl::StatusOr<GradientDump> ReadGradientDump(const std::string& path) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::string payload, ReadFramedFile(path, kGradientDumpMagic, kMaxPayloadBytes));
  return ParsePayload(payload, path);
}

absl::StatusOr<GradientDump> ParseGradientDumpBytes(std::string bytes, const std::string& name) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::string payload,
                            UnframeBytes(std::move(bytes), kGradientDumpMagic, kMaxPayloadBytes, name));
  return ParsePayload(payload, name);
}

}  // namespace sketchps
