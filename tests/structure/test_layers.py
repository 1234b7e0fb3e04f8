"""The folders' layers, checked on the source tree: a folder includes only folders on floors below its
own, and the lowest product layers (the kernels and the engine) use only the core of common/, not its
YAML reader (common/config) or its gRPC helpers (common/net). docs/design-notes.md "The folders"
draws the same floors. A new folder must be given a floor here; an include that points up fails the
test naming file, line and both floors.

The build enforces the same direction through the libraries' links: each library declares its public
headers, and a build step fails when a target includes a project header that is neither its own nor
public in a library it links (cmake/SketchpsLayers.cmake, cmake/check_includes.py). The last two
tests prove that this check fails, on its own and in a small CMake project built for the purpose."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Lowest first. Folders on one floor do not include each other.
FLOORS = {
    "common": 0,
    "kernels": 1, "launch": 1,
    "engine": 2,
    "schemes": 3, "ps": 3, "peer": 3,
    "job": 4,
    "server": 5, "session": 5,
    "worker": 6,
    "tools": 7, "python/src": 7, "sim": 7,
    "bench": 8,
}
# Parts of common/ a folder must not use (the core of common/ is the files directly in it).
COMMON_PARTS_FORBIDDEN = {
    "kernels": {"config", "net", "wire"},
    "engine": {"config", "net"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(relative: str) -> str | None:
    """The layered folder a repository-relative path belongs to (python/src before python)."""
    for name in sorted(FLOORS, key=len, reverse=True):
        if relative == name or relative.startswith(name + "/"):
            return name
    return None


def common_part(header: str) -> str:
    parts = header.split("/")
    return parts[1] if len(parts) > 2 else "core"


def violations(source: str, lines: list[str]) -> list[str]:
    """The include lines of `source` (repository-relative) that break a rule, as messages."""
    here = folder_of(source)
    if here is None:
        return []
    found = []
    for number, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        there = folder_of(m.group(1))
        if there is None or there == here:
            continue
        if FLOORS[there] >= FLOORS[here]:
            found.append(f"{source}:{number}: {here}/ (floor {FLOORS[here]}) includes {m.group(1)} "
                         f"({there}/, floor {FLOORS[there]})")
        elif there == "common" and common_part(m.group(1)) in COMMON_PARTS_FORBIDDEN.get(here, ()):
            found.append(f"{source}:{number}: {here}/ includes {m.group(1)}: common/{common_part(m.group(1))} "
                         f"is not for {here}/")
    return found


def product_sources():
    for name in FLOORS:
        base = REPO / name
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in (".cc", ".h", ".cu") and "tests" not in path.parts and "build" not in path.parts:
                yield path


def test_no_include_points_up():
    found = []
    for path in product_sources():
        rel = str(path.relative_to(REPO))
        found += violations(rel, path.read_text(errors="replace").splitlines())
    assert not found, "includes against the layers (tests/structure/test_layers.py):\n" + "\n".join(found)


def test_every_product_folder_has_a_floor():
    unplaced = []
    for top in sorted(p for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if top.name in ("build", "tests", "docs", "deploy", "examples", "scripts", "cmake", "proto", "runs"):
            continue
        if top.name == "python":
            continue  # python/src is placed; python/sketchps is Python, checked by the package's tests
        if any(top.rglob("*.cc")) and top.name not in FLOORS:
            unplaced.append(top.name)
    assert not unplaced, f"folders with C++ sources and no floor in FLOORS: {', '.join(unplaced)}"


def test_the_check_can_fail():
    assert violations("engine/x.h", ['#include "schemes/topk.h"'])
    assert violations("engine/x.h", ['#include "common/config/job_span.h"'])
    assert violations("kernels/x.cc", ['#include "common/wire/codec.h"'])
    assert violations("ps/x.cc", ['#include "peer/partial_proto.h"'])  # one floor: siblings
    assert not violations("engine/x.h", ['#include "common/layout.h"', '#include "kernels/sparse.h"'])
    assert not violations("tools/x.cc", ['#include "session/session.h"', '#include "absl/status/status.h"'])
    # session/ sits above both protocols and below the trainer; the Transport interface below all three
    assert not violations("session/x.cc", ['#include "ps/transport.h"', '#include "peer/transport.h"'])
    assert violations("session/x.cc", ['#include "worker/trainer.h"'])
    assert violations("ps/x.cc", ['#include "session/session.h"'])
    assert violations("engine/transport.h", ['#include "ps/client.h"'])
    assert folder_of("python/src/x.cc") == "python/src"


sys.path.insert(0, str(REPO / "cmake"))
import check_includes  # noqa: E402


def test_the_include_check_refuses_a_header_the_target_does_not_link(tmp_path):
    source = tmp_path / "engine" / "x.cc"
    source.parent.mkdir()
    source.write_text('#include "engine/phase.h"\n#include "schemes/registry.h"\n#include <vector>\n')
    spec = {"target": "sketchps_engine", "root": str(REPO), "files": [str(source)],
            "visible": ["engine/phase.h", "kernels/sparse.h", "common/layout.h"],
            "owners": {"schemes/registry.h": "sketchps_schemes"}}
    found = check_includes.violations(spec)
    assert len(found) == 1 and "x.cc:2" in found[0] and "sketchps_schemes" in found[0], found
    spec["visible"].append("schemes/registry.h")
    assert not check_includes.violations(spec)


PROOF_CMAKE = """cmake_minimum_required(VERSION 3.25)
project(layers_proof LANGUAGES CXX)
include({layers})
add_library(low STATIC low/low.cc)
target_include_directories(low PUBLIC ${{PROJECT_SOURCE_DIR}})
sketchps_declare_headers(low PUBLIC low/low.h)
add_library(high STATIC high/high.cc)
target_link_libraries(high PUBLIC low)
sketchps_declare_headers(high PUBLIC high/high.h)
sketchps_check_layers()
"""


def test_the_build_fails_when_a_lower_library_includes_a_higher_one(tmp_path):
    cmake = shutil.which("cmake")
    assert cmake, "cmake is needed to build the proof project"
    src, build = tmp_path / "src", tmp_path / "build"
    for folder in ("low", "high"):
        (src / folder).mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(PROOF_CMAKE.format(layers=REPO / "cmake" / "SketchpsLayers.cmake"))
    (src / "low" / "low.h").write_text("int Low();\n")
    (src / "high" / "high.h").write_text('#include "low/low.h"\nint High();\n')
    (src / "high" / "high.cc").write_text('#include "high/high.h"\nint High() { return Low() + 1; }\n')
    # low/ includes high/, which it does not link: the build stops before compiling it.
    (src / "low" / "low.cc").write_text('#include "low/low.h"\n#include "high/high.h"\nint Low() { return 1; }\n')
    subprocess.run([cmake, "-S", src, "-B", build], check=True, capture_output=True)
    failed = subprocess.run([cmake, "--build", build], capture_output=True, text=True)
    assert failed.returncode != 0, failed.stdout
    assert "low includes high/high.h: a header of high, which low does not link" in failed.stdout + failed.stderr
    # Without the upward include, the same project builds.
    (src / "low" / "low.cc").write_text('#include "low/low.h"\nint Low() { return 1; }\n')
    built = subprocess.run([cmake, "--build", build], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
