"""What swzc prints and writes is clean.  Text from outside (a file's name and source, a hardware model file,
an LLM's reply, the command line) reaches every output; each character of UNSAFE in it is shown as an escape
(U+202E as `\\u202e`), in every output: text summaries, error messages, --json, the reports, the review
formats, a patch on a terminal.  The user's own source stays exact where a program reads it: a patch or a
rewritten file written to a file or a pipe, a fix in a review format.

UNSAFE is written out here, apart from swzc.core.clean's pattern, and every check loops over all of it: the
hostile inputs carry every character at once, and each check asks for each character's escape."""

import io
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import GROUPED_8_BODY, NAIVE_GEMM

from swzc.core import clean

from swzc.commands import main as entry

from swzc.target import hw
from swzc.commands.cli import main

BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
C0 = [c for c in range(0x20) if c not in (0x09, 0x0A)]  # a carriage return too: alone, it moves the cursor back
C1 = [0x7F, *range(0x80, 0xA0)]  # with DEL
INVISIBLE = [0x2028, 0x2029,  # line and paragraph separators
             0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF,  # zero-width space, non-joiner, joiner, word joiner, BOM
             0x00AD, 0x034F, 0x180E, 0x2061, 0x2064, 0x206A, 0x206F, 0xFFF9, 0xFFFB,  # other format characters
             0x115F, 0x3164, 0xFE00, 0xFE0F, 0xE0100,  # Hangul fillers, variation selectors
             0xE0001, 0xE0041, 0xE007F]  # tags: invisible ASCII
UNSAFE = [chr(c) for c in (*BIDI, *C0, *C1, *INVISIBLE)]

NOT_IN_NAMES = "\0"  # no file name holds NUL
NOT_IN_REPLIES = "".join(chr(c) for c in (*C0, 0x7F))  # the LLM client refuses a reply with C0 controls and DEL


def spelled(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def spellings(char: str) -> tuple[str, ...]:
    """How an escape may show the character: swzc.core.clean's spelling, or Python's repr's."""
    return (spelled(char), repr(char)[1:-1])


def all_but(left_out: str) -> str:
    return "".join(c for c in UNSAFE if c not in left_out)


def check_clean(out: str, shown: str = "") -> None:
    """No character of UNSAFE in `out` (a carriage return only before a newline), and the escape of each
    character of `shown` (the hostile text that reached it) in it."""
    bare = out.replace("\r\n", "\n")
    found = [f"U+{ord(c):04X}" for c in UNSAFE if c in bare]
    assert not found, f"unsafe characters reach the output: {found}"
    missing = [f"U+{ord(c):04X}" for c in dict.fromkeys(shown) if not any(s in out for s in spellings(c))]
    assert not missing, f"the hostile text did not reach the output escaped: {missing}"


def check_clean_bytes(data: bytes, shown: str = "") -> None:
    check_clean(data.decode("utf-8"), shown)  # strictly: a byte that is not UTF-8 is unsafe too


def strings(doc, skip: tuple[str, ...] = ()):
    """Every key and string of a JSON document, but the values under the keys of `skip`."""
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for key, value in doc.items():
            yield key
            if key not in skip:
                yield from strings(value, skip)
    elif isinstance(doc, list):
        for value in doc:
            yield from strings(value, skip)


def check_clean_json(raw: str, shown: str = "", skip: tuple[str, ...] = ()) -> object:
    """The document's text is ASCII and clean, and so is every string in it (but those under `skip`)."""
    assert raw.isascii()
    check_clean(raw)
    doc = json.loads(raw)
    check_clean("\n".join(strings(doc, skip)), shown)
    return doc


# ---- the mechanism -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("char", UNSAFE, ids=[f"U+{ord(c):04X}" for c in UNSAFE])
def test_each_unsafe_character_is_escaped(char):
    assert clean.text(f"a{char}b") == f"a{spelled(char)}b"
    assert not clean.is_clean(char)
    check_clean(clean.text(char * 3), char)


def test_tabs_line_ends_and_ordinary_text_are_kept():
    plain = "kernel\tgemm\nline two\r\nnaïve 中文 Ελληνικά ∑ 😀 {}[]()<>$`'\"\\"
    assert clean.text(plain) == plain and clean.is_clean(plain)


def test_the_class_holds_every_control_format_and_separator_character_unicode_knows():
    missed = [f"U+{c:04X}" for c in range(0x110000) if c not in (0x09, 0x0A, 0x0D)
              and unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp", "Cs") and clean.is_clean(chr(c))]
    assert not missed


def test_bytes_that_are_not_utf8_are_shown_as_bytes():
    assert clean.text(b"a\x9b\xffb".decode("utf-8", "surrogateescape")) == "a\\x9b\\xffb"


def test_json_escapes_every_string_but_the_users_verbatim_source():
    hostile = "".join(UNSAFE)
    raw = clean.dumps({"message": hostile, hostile: [hostile, 3], "fix": clean.Verbatim(hostile)})
    doc = check_clean_json(raw, hostile, skip=("fix",))
    assert doc["fix"] == hostile


def test_join_escapes_prose_and_keeps_verbatim_pieces():
    hostile = "".join(UNSAFE)
    joined = clean.join(f"kernel {hostile}: ", clean.Verbatim(hostile))
    assert isinstance(joined, clean.Verbatim)
    check_clean(joined[: -len(hostile)], hostile)
    assert joined.endswith(hostile)


@pytest.mark.parametrize("terminal", [False, True])
def test_write_exact_is_exact_to_a_pipe_and_escaped_on_a_terminal(terminal):
    data = ("+  x = 1; // " + "".join(UNSAFE) + "\r\n").encode() + b"\x9b\n"
    out = io.BytesIO()
    clean.write_exact(data, out, terminal=terminal)
    if terminal:
        check_clean_bytes(out.getvalue(), "".join(UNSAFE))
        assert out.getvalue().endswith(b"\r\n\\x9b\n")
    else:
        assert out.getvalue() == data


# ---- hostile inputs ----------------------------------------------------------------------------------------

NAME_TEXT = all_but(NOT_IN_NAMES)
FILE = f"k{NAME_TEXT}.cu"
SOURCE_TEXT = all_but("\0")  # tree-sitter stops at a NUL byte
HW_TEXT = ""  # a model's name is refused unless a short plain word (tests/test_hw.py): no way in there
REPLY_TEXT = all_but(NOT_IN_REPLIES)
# Comments in a block-index read (analyze quotes it), beside it (every fix and patch carries the line), and in
# a line the rewrite keeps.
SOURCE = (NAIVE_GEMM.replace("int row = blockIdx.y", f"int row = blockIdx./*{SOURCE_TEXT}*/y /*{SOURCE_TEXT}*/")
          .replace("void run(", f"/*{SOURCE_TEXT}*/ void run(")).encode()


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / FILE).write_bytes(SOURCE)
    (tmp_path / "gemm.cu").write_text(NAIVE_GEMM)
    model = (Path(__file__).resolve().parents[1] / "hwmodels" / "h200.toml").read_text()
    name = '"hw' + "".join(f"\\U{ord(c):08x}" for c in HW_TEXT) + '"'  # a TOML string of escapes
    (tmp_path / "evil.toml").write_text(model.replace('name = "h200"', f"name = {name}", 1))
    replies = [{"name": "g8", "expectation": f"E{REPLY_TEXT}", "lessons": f"L{REPLY_TEXT}", "body": GROUPED_8_BODY},
               {"name": "bad", "expectation": f"E{REPLY_TEXT}", "lessons": "",
                "body": f"return make_uint3(0u, 0u, 0u); // {REPLY_TEXT}\n"}]
    (tmp_path / "replies.json").write_text(json.dumps({"about": "hostile", "replies": replies}))
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_text_summary(work):
    result = invoke("rewrite", FILE, "--hw", "evil.toml", "--no-compile")
    assert result.exit_code == 0, result.output
    check_clean_bytes(result.stdout_bytes, NAME_TEXT + HW_TEXT)


def test_rewrite_json(work):
    result = invoke("rewrite", FILE, "--hw", "evil.toml", "--no-compile", "--json")
    assert result.exit_code == 0, result.output
    doc = check_clean_json(result.stdout, NAME_TEXT + HW_TEXT)
    assert doc["kernels"][0]["status"] == "rewritten"


def test_analyze_quotes_the_source_escaped(work):
    text = invoke("analyze", FILE, "--hw", "evil.toml", "--no-compile")
    check_clean_bytes(text.stdout_bytes, NAME_TEXT + HW_TEXT + SOURCE_TEXT)
    as_json = invoke("analyze", FILE, "--hw", "evil.toml", "--no-compile", "--json")
    check_clean_json(as_json.stdout, NAME_TEXT + HW_TEXT + SOURCE_TEXT)


def test_suggest_text_and_json(work):
    text = invoke("-v", "suggest", FILE, "gemm.cu", "--hw", "evil.toml")
    assert text.exit_code == 1, text.output
    check_clean_bytes(text.stdout_bytes)  # the name as git quotes it: its bytes in octal
    assert "\\342\\200\\256" in text.stdout  # U+202E
    as_json = invoke("suggest", FILE, "--hw", "evil.toml", "--json")
    check_clean_json(as_json.stdout, NAME_TEXT + HW_TEXT)


def test_reports_show_what_the_llm_said_escaped(work):
    result = invoke("rewrite", FILE, "--no-compile", "--proposer", "llm", "--llm-replay", "replies.json",
                    "--max-iterations", "2", "--report", "run", "--hw", "evil.toml", "-o", "out.cu")
    assert result.exit_code == 0, result.output
    check_clean_bytes(result.stdout_bytes, NAME_TEXT + HW_TEXT)
    check_clean_bytes((work / "run.md").read_bytes(), NAME_TEXT + REPLY_TEXT)
    check_clean_json((work / "run.json").read_text(), NAME_TEXT + HW_TEXT + REPLY_TEXT + SOURCE_TEXT)
    assert SOURCE_TEXT.encode() in (work / "out.cu").read_bytes()  # the rewritten file keeps the user's bytes


def test_the_picture_and_its_page(work):
    with warnings.catch_warnings(record=True) as caught:  # a warning reaches stderr: matplotlib's quote the text drawn
        warnings.simplefilter("always")
        result = invoke("show", FILE, "--hw", "evil.toml", "-o", "order.svg", "--html", "order.html")
    assert result.exit_code == 0, result.output
    check_clean("\n".join(str(w.message) for w in caught))
    check_clean_bytes(result.stdout_bytes, NAME_TEXT + HW_TEXT)
    check_clean_bytes((work / "order.html").read_bytes(), HW_TEXT)
    check_clean_bytes((work / "order.svg").read_bytes(), HW_TEXT)


# The fix's text is the user's source: carried exactly, under these keys.
FIXES = {"sarif": ("insertedContent",), "rdjson": ("suggestions",), "github": ("body",)}


@pytest.mark.parametrize("fmt", sorted(FIXES))
def test_review_formats_escape_their_prose_and_carry_the_fix_exactly(work, fmt):
    result = invoke("review", FILE, "--hw", "evil.toml", "--format", fmt)
    assert result.exit_code == 1, result.output
    # SARIF names the file by a URI, percent-encoded; a GitHub comment says all but the file's name in its body
    shown = {"sarif": HW_TEXT, "rdjson": HW_TEXT + NAME_TEXT, "github": NAME_TEXT}[fmt]
    doc = check_clean_json(result.stdout, shown, skip=FIXES[fmt])
    fixes = [s for s in strings(doc) if SOURCE_TEXT in s]
    assert fixes, "the fix lost the user's own bytes"
    if fmt == "github":
        for comment in doc:
            prose, fence, code = comment["body"].partition("```")
            check_clean(prose, HW_TEXT)
            assert SOURCE_TEXT in code


def test_review_patch_to_a_pipe_is_exact(work):
    result = invoke("review", FILE, "--format", "patch")
    assert result.exit_code == 1, result.output
    assert SOURCE_TEXT.encode() in result.stdout_bytes
    headers = [line for line in result.stdout_bytes.split(b"\n") if line.startswith((b"--- ", b"+++ "))]
    check_clean_bytes(b"\n".join(headers))  # the name as git quotes it; git apply reads it back
    expected = invoke("rewrite", FILE, "--no-compile", "-o", "-").stdout_bytes
    if shutil.which("git"):
        subprocess.run(["git", "apply", "-"], input=result.stdout_bytes, cwd=work, check=True, capture_output=True)
        assert (work / FILE).read_bytes() == expected


def on_terminal(args: list[str], cwd: Path) -> tuple[bytes, bytes]:
    """Run swzc with its stdout on a pseudo-terminal: what the terminal received, and stderr."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "swzc", *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=subprocess.PIPE)
    os.close(follower)
    received = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        received.append(chunk)
    os.close(leader)
    err = proc.stderr.read()
    proc.stderr.close()
    proc.wait(timeout=60)
    return b"".join(received), err


@pytest.mark.parametrize("args", [["review", FILE, "--format", "patch"], ["rewrite", FILE, "--no-compile", "--patch", "-"],
                                  ["rewrite", FILE, "--no-compile", "-o", "-"]], ids=["review", "patch", "output"])
def test_source_on_a_terminal_is_escaped(work, args):
    shown, err = on_terminal(args, work)
    assert b"gemm" in shown, err
    check_clean_bytes(shown, SOURCE_TEXT)
    check_clean_bytes(err)


def test_error_messages(work, monkeypatch):
    missing = f"gone{NAME_TEXT}.cu"
    for args in (["rewrite", missing], ["review", missing, "--format", "sarif"], ["suggest", missing],
                 ["rewrite", "gemm.cu", "--no-compile", "--grid", f"k{HW_TEXT}=4,4"],
                 ["rewrite", "gemm.cu", f"--no-such-option{HW_TEXT}"]):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        check_clean_bytes(result.stderr_bytes, HW_TEXT if "gemm.cu" in args else NAME_TEXT)
    as_json = invoke("rewrite", missing, "--json")
    check_clean_json(as_json.stdout, NAME_TEXT)

    def broken(*args, **kwargs):
        raise RuntimeError(f"broke on {HW_TEXT}")

    monkeypatch.setattr("swzc.commands.cli.rewrite_file", broken)
    result = invoke("rewrite", "gemm.cu", "--no-compile")
    assert result.exit_code == 3
    check_clean_bytes(result.stderr_bytes, HW_TEXT)


def test_the_last_boundary_escapes_an_internal_error(monkeypatch, capsys):
    class Broken:
        def main(self, *args, **kwargs):
            raise RuntimeError(f"broke on {HW_TEXT}")

    monkeypatch.setattr("swzc.commands.cli.main", Broken())
    monkeypatch.setattr(entry, "install", lambda: None)
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # the run points it at its own folder
    monkeypatch.setattr(sys, "argv", ["swzc", "rewrite", "gemm.cu"])
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    assert exit_.value.code == 3
    check_clean(capsys.readouterr().err, HW_TEXT)


def test_a_model_file_from_a_hostile_probe_output(work):
    from test_probe import ONE_PARTITION

    device = "Test" + all_but("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") + "GPU"  # not the line ends splitlines() knows
    (work / "probe.txt").write_text(ONE_PARTITION.replace("device Test GPU", f"device {device}"))
    result = invoke("probe", "--from-output", "probe.txt", "--output", "model.toml", "--name", "testgpu")
    assert result.exit_code == 0, result.output
    check_clean_bytes(result.stdout_bytes + result.stderr_bytes, device)
    check_clean_bytes((work / "model.toml").read_bytes(), device)
    assert device in hw.load("model.toml").source("compute_units")  # TOML reads the escapes back
    printed = invoke("probe", "--from-output", "probe.txt")
    check_clean_bytes(printed.stdout_bytes + printed.stderr_bytes, device)


# Output written around swzc.core.clean, and why each is clean.  Any other print, echo, JSON text or write to stdout
# or stderr in swzc's code is a way around the mechanism.
RAW_OUTPUT = re.compile(r"\bclick\.(?:echo|secho)\(|\bprint\(|\bjson\.dumps?\(|\bsys\.std(?:out|err)\.(?:buffer\.)?write\(")
AROUND = {
    "swzc/core/clean.py": "the mechanism itself",
    "swzc/commands/main.py": "the internal error, through clean.text",
    "swzc/core/signals.py": "a fixed message: swzc: interrupted",
    "swzc/core/memo.py": "the results cache's entries: data swzc reads back, never shown",
    "swzc/verify/bench.py": "report_json: read back and written through clean.dumps by the reports and --json",
    "swzc/search/llm/client.py": "the transcript: ASCII JSON that --llm-replay reads back exactly",
    "swzc/target/probe/__init__.py": "the model file's strings: JSON's escapes, then clean.text's",
    "swzc/fleet/job.py": "a job's result, to the run that started it: data it reads back, shown only through swzc.report.tune",
    "swzc/fleet/local.py": "a job, to the worker it starts: data the worker reads back",
    "swzc/fleet/jobs.py": "a key's text: hashed, never shown",
    "swzc/fleet/store.py": "the store's rows: data read back, shown only through swzc.report.tune",
}


def test_nothing_is_printed_around_the_mechanism():
    root = Path(__file__).resolve().parents[1]
    found = [f"{path.relative_to(root)}:{number}: {line.strip()}"
             for path in sorted([*(root / "swzc").rglob("*.py"), *(root / "passes").rglob("*.py")])
             if str(path.relative_to(root)) not in AROUND
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if RAW_OUTPUT.search(line) and not line.lstrip().startswith("#")]
    assert not found


# ---- commands printed for pasting into a shell ---------------------------------------------------------------

NAMES = ["-o", "--in-place", "-", "my kernels.cu", "it's \"quoted\".cu", "two\nlines.cu", "$(touch pwned).cu",
         "`touch pwned`.cu", "back\\slash.cu", "tab\there.cu", *(f"k{c}.cu" for c in UNSAFE if c not in NOT_IN_NAMES),
         os.fsdecode(b"k\x9b.cu")]  # a byte that is not UTF-8


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash reads $'...' words")
def test_the_apply_command_names_every_file_as_a_shell_reads_it(work):
    for name in NAMES:
        (work / name).write_bytes(NAIVE_GEMM.encode())
    result = invoke("suggest", "--json", "--", *NAMES)
    assert result.exit_code == 1, result.output
    doc = check_clean_json(result.stdout)
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    for name, report in zip(NAMES, doc["files"]):
        apply = report["kernels"][0]["suggestion"]["apply"]
        check_clean(apply)
        assert "\n" not in apply
        words = subprocess.run(["bash", "-c", "printf '%s\\0' " + apply], env=env, cwd=work, capture_output=True,
                               check=True).stdout.split(b"\0")[:-1]
        path = os.fsencode(name)
        assert words[:3] == [b"swzc", b"rewrite", b"./" + path if name.startswith("-") else path], name
        assert words[-1] == b"--in-place"
    assert not (work / "pwned").exists()


@pytest.mark.parametrize("name", ["-o", "--in-place", "-", f"k{NAME_TEXT}.cu"])
def test_the_apply_command_rewrites_the_file_it_names(work, name):
    (work / name).write_bytes(NAIVE_GEMM.encode())
    expected = invoke("rewrite", "gemm.cu", "--no-compile", "-o", "-").stdout_bytes
    apply = json.loads(invoke("suggest", "--json", "--", name).stdout)["files"][0]["kernels"][0]["suggestion"]["apply"]
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    words = subprocess.run(["bash", "-c", "printf '%s\\0' " + apply], env=env, cwd=work, capture_output=True,
                           check=True).stdout.split(b"\0")[:-1]
    result = invoke(*(os.fsdecode(w) for w in words[1:]), "--no-compile")
    assert result.exit_code == 0, result.output
    assert (work / name).read_bytes() == expected
