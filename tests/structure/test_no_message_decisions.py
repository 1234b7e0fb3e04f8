"""No decision reads an error's words: recovery, exit codes and exception classes follow a status's
code and its Reason (common/reason.h), never its message. This scans the product code for the
shapes such a decision takes (a substring test, a comparison, a regex or a find on a message) and
fails naming file and line. The rewording tests (tests/CMakeLists.txt, SKETCHPS_TEST_REWORD_ERRORS)
show the behaviour is unchanged when every message is reworded."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ["common", "kernels", "engine", "schemes", "job", "peer", "ps", "server", "worker", "tools", "launch",
           "python/src", "python/sketchps", "bench"]

# A message of a status or an exception inside a test: StrContains(x.message(), ...),
# x.message().find(...), x.message() == "...", regex over it, `"..." in str(e)`.
CPP_SHAPES = [
    re.compile(r"StrContains\([^;]*(error_)?message\(\)"),
    re.compile(r"(StartsWith|EndsWith)\([^;]*(error_)?message\(\)"),
    re.compile(r"(error_)?message\(\)\s*\.\s*(find|rfind|starts_with|ends_with|contains)\("),
    re.compile(r"(error_)?message\(\)\s*[!=]=\s*\""),
    re.compile(r"regex_(search|match)\([^;]*(error_)?message\(\)"),
]
PY_SHAPES = [
    re.compile(r"\bin\s+str\(\s*(e|err|exc|error|ex)\s*\)"),
    re.compile(r"str\(\s*(e|err|exc|error|ex)\s*\)\s*(==|!=|\.startswith|\.endswith|\.find)"),
    re.compile(r"re\.(search|match)\([^)]*str\(\s*(e|err|exc|error|ex)\s*\)"),
]


def sources():
    for top in PRODUCT:
        base = REPO / top
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in (".cc", ".h", ".py") and "tests" not in path.parts:
                yield path


def test_no_decision_reads_a_message():
    found = []
    for path in sources():
        shapes = PY_SHAPES if path.suffix == ".py" else CPP_SHAPES
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(s.search(line) for s in shapes):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "decisions on message text (use a Reason, common/reason.h):\n" + "\n".join(found)


def test_the_scan_sees_the_shapes_it_looks_for():
    """The scanner must be able to fail: each shape matches a line that decides on a message."""
    cpp = ['if (absl::StrContains(status.message(), "join again")) {',
           'return s.message().find("replica") != std::string::npos;',
           'if (st.message() == "busy") retry();',
           'bool t = std::regex_search(std::string(status.error_message()), re);']
    py = ['if "replica" in str(e):', 'if str(exc).startswith("layout"):']
    for line in cpp:
        assert any(s.search(line) for s in CPP_SHAPES), line
    for line in py:
        assert any(s.search(line) for s in PY_SHAPES), line
    assert not any(s.search('spdlog::error("{}", std::string(status.message()));') for s in CPP_SHAPES)
