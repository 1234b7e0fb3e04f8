"""The rooms' sizes, checked on the source tree: no product file (C++ outside tests/ and bench/) is over
MAX_FILE_LINES lines and no product function over MAX_FUNCTION_LINES (issue 37; docs/design-notes.md,
/work/shared/design/STYLE.md: the hard limits). A function's length is ctags' `end - line + 1` when
Universal Ctags is on the PATH (as the issue measures it), else that of a brace-matching scan that
counts from the line that names the function to its closing brace. A file or function over its limit
fails the test naming the file, the line, the name and the length: split it into named steps or files
by concern."""
import json
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ["common", "kernels", "launch", "engine", "schemes", "ps", "peer", "job", "server", "worker", "tools",
           "sim", "python/src"]
SUFFIXES = {".cc", ".h", ".cu", ".cuh"}
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def product_files() -> list[Path]:
    files = []
    for name in PRODUCT:
        for path in sorted((REPO / name).rglob("*")):
            parts = path.relative_to(REPO).parts
            if path.suffix in SUFFIXES and path.is_file() and "tests" not in parts and "bench" not in parts:
                files.append(path)
    return files


# --- the brace-matching scan --------------------------------------------------------------------

CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b|\bextern\s*$")


def blank_out(text: str) -> str:
    """`text` with comments, string and character literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator (1'000)
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
        i = j
    return "".join(out)


def scan_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of every function body that is not inside another function: a `{`
    whose header (the text since the last `;`, `{` or `}`) holds a `)` and names no namespace, class,
    struct, union or enum. Preprocessor lines are ignored."""
    code = "\n".join("" if line.lstrip().startswith("#") else line for line in blank_out(text).split("\n"))
    found = []
    stack = []  # per open brace: "container", "function" or "block"
    header_start = 0
    inside = 0  # open function bodies
    for i, c in enumerate(code):
        if c == "{":
            header = code[header_start:i]
            if inside:
                kind = "block"
            elif CONTAINER.search(header):
                kind = "container"
            elif ")" in header:
                kind = "function"
                names = re.findall(r"([~\w:]+)\s*\(", header)
                name = names[0] if names else "?"
                first = code.count("\n", 0, header_start + len(header) - len(header.lstrip())) + 1
                stack.append(("function", name, first))
                inside += 1
                header_start = i + 1
                continue
            else:
                kind = "block"
            stack.append((kind, None, None))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, name, first = stack.pop()
                if kind == "function":
                    inside -= 1
                    found.append((name, first, code.count("\n", 0, i) + 1))
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def ctags_functions(files: list[Path]) -> dict[Path, list[tuple[str, int, int]]] | None:
    """ctags' function definitions by file, or None without Universal Ctags."""
    ctags = shutil.which("ctags")
    if ctags is None:
        return None
    run = subprocess.run([ctags, "--languages=C++", "--langmap=C++:+.cu.cuh", "--kinds-C++=f", "--fields=+ne",
                          "--output-format=json", "-f", "-", *map(str, files)],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        return None
    out: dict[Path, list[tuple[str, int, int]]] = {}
    for line in run.stdout.splitlines():
        tag = json.loads(line)
        if "end" in tag:
            out.setdefault(Path(tag["path"]), []).append((tag["name"], tag["line"], tag["end"]))
    return out


def long_functions(files: list[Path]) -> list[str]:
    tags = ctags_functions(files)
    found = []
    for path in files:
        functions = tags.get(path, []) if tags is not None else scan_functions(path.read_text(errors="replace"))
        for name, first, last in functions:
            if last - first + 1 > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(REPO)}:{first}: {name} is {last - first + 1} lines "
                             f"(over {MAX_FUNCTION_LINES})")
    return found


def test_no_product_file_is_over_the_limit():
    found = []
    for path in product_files():
        lines = len(path.read_text(errors="replace").splitlines())
        if lines > MAX_FILE_LINES:
            found.append(f"{path.relative_to(REPO)}: {lines} lines (over {MAX_FILE_LINES})")
    assert not found, "files to split by concern (tests/structure/test_sizes.py):\n" + "\n".join(found)


def test_no_product_function_is_over_the_limit():
    found = long_functions(product_files())
    assert not found, "functions to split into named steps (tests/structure/test_sizes.py):\n" + "\n".join(found)


# --- the checks can fail ---------------------------------------------------------------------------

LONG = "\n".join(["namespace a {", "struct S {", "  int f() const {", "    return 1;", "  }", "};", "",
                  "// a comment { with a brace", "int Long(int x,", "         int y) {",
                  *["  x += y;  // }" for _ in range(MAX_FUNCTION_LINES)], '  const char* s = "}{";',
                  "  auto l = [](int v) { return v; };", "  return l(x);", "}", "", "void Short() {}", "}"])


def test_the_scan_finds_functions_and_their_lengths():
    functions = {name: (first, last) for name, first, last in scan_functions(LONG)}
    assert functions["f"] == (3, 5)
    first, last = functions["Long"]
    assert (first, last) == (9, 9 + MAX_FUNCTION_LINES + 5)
    assert "Short" in functions


def test_a_long_function_fails(tmp_path):
    path = tmp_path / "long.cc"
    path.write_text(LONG)
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        found = long_functions([path])
    finally:
        REPO = saved
    assert len(found) == 1 and "Long is" in found[0], found
