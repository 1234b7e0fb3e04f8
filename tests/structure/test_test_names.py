"""Catch test case names hold no ';', '[' or ']': CMake's test discovery splits names at ';' and joins
them across an unclosed '[' (tests/CMakeLists.txt), and tests/test_main.cc refuses to run a binary
holding such a name. That refusal also answers Catch's listing, so the binary's whole suite would be
discovered as empty and silently left out of every lane: the common suite's 90 cases were, from
2026-11-29 to 2026-11-30, because of one ';'. Checked on the sources: every TEST_CASE,
TEST_CASE_METHOD and SCENARIO name under tests/ (adjacent string literals joined). A hit fails the
test naming file, line and name."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LITERALS = r'((?:"(?:[^"\\\n]|\\.)*"\s*)+)'
CASE = re.compile(r"\b(?:TEST_CASE|SCENARIO)\s*\(\s*" + LITERALS + r"|\bTEST_CASE_METHOD\s*\(\s*[\w:]+\s*,\s*" + LITERALS)
PART = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def names(text: str) -> list[tuple[int, str]]:
    """(line, name) of every test case declared in `text`."""
    found = []
    for m in CASE.finditer(text):
        literal = m.group(1) or m.group(2)
        found.append((text.count("\n", 0, m.start()) + 1, "".join(PART.findall(literal))))
    return found


def test_the_scan_finds_names_and_joined_literals():
    text = 'TEST_CASE("a, b", "[x]") {}\nTEST_CASE("one; "\n          "two", "[y]") {}\nSCENARIO("c[1]") {}\n'
    assert names(text) == [(1, "a, b"), (2, "one; two"), (4, "c[1]")]
    assert names('TEST_CASE_METHOD(Fixture, "f]", "[z]") {}') == [(1, "f]")]


def test_no_test_case_name_holds_a_character_discovery_mangles():
    bad, count = [], 0
    for path in sorted((REPO / "tests").rglob("*.cc")):
        for line, name in names(path.read_text(errors="replace")):
            count += 1
            if re.search(r"[;\[\]]", name):
                bad.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert count > 500, f"found only {count} test cases under tests/: the scan is broken"
    assert not bad, "test case names with ';', '[' or ']':\n" + "\n".join(bad)
