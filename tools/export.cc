#include "tools/export.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sketchps::tools {

int ExportModel(const ScriptOptions& python, const std::vector<std::string>& args) {
  std::vector<std::string> argv{python.python, "-m", "sketchps.export"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  if (const std::string path = PackagePythonPath(python); !path.empty()) setenv("PYTHONPATH", path.c_str(), 1);
  execv(python.python.c_str(), raw.data());
  std::fprintf(stderr, "sketchps export: cannot run %s: %s\n", python.python.c_str(), std::strerror(errno));
  return 2;
}

}  // namespace sketchps::tools
