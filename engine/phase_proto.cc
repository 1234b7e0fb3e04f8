#include "engine/phase_proto.h"

#include "absl/strings/str_cat.h"
#include "common/overloaded.h"
#include "common/status.h"

namespace sketchps {
namespace {

v1::ReductionKind ToProto(Reduction r) {
  switch (r) {
    case Reduction::kDenseSum: return v1::REDUCTION_DENSE_SUM;
    case Reduction::kSparseSum: return v1::REDUCTION_SPARSE_SUM;
    case Reduction::kSketchRecover: return v1::REDUCTION_SKETCH_RECOVER;
    case Reduction::kLeaderIndexSet: return v1::REDUCTION_LEADER_INDEX_SET;
    case Reduction::kSketchMomentumError: return v1::REDUCTION_SKETCH_MOMENTUM_ERROR;
  }
  return v1::REDUCTION_DENSE_SUM;
}

absl::StatusOr<Reduction> FromProto(int kind) {
  switch (kind) {
    case v1::REDUCTION_DENSE_SUM: return Reduction::kDenseSum;
    case v1::REDUCTION_SPARSE_SUM: return Reduction::kSparseSum;
    case v1::REDUCTION_SKETCH_RECOVER: return Reduction::kSketchRecover;
    case v1::REDUCTION_LEADER_INDEX_SET: return Reduction::kLeaderIndexSet;
    case v1::REDUCTION_SKETCH_MOMENTUM_ERROR: return Reduction::kSketchMomentumError;
    default: return absl::InvalidArgumentError(absl::StrCat("spec.reduction: unknown value ", kind));
  }
}

}  // namespace

v1::PhaseSpecMsg SpecToProto(const PhaseSpec& spec) {
  v1::PhaseSpecMsg msg;
  msg.set_reduction(ToProto(spec.reduction));
  msg.set_keep(spec.keep);
  msg.set_leader(spec.leader);
  msg.set_at_previous_indices(spec.at_previous_indices);
  msg.set_final_phase(spec.final_phase);
  msg.set_auxiliary(spec.auxiliary);
  msg.set_momentum(spec.momentum);
  return msg;
}

absl::StatusOr<PhaseSpec> SpecFromProto(const v1::PhaseSpecMsg& msg, std::uint32_t num_workers,
                                        std::uint64_t range_len) {
  PhaseSpec spec;
  SKETCHPS_ASSIGN_OR_RETURN(spec.reduction, FromProto(msg.reduction()));
  if (msg.leader() >= num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.leader: ", msg.leader(), " is not a worker (", num_workers, " workers)"));
  }
  if (msg.keep() > range_len) {
    return absl::InvalidArgumentError(absl::StrCat("spec.keep: ", msg.keep(), " exceeds the range length ", range_len));
  }
  spec.keep = msg.keep();
  spec.leader = msg.leader();
  spec.at_previous_indices = msg.at_previous_indices();
  spec.final_phase = msg.final_phase();
  spec.auxiliary = msg.auxiliary();
  spec.momentum = msg.momentum();
  if (spec.reduction == Reduction::kSketchMomentumError) {
    if (!(spec.momentum >= 0.0 && spec.momentum < 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("spec.momentum: ", spec.momentum, " is not in [0, 1)"));
    }
    if (!spec.final_phase || spec.keep == 0) {
      return absl::InvalidArgumentError("spec.final_phase/keep: a sketch_momentum_error phase is final with keep > 0");
    }
  } else if (spec.momentum != 0.0) {
    return absl::InvalidArgumentError(absl::StrCat("spec.momentum: ", spec.momentum, " in a ",
                                                   ReductionName(spec.reduction), " phase (only ",
                                                   ReductionName(Reduction::kSketchMomentumError), " has one)"));
  }
  if (spec.auxiliary && (spec.final_phase || spec.reduction != Reduction::kDenseSum || spec.at_previous_indices)) {
    return absl::InvalidArgumentError(
        "spec.auxiliary: an auxiliary phase is a plain dense sum that never ends a round");
  }
  return spec;
}

absl::Status EncodeBody(const PayloadValue& value, v1::Payload* out, ValueEncoding values) {
  // `values` when it is lossless for these values, else binary32.
  auto lossless = [values](const std::vector<float>& v) { return ExactIn(v, values) ? values : ValueEncoding::kF32; };
  return std::visit(
      Overloaded{
          [&](const DenseValues& v) { return EncodeDense(v, lossless(v.values), out->mutable_dense()); },
          [&](const SparseVector& v) {
            return EncodeSparse(v, EncodeOptions{IndexEncoding::kDeltaVarint, lossless(v.val)}, out->mutable_sparse());
          },
          [&](const SketchTable& v) {
            const auto encoding = ExactInHalf(v.table) ? ValueEncoding::kF16 : ValueEncoding::kF32;
            return EncodeSketch(v, encoding, out->mutable_sketch());
          },
          [&](const IndexSet& v) { return EncodeIndexSet(v, IndexEncoding::kDeltaVarint, out->mutable_index_set()); },
      },
      value);
}

absl::StatusOr<std::optional<PayloadValue>> DecodeBody(const v1::Payload& in, std::uint64_t range_len) {
  if (in.body_case() == v1::Payload::BODY_NOT_SET) return std::optional<PayloadValue>();
  DecodeLimits limits = DecodeLimits::ForRange(range_len);
  if (in.body_case() == v1::Payload::kSketch) limits.max_count = kSketchCellsPerElement * range_len;
  SKETCHPS_ASSIGN_OR_RETURN(DecodedPayload decoded, DecodePayload(in, limits));
  return std::optional<PayloadValue>(std::move(decoded.body));
}

}  // namespace sketchps
