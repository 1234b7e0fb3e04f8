// oversize_probe: how much memory a gRPC 1.51 server holds for messages above its limit.
//
//   oversize_probe serve --port-file F [--max-message N] [--lookahead N] [--bdp 0|1] [--quota N]
//                        [--frame N] [--streams N] [--arg:grpc.channel_arg N]...
//       A server with a generic service (any method; it reads the request and answers OK) and the
//       given channel arguments, on 127.0.0.1:0; writes its port to F.
//   oversize_probe push --target HOST:PORT --bytes N [--calls K] [--connections C] [--method M]
//       K concurrent unary calls of an N-byte body over C separate connections; prints each status.
//
// deploy/security/measure_oversize.sh builds it (pkg-config grpc++) and reads the server's VmHWM
// and VmRSS around the pushes; the same `push` mode also drives a real sketchps-server.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

namespace {

std::map<std::string, std::string> Flags(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 2; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  return flags;
}

long Get(const std::map<std::string, std::string>& flags, const std::string& name, long fallback) {
  const auto it = flags.find(name);
  return it == flags.end() ? fallback : std::atol(it->second.c_str());
}

class Echo : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&request_); }
      void OnReadDone(bool) override { Finish(grpc::Status::OK); }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer request_;
    };
    return new Reactor;
  }
};

int Serve(const std::map<std::string, std::string>& flags) {
  Echo service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(Get(flags, "--max-message", 97536)));
  if (flags.count("--lookahead"))
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, static_cast<int>(Get(flags, "--lookahead", 0)));
  if (flags.count("--bdp"))
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, static_cast<int>(Get(flags, "--bdp", 1)));
  if (flags.count("--frame"))
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, static_cast<int>(Get(flags, "--frame", 16384)));
  for (const auto& [name, value] : flags) {  // --arg:grpc.some_arg N: any integer channel argument
    if (name.rfind("--arg:", 0) == 0) builder.AddChannelArgument(name.substr(6), std::atoi(value.c_str()));
  }
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(Get(flags, "--streams", 256)));
  if (const long quota = Get(flags, "--quota", 0); quota > 0) {
    grpc::ResourceQuota q("probe");
    q.Resize(static_cast<std::size_t>(quota));
    builder.SetResourceQuota(q);
  }
  auto server = builder.BuildAndStart();
  if (!server || port == 0) return 1;
  {
    std::ofstream out(flags.at("--port-file") + ".tmp");
    out << port << "\n";
  }
  std::rename((flags.at("--port-file") + ".tmp").c_str(), flags.at("--port-file").c_str());
  server->Wait();
  return 0;
}

int Push(const std::map<std::string, std::string>& flags) {
  const std::string target = flags.at("--target");
  const std::size_t bytes = static_cast<std::size_t>(Get(flags, "--bytes", 64 << 20));
  const int calls = static_cast<int>(Get(flags, "--calls", 1));
  const int connections = static_cast<int>(Get(flags, "--connections", 1));
  const std::string method = flags.count("--method") ? flags.at("--method") : "/sketchps.v1.ParameterServer/PushPull";
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  for (int c = 0; c < connections; ++c) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per channel
    args.SetInt("probe.channel", c);
    stubs.push_back(std::make_unique<grpc::GenericStub>(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  grpc::Slice body(bytes);  // one shared, uninitialised buffer: the client holds it once
  std::vector<std::promise<grpc::Status>> done(calls);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::ByteBuffer> requests(calls), responses(calls);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() +
                                  std::chrono::seconds(Get(flags, "--deadline", 60)));
    contexts.back()->set_wait_for_ready(true);
    requests[i] = grpc::ByteBuffer(&body, 1);
    stubs[i % connections]->UnaryCall(contexts.back().get(), method, grpc::StubOptions(), &requests[i], &responses[i],
                                      [&done, i](grpc::Status s) { done[i].set_value(s); });
  }
  for (int i = 0; i < calls; ++i) {
    const grpc::Status s = done[i].get_future().get();
    std::printf("call %d: code %d (%s)\n", i, static_cast<int>(s.error_code()), s.error_message().c_str());
  }
  std::printf("elapsed %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve") return Serve(Flags(argc, argv));
  if (mode == "push") return Push(Flags(argc, argv));
  std::fprintf(stderr, "usage: oversize_probe serve|push [--flag value]...\n");
  return 2;
}
