#include "ps/service.h"

#include <chrono>
#include <memory>

#include <grpcpp/alarm.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/net/grpc_edge.h"
#include "common/status.h"

namespace sketchps::ps {
namespace {

// Parses the raw request; INVALID_ARGUMENT naming the message when the bytes are not one.
template <class Request>
absl::StatusOr<Request> Parse(const grpc::ByteBuffer* raw) {
  grpc::ByteBuffer copy(*raw);  // Deserialize consumes its buffer; the slices are shared, not copied
  Request request;
  const std::size_t bytes = raw->Length();
  if (!grpc::SerializationTraits<Request>::Deserialize(&copy, &request).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: ", bytes, " bytes do not parse as ", Request::descriptor()->full_name()));
  }
  return request;
}

// One unary call that is finished exactly once: by its result, or by an alarm at its deadline.
template <class Response>
class OnceCall : public std::enable_shared_from_this<OnceCall<Response>> {
 public:
  OnceCall(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* response) : reactor_(reactor), response_(response) {}

  // Arms the alarm: at `deadline` the call ends with DEADLINE_EXCEEDED and `why()` as its message.
  void ArmDeadline(absl::Time deadline, std::function<std::string()> why) {
    alarm_.Set(absl::ToChronoTime(deadline), [self = this->shared_from_this(), why = std::move(why)](bool fired) {
      if (fired) self->Finish(absl::DeadlineExceededError(why()), /*from_alarm=*/true);
    });
  }

  void Finish(absl::StatusOr<Response> result, bool from_alarm = false) {
    grpc::ServerUnaryReactor* reactor = nullptr;
    grpc::Status status = ToGrpcStatus(result.status());
    {
      absl::MutexLock lock(&mu_);
      std::swap(reactor, reactor_);
      if (reactor == nullptr) return;  // already finished
      bool own = false;
      if (result.ok()) status = grpc::SerializationTraits<Response>::Serialize(*result, response_, &own);
    }
    if (!from_alarm) alarm_.Cancel();
    reactor->Finish(status);
  }

 private:
  absl::Mutex mu_;
  grpc::ServerUnaryReactor* reactor_ ABSL_GUARDED_BY(mu_);  // null once finished
  grpc::ByteBuffer* const response_;
  grpc::Alarm alarm_;
};

// When the server answers a call that is still waiting: after max_wait, and a little before the
// client's own deadline (a tenth of the time left, at most 1 s), so that the client receives the
// server's account of what it waits for instead of a bare DEADLINE_EXCEEDED of its own.
absl::Time Deadline(const grpc::CallbackServerContext* ctx, absl::Duration max_wait) {
  const absl::Time now = absl::Now();
  const absl::Time bound = now + max_wait;
  const auto deadline = ctx->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return bound;
  const absl::Time client = absl::FromChrono(deadline);
  return std::min(bound, client - std::min(absl::Seconds(1), (client - now) / 10));
}

}  // namespace

absl::StatusOr<std::optional<Identity>> ParameterServerService::Caller(const grpc::CallbackServerContext& ctx) const {
  SKETCHPS_ASSIGN_OR_RETURN(auto caller, CallerIdentity(ctx));
  if (require_identity_ && !caller) {
    return absl::UnauthenticatedError(
        "this server requires TLS with a client certificate (this port serves health checks only)");
  }
  return caller;
}

grpc::ServerUnaryReactor* ParameterServerService::Join(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
                                                       grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto call = std::make_shared<OnceCall<v1::JoinResponse>>(reactor, response);
  auto caller = Caller(*ctx);
  auto request = Parse<v1::JoinRequest>(raw);
  if (!caller.ok() || !request.ok()) {
    call->Finish(caller.ok() ? request.status() : caller.status());
    return reactor;
  }
  call->ArmDeadline(Deadline(ctx, max_wait_),
                    [this] { return absl::StrCat("Join not answered in time: ", host_.AssemblyStatus()); });
  host_.Join(*request, *caller, [call](absl::StatusOr<v1::JoinResponse> r) { call->Finish(std::move(r)); });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushPull(grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* raw, grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto call = std::make_shared<OnceCall<v1::PushPullResponse>>(reactor, response);
  auto caller = Caller(*ctx);
  auto request = Parse<v1::PushPullRequest>(raw);
  if (!caller.ok() || !request.ok()) {
    call->Finish(caller.ok() ? request.status() : caller.status());
    return reactor;
  }
  const auto& h = request->payload().header();
  call->ArmDeadline(Deadline(ctx, max_wait_), [this, round = h.round(), phase = h.phase()] {
    return absl::StrCat(host_.WaitingFor(round, phase), " (retry: pushes are idempotent)");
  });
  host_.PushPull(*request, *caller, [call](absl::StatusOr<v1::PushPullResponse> r) { call->Finish(std::move(r)); });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::GetWeights(grpc::CallbackServerContext* ctx,
                                                             const grpc::ByteBuffer* raw, grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto call = std::make_shared<OnceCall<v1::GetWeightsResponse>>(reactor, response);
  auto caller = Caller(*ctx);
  auto request = Parse<v1::GetWeightsRequest>(raw);
  if (!caller.ok() || !request.ok()) {
    call->Finish(caller.ok() ? request.status() : caller.status());
    return reactor;
  }
  call->Finish(host_.GetWeights(*request, *caller));
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Leave(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw,
                                                        grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto call = std::make_shared<OnceCall<v1::LeaveResponse>>(reactor, response);
  auto caller = Caller(*ctx);
  auto request = Parse<v1::LeaveRequest>(raw);
  if (!caller.ok() || !request.ok()) {
    call->Finish(caller.ok() ? request.status() : caller.status());
    return reactor;
  }
  call->Finish(host_.Leave(*request, *caller));
  return reactor;
}

}  // namespace sketchps::ps
