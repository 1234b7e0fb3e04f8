#include "common/config/cli.h"

#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>
#include <ctime>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace sketchps {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace

void AddJobFlags(CLI::App& app, JobFlags& flags) {
  app.add_option("--job", flags.job_path, "Job spec YAML (empty: the embedded default job)")->envname("SKETCHPS_JOB");
  // One value per --set, so that `--set k=v -- ARGS` hands ARGS on rather than ending a list at `--`.
  app.add_option("--set", flags.overrides, "Override a job-spec key, e.g. --set scheme.density=0.01 (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn or error")
      ->envname("SKETCHPS_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
}

void AddTlsFlags(CLI::App& app, TlsFlags& flags) {
  app.add_option("--tls-dir", flags.dir, "Folder of the job's certificates made by `sketchps certs` (mutual TLS)")
      ->envname("SKETCHPS_TLS_DIR");
  app.add_flag("--insecure", flags.insecure, "Plaintext without identities (only on a trusted network)")
      ->envname("SKETCHPS_INSECURE");
}

absl::StatusOr<TlsConfig> ResolveTls(const TlsFlags& flags, const Identity& self) {
  if (flags.insecure && !flags.dir.empty()) {
    return absl::InvalidArgumentError("--tls-dir / --insecure: give one of them, not both");
  }
  if (flags.insecure) return TlsConfig{true, "", "", ""};
  if (flags.dir.empty()) {
    return absl::InvalidArgumentError(
        "--tls-dir: no certificates given (make them with `sketchps certs`), "
        "or pass --insecure to run without TLS on a trusted network");
  }
  return TlsConfig::FromDir(flags.dir, self);
}

void ConfigureLogging(const JobFlags& flags, const std::string& process_name) {
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [" + process_name + "] %v");
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<std::uint32_t>> EnvUint32(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::optional<std::uint32_t>();
  std::uint32_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || std::string(v) != std::to_string(n)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": '", v, "' is not a non-negative integer"));
  }
  return std::optional<std::uint32_t>(n);
}

std::uint64_t RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string WaitForTerminationSignal() {
  const sigset_t set = TerminationSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return SignalName(sig);
}

std::string PendingTerminationSignal() {
  const sigset_t set = TerminationSignals();
  timespec zero{0, 0};
  const int sig = sigtimedwait(&set, nullptr, &zero);
  return sig > 0 ? SignalName(sig) : "";
}

int TerminationExitCode(const std::string& signal_name) {
  if (signal_name == "SIGTERM") return 128 + SIGTERM;
  if (signal_name == "SIGINT") return 128 + SIGINT;
  if (signal_name == "SIGHUP") return 128 + SIGHUP;
  return 1;
}

absl::StatusOr<std::vector<std::string>> ServerAddresses(const std::string& flag, std::uint32_t servers) {
  std::vector<std::string> out = absl::StrSplit(flag, ',', absl::SkipEmpty());
  if (out.size() == 1 && absl::StrContains(out[0], "{shard}")) {
    const std::string pattern = out[0];
    out.clear();
    for (std::uint32_t s = 0; s < servers; ++s)
      out.push_back(absl::StrReplaceAll(pattern, {{"{shard}", absl::StrCat(s)}}));
  }
  if (out.size() != servers) {
    return absl::InvalidArgumentError(absl::StrCat("--servers: ", out.size(), " addresses for a job with servers: ",
                                                   servers, " (give one per shard, or one with {shard} in it)"));
  }
  return out;
}

}  // namespace sketchps
