"""swzc.rewrite.edits (byte-range edits) and swzc.rewrite.patch (unified patches that `git apply` must accept)."""

import os
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swzc.rewrite.edits import Edit, apply_edits, overlapping, rewrite
from swzc.core.errors import ExitCode, SwzcError
from swzc.rewrite.patch import check_patch, header_path, patch_from_edits, patch_path, unified_patch
from swzc.frontend.source import load_bytes

DATA = b"0123456789"


# ---- edits ---------------------------------------------------------------------------------------------


def test_edits_apply_back_to_front_against_original_offsets():
    # Every offset refers to the original bytes, whatever the other edits do to the length.
    edits = [Edit.replace(0, 1, "AAA"), Edit.insert(5, "--"), Edit.replace(8, 10, "Z")]
    assert apply_edits(DATA, edits) == b"AAA1234--567Z"
    assert apply_edits(DATA, list(reversed(edits))) == b"AAA1234--567Z"  # order given does not matter


def test_no_edits_is_identity():
    assert apply_edits(DATA, []) == DATA


def test_delete_and_append():
    assert apply_edits(DATA, [Edit(2, 4, b""), Edit.insert(10, "!")]) == b"01456789!"


def test_insertion_touching_a_replacement_is_allowed():
    assert apply_edits(DATA, [Edit.insert(3, "x"), Edit.replace(3, 5, "Y")]) == b"012xY56789"
    assert apply_edits(DATA, [Edit.replace(3, 5, "Y"), Edit.insert(5, "x")]) == b"012Yx56789"
    assert apply_edits(DATA, [Edit.replace(1, 3, "a"), Edit.replace(3, 5, "b")]) == b"0ab56789"


@pytest.mark.parametrize(
    "edits",
    [
        [Edit.replace(2, 5, "a"), Edit.replace(4, 6, "b")],  # partial overlap
        [Edit.replace(2, 8, "a"), Edit.replace(3, 4, "b")],  # nested
        [Edit.replace(2, 5, "a"), Edit.replace(2, 5, "a")],  # the same edit twice
        [Edit.replace(2, 5, "a"), Edit.insert(4, "b")],  # insertion strictly inside a replacement
        [Edit.insert(3, "a"), Edit.insert(3, "b")],  # two insertions at one point: order would be arbitrary
        [Edit.replace(0, 9, "a"), Edit.insert(7, "c"), Edit.replace(9, 10, "d")],  # one clash among three edits
    ],
    ids=["partial", "nested", "duplicate", "insert-inside", "two-inserts", "among-three"],
)
def test_overlapping_edits_are_refused(edits):
    assert overlapping(edits) is not None
    with pytest.raises(SwzcError) as info:
        apply_edits(DATA, edits)
    assert info.value.code == ExitCode.CHECK_FAILED == 3
    assert "overlapping" in info.value.message


def test_non_overlapping_edits_are_not_reported():
    assert overlapping([Edit.replace(0, 2, "a"), Edit.insert(2, "b"), Edit.replace(2, 3, "c")]) is None


def test_edit_past_the_end_is_refused():
    with pytest.raises(SwzcError) as info:
        apply_edits(DATA, [Edit.replace(8, 11, "x")])
    assert info.value.code == ExitCode.CHECK_FAILED


@pytest.mark.parametrize("start, end", [(5, 3), (-1, 2), (-2, -1)])
def test_bad_edit_range_is_a_value_error(start, end):
    with pytest.raises(ValueError):
        Edit(start, end, b"")


def test_edit_text_keeps_surrogate_escaped_bytes():
    text = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert Edit.insert(0, text).text == b"caf\xe9"
    assert Edit.replace(0, 1, "\u00e9").text == "\u00e9".encode()


def test_rewrite_reparses_the_result():
    src = load_bytes("k.cu", b"__global__ void k(int* p) { p[blockIdx.x] = 1; }\n")
    at = src.data.index(b"blockIdx.x")
    out = rewrite(src, [Edit.replace(at, at + len("blockIdx.x"), "blockIdx.y")])
    assert out.data == b"__global__ void k(int* p) { p[blockIdx.y] = 1; }\n"
    assert out.path == "k.cu" and not out.tree.root_node.has_error
    assert src.data.count(b"blockIdx.x") == 1  # the original is untouched


def test_rewrite_that_breaks_the_syntax_is_refused():
    src = load_bytes("k.cu", b"__global__ void k(int* p) {\n  p[0] = 1;\n}\n")
    at = src.data.index(b"p[0]")
    with pytest.raises(SwzcError) as info:
        rewrite(src, [Edit.insert(at, "}}}(")])
    assert info.value.code == ExitCode.CHECK_FAILED
    assert "k.cu" in info.value.message and "line 2" in info.value.message


# ---- unified_patch ---------------------------------------------------------------------------------------------


def test_no_change_is_the_empty_string():
    assert unified_patch("x.cu", b"a\nb\n", b"a\nb\n") == ""
    assert unified_patch("x.cu", b"", b"") == ""


def test_headers_and_hunk():
    patch = unified_patch("src/x.cu", b"a\nb\nc\n", b"a\nB\nc\n")
    assert patch == "--- a/src/x.cu\n+++ b/src/x.cu\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"


def test_last_line_without_newline_is_marked():
    patch = unified_patch("x.cu", b"a\nb\nc", b"a\nB\nc")
    assert patch.endswith(" c\n\\ No newline at end of file\n")
    assert patch.count("\\ No newline at end of file") == 1


def test_adding_the_final_newline():
    patch = unified_patch("x.cu", b"a\nb\nc", b"a\nb\nc\n")
    assert "-c\n\\ No newline at end of file\n+c\n" in patch


def test_crlf_lines_are_kept():
    patch = unified_patch("x.cu", b"a\r\nb\r\nc\r\n", b"a\r\nB\r\nc\r\n")
    assert "-b\r\n+B\r\n" in patch
    assert patch.startswith("--- a/x.cu\n+++ b/x.cu\n")  # headers are plain LF


def test_latin1_bytes_round_trip():
    old = b"// caf\xe9 au lait\nint b;\n"
    new = b"// caf\xe9 au lait\nint B;\n"
    patch = unified_patch("x.cu", old, new)
    raw = patch.encode("utf-8", "surrogateescape")
    assert b" // caf\xe9 au lait\n-int b;\n+int B;\n" in raw


def test_patch_path_relative_to_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert patch_path(str(tmp_path / "sub" / "k.cu")) == "sub/k.cu"
    assert patch_path("./sub/../k.cu") == "k.cu"
    assert patch_path("/somewhere/else/entirely/k.cu") == "k.cu"


# ---- check_patch -------------------------------------------------------------------------------------------------


def test_check_patch_accepts_its_own_patch():
    old, new = b"a\nb\nc\n", b"a\nB\nc\n"
    check_patch(unified_patch("x.cu", old, new), old, new)


@pytest.mark.parametrize("text", ["the kernel was rewritten, trust me", "", "--- a/x.cu\n+++ b/x.cu\n"],
                         ids=["prose", "empty", "headers-only"])
def test_check_patch_rejects_text_without_hunks(text):
    with pytest.raises(SwzcError) as info:
        check_patch(text, b"a\nb\n", b"a\nB\n")
    assert info.value.code == ExitCode.CHECK_FAILED


def test_check_patch_rejects_mismatched_context():
    old, new = b"a\nb\nc\n", b"a\nB\nc\n"
    patch = unified_patch("x.cu", old, new)
    with pytest.raises(SwzcError) as info:
        check_patch(patch, b"a\nq\nc\n", new)  # the removed line is not what the file holds
    assert "context does not match" in info.value.message
    with pytest.raises(SwzcError):
        check_patch(patch.replace(" a\n", " z\n"), old, new)  # a context line is wrong


def test_check_patch_rejects_a_patch_that_does_not_give_the_new_file():
    old = b"a\nb\nc\n"
    patch = unified_patch("x.cu", old, b"a\nB\nc\n")
    with pytest.raises(SwzcError) as info:
        check_patch(patch, old, b"a\nX\nc\n")
    assert "does not reproduce" in info.value.message


def test_check_patch_rejects_two_files():
    one = unified_patch("x.cu", b"a\n", b"b\n")
    two = one + unified_patch("y.cu", b"a\n", b"b\n")
    with pytest.raises(SwzcError):
        check_patch(two, b"a\n", b"b\n")


# ---- git apply -----------------------------------------------------------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")


def git_apply(tmp_path, name: str, old: bytes, patch: str) -> bytes:
    """Apply `patch` with `git apply` in a fresh repository holding `old` as `name`; return the file after."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, env=env)
    (repo / name).write_bytes(old)
    (repo / "p.diff").write_bytes(patch.encode("utf-8", "surrogateescape"))
    run = subprocess.run(["git", "apply", "p.diff"], cwd=repo, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    return (repo / name).read_bytes()


GIT_CASES = {
    "plain": (b"int a;\nint b;\nint c;\n", b"int a;\nint B;\nint c;\n"),
    "no-newline-both": (b"a\nb\nc", b"a\nB\nc"),
    "no-newline-last-line-changed": (b"a\nb\nc", b"a\nb\nC"),
    "newline-added": (b"a\nb\nc", b"a\nb\nc\n"),
    "newline-removed": (b"a\nb\nc\n", b"a\nb\nc"),
    "crlf": (b"a\r\nb\r\nc\r\n", b"a\r\nB\r\nc\r\n"),
    "latin1": (b"// caf\xe9\nb\n", b"// caf\xe9\nB\n"),
    "latin1-changed": (b"// caf\xe9\nb\n", b"// caf\xe9!\nb\n"),
    "from-empty": (b"", b"a\nb\n"),
    "to-empty": (b"a\nb\n", b""),
    "insert-far-apart": (b"".join(b"line %d\n" % i for i in range(40)),
                         b"top\n" + b"".join(b"line %d\n" % i for i in range(40)) + b"bottom\n"),
}


@needs_git
@pytest.mark.parametrize("case", list(GIT_CASES))
def test_git_apply_reproduces_the_new_file(case, tmp_path):
    old, new = GIT_CASES[case]
    patch = unified_patch("k.cu", old, new)
    assert git_apply(tmp_path, "k.cu", old, patch) == new


# str.splitlines() splits on more than \n, \r\n: form feed, vertical tab, \x1c-\x1e, a lone \r, U+2028/2029.
# Form feeds in C sources are common (GNU-style page breaks); git and diff split only on \n.
@needs_git
@pytest.mark.parametrize(
    "mid", [b"\x0c", b"\x0b", b"\r", b"\x1c", "\u2028".encode()], ids=["formfeed", "vtab", "lone-cr", "x1c", "u2028"]
)
def test_git_apply_with_unusual_line_separators(mid, tmp_path):
    old = b"int a;" + mid + b"int b;\nint c;\n"
    new = b"int a;" + mid + b"int b;\nint C;\n"
    patch = unified_patch("k.cu", old, new)
    assert git_apply(tmp_path, "k.cu", old, patch) == new


# ---- patch_from_edits: hunks straight from the edits ---------------------------------------------------------

LINES40 = b"".join(b"line %d\n" % i for i in range(40))


def _both(old: bytes, edits: list[Edit]) -> tuple[str, str]:
    new = apply_edits(old, edits)
    return patch_from_edits("k.cu", old, edits, new), unified_patch("k.cu", old, new)


@pytest.mark.parametrize("edits", [
    [Edit.replace(5, 6, "X")],  # inside one line
    [Edit.insert(0, "top\n")],  # whole lines before the first
    [Edit.insert(len(LINES40), "bottom\n")],  # after the last
    [Edit.insert(LINES40.index(b"line 10"), "a\nb\n")],  # whole lines in the middle: a pure addition
    [Edit(LINES40.index(b"line 3\n"), LINES40.index(b"line 5\n"), b"")],  # whole lines removed
    [Edit.replace(LINES40.index(b"line 7"), LINES40.index(b"line 9") + 4, "joined")],  # lines merged into one
    [Edit.insert(LINES40.index(b"line 5\n") + 6, "\nextra")],  # a line added after a line, from its end
    [Edit.insert(LINES40.index(b"line 2"), "x"), Edit.insert(LINES40.index(b"line 2") + 3, "y")],  # one line, two edits
    [Edit.insert(LINES40.index(b"line 2"), "a\n"), Edit.insert(LINES40.index(b"line 8"), "b\n")],  # 6 lines apart: one hunk
    [Edit.insert(LINES40.index(b"line 2"), "a\n"), Edit.insert(LINES40.index(b"line 9"), "b\n")],  # 7 apart: two hunks
    [Edit.insert(LINES40.index(b"line 2"), "a\n"), Edit.insert(LINES40.index(b"line 3"), "b\n")],  # adjacent changes
], ids=["in-line", "top", "bottom", "add-lines", "remove-lines", "join", "add-from-line-end", "two-on-a-line", "merge-at-6",
        "split-at-7", "adjacent"])
def test_patch_from_edits_groups_hunks_as_diff_does(edits):
    ours, difflibs = _both(LINES40, edits)
    assert ours == difflibs


def test_hunks_merge_within_twice_the_context():
    near = [Edit.insert(LINES40.index(b"line 2"), "a\n"), Edit.insert(LINES40.index(b"line 8"), "b\n")]
    far = [Edit.insert(LINES40.index(b"line 2"), "a\n"), Edit.insert(LINES40.index(b"line 9"), "b\n")]
    assert _both(LINES40, near)[0].count("\n@@ ") == 1  # 6 unchanged lines between: one hunk
    assert _both(LINES40, far)[0].count("\n@@ ") == 2  # 7: two


@pytest.mark.parametrize("old, edits", [
    (b"a\nb\nc", [Edit.replace(4, 5, "C")]),  # last line without a newline, changed
    (b"a\nb\nc", [Edit.insert(5, "\n")]),  # the final newline added
    (b"a\nb\nc\n", [Edit(5, 6, b"")]),  # the final newline removed
    (b"a\nb\nc", [Edit.replace(2, 3, "B")]),  # a context line without a newline
    (b"", [Edit.insert(0, "x\ny\n")]),  # from an empty file
    (b"a\r\nb\r\nc\r\n", [Edit.replace(3, 4, "B")]),  # CRLF
    (b"// caf\xe9\nint b;\n", [Edit.replace(13, 14, "B")]),  # not UTF-8
    (b"a\x0cb\nc\n", [Edit.replace(4, 5, "C")]),  # a form feed is not a line end
])
def test_patch_from_edits_edge_cases(old, edits):
    ours, difflibs = _both(old, edits)
    assert ours == difflibs


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_patch_from_edits_always_checks_out(data):
    """Any edits on any file: the patch reproduces the new file (check_patch runs inside)."""
    lines = data.draw(st.lists(st.sampled_from(["x", "y", "", "z z", "\r", "x\r"]), max_size=25))
    old = "\n".join(lines).encode() + data.draw(st.sampled_from([b"", b"\n"]))
    edits: list[Edit] = []
    for _ in range(data.draw(st.integers(1, 5))):
        start = data.draw(st.integers(0, len(old)))
        end = data.draw(st.integers(start, min(len(old), start + 8)))
        candidate = Edit(start, end, data.draw(st.sampled_from([b"", b"\n", b"Q", b"Q\n", b"\nQ", b"x\n", b"a\nb\n"])))
        if overlapping(edits + [candidate]) is None:
            edits.append(candidate)
    new = apply_edits(old, edits)
    patch = patch_from_edits("k.cu", old, edits, new)
    assert (patch == "") == (old == new)


@needs_git
def test_git_applies_patches_built_from_edits(tmp_path):
    old = b"".join(b"int v%d = %d;\n" % (i, i) for i in range(60))
    edits = [Edit.insert(0, "// top\n"), Edit.replace(old.index(b"v10 = 10"), old.index(b"v10 = 10") + 3, "w10"),
             Edit.insert(old.index(b"int v40"), "int extra;\n"), Edit(old.index(b"int v59"), len(old), b"int last;")]
    new = apply_edits(old, edits)
    assert git_apply(tmp_path, "k.cu", old, patch_from_edits("k.cu", old, edits, new)) == new


def test_patch_from_edits_is_checked():
    old = b"a\nb\nc\n"
    with pytest.raises(SwzcError) as info:
        patch_from_edits("k.cu", old, [Edit.replace(2, 3, "B")], b"a\nX\nc\n")  # not what the edits give
    assert info.value.code == ExitCode.CHECK_FAILED


# ---- header paths -------------------------------------------------------------------------------------------------


def test_header_path_is_relative_to_the_work_tree_root(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / ".git").mkdir()  # found by looking, not by running git
    monkeypatch.chdir(repo / "src" / "deep")
    assert header_path("../k.cu") == ("src/k.cu", "")
    assert header_path("k.cu") == ("src/deep/k.cu", "")
    assert header_path(str(repo / "top.cu")) == ("top.cu", "")
    (repo / "sub").mkdir()
    (repo / "sub" / ".git").write_text("gitdir: elsewhere\n")  # a submodule or a linked work tree
    assert header_path(str(repo / "sub" / "m.cu")) == ("m.cu", "")


def test_header_path_outside_any_work_tree(tmp_path, monkeypatch):
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    if _inside_a_work_tree(tmp_path):
        pytest.skip("the temporary folder is inside a git work tree")
    assert header_path("a/b.cu") == ("a/b.cu", "")
    name, note = header_path("../up.cu")
    assert name == "up.cu" and "../up.cu is outside the working folder" in note
    assert ".." not in patch_path("../../../x.cu")


def _inside_a_work_tree(folder) -> bool:
    return any((p / ".git").exists() for p in (folder, *folder.parents))


@pytest.mark.parametrize("name, header", [
    ("new\nline.cu", '"a/new\\nline.cu"'),
    ('q"uote.cu', '"a/q\\"uote.cu"'),
    ("back\\slash.cu", '"a/back\\\\slash.cu"'),
    ("tab\there.cu", '"a/tab\\there.cu"'),
    ("bell\x07.cu", '"a/bell\\a.cu"'),
    ("esc\x1b.cu", '"a/esc\\033.cu"'),
    ("plain name.cu", "a/plain name.cu"),
    ("caf\u00e9.cu", "a/caf\u00e9.cu"),
])
def test_header_paths_are_quoted_as_git_quotes_them(tmp_path, monkeypatch, name, header):
    monkeypatch.chdir(tmp_path)
    patch = unified_patch(name, b"a\n", b"b\n")
    assert patch.splitlines()[0] == f"--- {header}"
