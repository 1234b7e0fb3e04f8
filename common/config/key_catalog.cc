#include "common/config/key_catalog.h"

namespace sketchps {
namespace {
thread_local KeyCatalog* active = nullptr;
}  // namespace

KeyCatalog::KeyCatalog() { active = this; }

KeyCatalog::~KeyCatalog() { active = nullptr; }

void KeyCatalog::Record(const std::string& path, std::optional<std::string> default_text) {
  if (active == nullptr || path.find('[') != std::string::npos) return;
  auto [it, inserted] = active->keys_.emplace(path, std::move(default_text));
  if (!inserted && !it->second) it->second = std::move(default_text);
}

}  // namespace sketchps
