"""Edges of the byte edits and the patches built from them, each a case a plausible slip in swzc.rewrite.edits or
swzc.rewrite.patch gets wrong."""

import pytest

from swzc.rewrite.edits import Edit, rewrite
from swzc.core.errors import ExitCode, SwzcError
from swzc.frontend.source import load_bytes

# tree-sitter assumes the missing ';' after `return 1`: a zero-width issue at offset 18
MISSING_SEMICOLON = b"int f() { return 1 }\nint g() { return 2; }\n"


@pytest.mark.parametrize("text, lands", [(" ", 18), ("/* c */", 25), ("x", 19)])
def test_an_insertion_at_a_zero_width_issue_keeps_it_on_either_side(text, lands):
    """The re-parse puts the assumed token before a space, after a comment: both are the input's issue."""
    src = load_bytes("k.cu", MISSING_SEMICOLON)
    (issue,) = src.errors
    assert issue.start == issue.end == 18
    new = rewrite(src, [Edit.insert(18, text)])
    assert [(e.start, e.end, e.what) for e in new.errors] == [(lands, lands, issue.what)]


def test_an_edit_that_adds_a_second_issue_next_to_a_kept_one_is_refused():
    src = load_bytes("k.cu", MISSING_SEMICOLON)
    with pytest.raises(SwzcError) as caught:
        rewrite(src, [Edit.insert(18, " "), Edit.insert(len(MISSING_SEMICOLON) - 2, " 3 3")])
    assert caught.value.code == ExitCode.CHECK_FAILED and "output line 2" in caught.value.message


# ---- patches ------------------------------------------------------------------------------------------------

from swzc.rewrite.edits import apply_edits  # noqa: E402
from swzc.rewrite.patch import check_patch, header_path, patch_from_edits, patch_path, unified_patch  # noqa: E402

OLD = b"".join(b"line %d\n" % i for i in range(1, 21))


def test_edits_that_do_not_give_the_new_file_are_an_internal_error():
    with pytest.raises(SwzcError) as caught:
        patch_from_edits("k.cu", b"a\n", [], b"b\n")
    assert caught.value.code == ExitCode.CHECK_FAILED and "the edits change no line" in caught.value.message


@pytest.mark.parametrize("patch, why", [
    ("--- a/k.cu\n+++ b/k.cu\n@@ -5 +5 @@\n-line 5\n+five\n@@ -2 +2 @@\n-line 2\n+two\n", "hunks out of order"),
    ("--- a/k.cu\n+++ b/k.cu\n@@ -30 +30 @@\n-line 30\n+thirty\n", "past the end of the file"),
    ("--- a/k.cu\n+++ b/k.cu\n@@ -20,2 +20,2 @@\n line 20\n-line 21\n+twenty-one\n", "context does not match the original at line 21"),
    ("--- a/k.cu\n+++ b/k.cu\n@@ -3 +3 @@\n-line 4\n+four\n", "context does not match the original at line 3"),
])
def test_a_patch_that_does_not_fit_the_file_is_refused(patch, why):
    with pytest.raises(SwzcError) as caught:
        check_patch(patch, OLD, OLD)
    assert caught.value.code == ExitCode.CHECK_FAILED and why in caught.value.message


def test_a_patch_is_checked_against_the_whole_new_file():
    patch = "--- a/k.cu\n+++ b/k.cu\n@@ -2 +2 @@\n-line 2\n+two\n"
    new = OLD.replace(b"line 2\n", b"two\n", 1)
    check_patch(patch, OLD, new)
    with pytest.raises(SwzcError, match="does not reproduce the rewritten file"):
        check_patch(patch, OLD, new + b"more\n")
    with pytest.raises(SwzcError, match="does not reproduce the rewritten file"):
        check_patch(patch, OLD + b"tail\n", new)  # the lines after the hunk are the original's


def test_a_missing_newline_at_the_end_is_marked_on_both_sides():
    old, new = b"a\nb", b"a\nB"
    patch = patch_from_edits("k.cu", old, [Edit.replace(2, 3, "B")], new)
    assert patch.endswith("-b\n\\ No newline at end of file\n+B\n\\ No newline at end of file\n")
    assert patch == unified_patch("k.cu", old, new)
    check_patch(patch, old, new)


@pytest.mark.parametrize("edits, header", [
    ([Edit.insert(0, "top\n")], "@@ -1,3 +1,4 @@"),
    ([Edit.replace(OLD.index(b"line 10"), OLD.index(b"line 10") + 7, "ten")], "@@ -7,7 +7,7 @@"),
    ([Edit(OLD.index(b"line 20"), len(OLD), b"")], "@@ -17,4 +17,3 @@"),
    ([Edit.insert(len(OLD), "21\n")], "@@ -18,3 +18,4 @@"),
])
def test_hunks_carry_three_lines_of_context_where_the_file_has_them(edits, header):
    new = apply_edits(OLD, edits)
    patch = patch_from_edits("k.cu", OLD, edits, new)
    assert patch.splitlines()[2] == header and patch == unified_patch("k.cu", OLD, new)


def test_a_one_line_file_and_an_empty_one_get_the_short_ranges():
    assert patch_from_edits("k.cu", b"x\n", [Edit.replace(0, 1, "y")], b"y\n").splitlines()[2] == "@@ -1 +1 @@"
    assert patch_from_edits("k.cu", b"", [Edit.insert(0, "a\n")], b"a\n").splitlines()[2] == "@@ -0,0 +1 @@"
    assert patch_from_edits("k.cu", b"a\n", [Edit(0, 2, b"")], b"").splitlines()[2] == "@@ -1 +0,0 @@"


def test_later_hunks_are_shifted_by_the_lines_earlier_ones_added():
    edits = [Edit.insert(OLD.index(b"line 2\n"), "a\nb\nc\n"), Edit(OLD.index(b"line 15\n"), OLD.index(b"line 17\n"), b"")]
    new = apply_edits(OLD, edits)
    headers = [line for line in patch_from_edits("k.cu", OLD, edits, new).splitlines() if line.startswith("@@")]
    assert headers == ["@@ -1,4 +1,7 @@", "@@ -12,8 +15,6 @@"]


def test_a_file_outside_a_work_tree_and_the_working_folder_is_named_by_its_base_name(tmp_path, monkeypatch):
    inside = tmp_path / "work"
    inside.mkdir()
    monkeypatch.chdir(inside)
    if any((p / ".git").exists() for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary folder is inside a git work tree")
    assert header_path(str(inside / "a" / "k.cu")) == ("a/k.cu", "")
    assert patch_path(str(tmp_path / "elsewhere" / "k.cu")) == "k.cu"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert header_path(str(repo / "src" / "k.cu")) == ("src/k.cu", "")  # its own work tree, not the working folder


@pytest.mark.parametrize("name, quoted", [
    ("del\x7f.cu", '"a/del\\177.cu"'),
    ("unit\x1f.cu", '"a/unit\\037.cu"'),
    ("what?.cu", "a/what?.cu"),
    ("sp ace.cu", "a/sp ace.cu"),
    ("tilde~.cu", "a/tilde~.cu"),
])
def test_control_characters_and_del_are_quoted_and_nothing_else(tmp_path, monkeypatch, name, quoted):
    monkeypatch.chdir(tmp_path)
    assert unified_patch(name, b"a\n", b"b\n").splitlines()[0] == f"--- {quoted}"
    assert patch_from_edits(name, b"a\n", [Edit.replace(0, 1, "b")], b"b\n").splitlines()[1] == "+++ " + quoted.replace("a/", "b/", 1)


def test_a_blanked_range_ends_before_text_inserted_at_its_end():
    """A range parsed as spaces (a branch never taken) keeps its own bytes: what an edit inserts right after
    it is parsed, not blanked."""
    data = b"#if 0\nint x;\n#endif\nint y;\n"
    start, end = data.index(b"int x;"), data.index(b"int x;") + len(b"int x;")
    src = load_bytes("k.cu", data, ((start, end),))
    new = rewrite(src, [Edit.insert(end, " int z;"), Edit.insert(start, "/* a */ ")])
    assert new.blanked == ((start + len("/* a */ "), end + len("/* a */ ")),)
    assert new.data[slice(*new.blanked[0])] == b"int x;"


def test_a_change_at_the_start_of_a_file_that_opens_with_an_empty_line_has_three_lines_of_context():
    old = b"\n" + b"".join(b"line %d\n" % i for i in range(1, 10))
    edits = [Edit.insert(0, "top\n")]
    new = apply_edits(old, edits)
    patch = patch_from_edits("k.cu", old, edits, new)
    assert patch.splitlines()[2] == "@@ -1,3 +1,4 @@" and patch == unified_patch("k.cu", old, new)
