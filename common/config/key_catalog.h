// KeyCatalog: which keys the job-spec readers ask for, so that the key reference (docs/job-spec.md)
// can be checked against the code (tests/job/job_spec_doc_test.cc).
//
//   KeyCatalog catalog;                        // records on this thread while it lives
//   LoadJobSpecFromString(yaml, {});           // every ConfigReader::Get/Has records its key
//   catalog.keys();                            // "optimizer.lr" -> "0.05", "optimizer.warmup" -> nullopt
//
// A key's default is the value the reader holds before reading (what an absent key keeps), as text,
// for booleans, numbers, strings and lists of them; nullopt for others (spans) and for Has().
// Keys inside list items are not recorded. Catalogs do not nest; without one nothing is recorded.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace sketchps {

class KeyCatalog {
 public:
  KeyCatalog();
  ~KeyCatalog();
  KeyCatalog(const KeyCatalog&) = delete;
  KeyCatalog& operator=(const KeyCatalog&) = delete;

  const std::map<std::string, std::optional<std::string>>& keys() const { return keys_; }

  // Called by ConfigReader: no-op unless a catalog is alive on this thread. The first default
  // recorded for a key stays.
  static void Record(const std::string& path, std::optional<std::string> default_text);

 private:
  std::map<std::string, std::optional<std::string>> keys_;
};

}  // namespace sketchps
