"""Every Note and spec section named in the code or the spec exists (no stale reference).

A Note is cited as `Note [Name]` and defined where a line starts with it
(`Note [Name]:` in a docstring or comment, `### Note [Name]` or `**Note [Name]**` in spec/).
A section is cited as `spec/file.md, "Title"` (or, inside spec/file.md, `"Title" below`
or `above`) and exists when spec/file.md has a heading or a bold lead-in (`- **Title**`)
starting with that title.  A Note cited with its file (`Note [Name] in refcomp/x.py`,
`(Note [Name], refcomp/x.py)`) is defined in that file, and every repository path named
(`refcomp/x.py`, `spec/x.md`, `tests/x/y.rir`) exists.  Citations may wrap across comment
lines.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("refcomp", "ir", "codegen", "spec", "tests", "bench")
CITED_NOTE = re.compile(r"Note \[([^\]]+)\]")
DEFINED_NOTE = re.compile(
    r"^\s*(?:#+\s*|\"\"\"|[-*]\s*)?(?:\*\*)?Note \[([^\]]+)\](?:\*\*)?\s*(?:[:.(]|$)", re.M)
# spec/x.md, "Title" / spec/x.md ("Title") / spec/x.md's table "Title", and the same with
# single quotes or with the escaped quotes of a Python string.
CITED_SECTION = re.compile(r"""spec/([a-z_]+\.md)(?:'s table)?,? \(?\\?["']([^"'\\]+)\\?["']""")
CITED_HERE = re.compile(r'"([^"]{3,80})"\)? (?:below|above)')
CITED_NOTE_IN = re.compile(r"Note \[([^\]]+)\]\)?(?:,| in| \(|\s)\s*`?"
                           r"((?:refcomp|ir|codegen|tests|bench)/[\w/]+\.py)")
PATH = re.compile(r"(?<![\w/.])((?:refcomp|ir|codegen|tests|bench|spec)/[\w/]+\.(?:py|md|rir))")
ANCHOR = re.compile(r"^(?:#+\s*(.+?)\s*$|\s*(?:[-*]\s+)?\*\*(.+?)\*\*)", re.M)


def _texts():
    paths = [p for d in SOURCES for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".md")]
    for path in paths + [ROOT / "README.md"]:
        if path.name != Path(__file__).name:
            yield path.relative_to(ROOT), path.read_text()


def _flat(text):
    """The text with comment continuations and line breaks folded into single spaces."""
    return re.sub(r"\s+", " ", re.sub(r"\n\s*#\s*", " ", text))


def _anchors():
    anchors = {}
    for path in (ROOT / "spec").glob("*.md"):
        found = anchors.setdefault(path.name, set())
        for m in ANCHOR.finditer(path.read_text()):
            found.add((m.group(1) or m.group(2)).strip().rstrip(".:"))
    return anchors


def test_every_cited_note_is_defined():
    cited, defined = {}, set()
    for path, text in _texts():
        for m in CITED_NOTE.finditer(_flat(text)):
            cited.setdefault(m.group(1), set()).add(str(path))
        defined.update(" ".join(m.group(1).split()) for m in DEFINED_NOTE.finditer(text))
    stale = {name: sorted(where) for name, where in cited.items() if name not in defined}
    assert stale == {}


def test_every_cited_spec_section_exists():
    anchors, stale = _anchors(), {}
    for path, text in _texts():
        for m in CITED_SECTION.finditer(_flat(text)):
            file, title = m.groups()
            if not any(a.startswith(title) for a in anchors.get(file, ())):
                stale.setdefault(f"{file}: {title}", set()).add(str(path))
    assert stale == {}


def test_every_note_cited_with_its_file_is_defined_there():
    defined, stale = {}, {}
    texts = list(_texts())
    for path, text in texts:
        for m in DEFINED_NOTE.finditer(text):
            defined.setdefault(" ".join(m.group(1).split()), set()).add(str(path))
    for path, text in texts:
        for m in CITED_NOTE_IN.finditer(_flat(text)):
            name, file = m.groups()
            if name in defined and file not in defined[name]:
                stale.setdefault(f"Note [{name}] in {file}", set()).add(str(path))
    assert stale == {}


def test_every_section_cited_within_the_spec_exists():
    anchors, stale = _anchors(), {}
    for path, text in _texts():
        if path.parts[0] == "spec":
            for m in CITED_HERE.finditer(_flat(text)):
                if not any(a.startswith(m.group(1)) for a in anchors[path.name]):
                    stale.setdefault(f"{path.name}: {m.group(1)}", set()).add(str(path))
    assert stale == {}


def test_every_named_path_exists():
    stale = {}
    for path, text in _texts():
        for m in PATH.finditer(text):
            if not (ROOT / m.group(1)).exists():
                stale.setdefault(m.group(1), set()).add(str(path))
    assert stale == {}


def test_the_checks_can_fail():
    """A made-up citation is caught by both patterns (the checks are not vacuous)."""
    text = 'see Note [No such note] and spec/tracer.md, "No such section"'
    assert CITED_NOTE.findall(text) == ["No such note"]
    assert CITED_SECTION.findall(text) == [("tracer.md", "No such section")]
    for form in ('spec/tracer.md ("No such section")', "spec/tracer.md, 'No such section'",
                 'spec/tracer.md, \\"No such section\\"', 'spec/tracer.md\'s table "No such section"'):
        assert CITED_SECTION.findall(form) == [("tracer.md", "No such section")], form
    assert not any(a.startswith("No such section") for a in _anchors()["tracer.md"])
    assert CITED_HERE.findall('("No such section" below)') == ["No such section"]
    assert CITED_NOTE_IN.findall("Note [X] in refcomp/api.py") == [("X", "refcomp/api.py")]
    assert PATH.findall("see refcomp/no_such_module.py") == ["refcomp/no_such_module.py"]
