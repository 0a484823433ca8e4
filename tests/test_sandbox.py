"""The prover's sandbox, each layer on its own: with the safe-subset check switched off on purpose, a body
that opens a file to write, makes a socket, reaches the network, starts a process, takes memory or spins is
stopped by the layer under test, and goes through when only that layer is switched off.

The bodies below are what the subset check refuses (asm, calls, string literals); they are built as
CustomSwizzle directly, which is the check switched off.  They issue raw x86-64 Linux system calls."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import threading

import pytest

from swzc.formulas import prove as prover
from swzc.core.errors import SwzcError
from swzc.formulas.swizzles import CustomSwizzle

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64",
                                reason="raw x86-64 Linux system calls")

ALL = ("rlimits", "namespaces", "seccomp")
SHAPE = ((4, 4, 1, 0),)


def _syscall(number: int, *args: str) -> str:
    """C++ statements issuing a system call; its result is left in `r`."""
    regs = ["D", "S", "d"]
    ins = ", ".join([f'"a"((long){number})', *(f'"{regs[i]}"((long)({a}))' for i, a in enumerate(args))])
    return f'asm volatile("syscall" : "=a"(r) : {ins} : "rcx", "r11", "memory");\n'


def _body(statements: str) -> CustomSwizzle:
    """A body that runs `statements` (which leave `ok` true when the attack worked) and then maps each block
    to itself when it worked, and out of the grid when it did not."""
    text = ("long r = -1; bool ok = false;\n" + statements +
            "return ok ? swzc_v_block : make_uint3(swzc_v_grid.x, 0u, 0u);")
    return CustomSwizzle("attack", text)


def _attempt(formula: CustomSwizzle, layers: tuple[str, ...], monkeypatch) -> str:
    """'worked', 'failed' (the body ran and the attack failed) or the prover's failure message."""
    monkeypatch.setattr(prover, "SANDBOX_LAYERS", layers)
    try:
        (proof,) = prover.prove([(formula, "2d", SHAPE)])
    except SwzcError as exc:
        return exc.message
    return "worked" if proof.ok else "failed"


def _in_force(monkeypatch) -> tuple[str, ...]:
    monkeypatch.setattr(prover, "SANDBOX_LAYERS", ALL)
    from swzc.formulas.swizzles import parse_spec
    (proof,) = prover.prove([(parse_spec("grouped:2"), "2d", SHAPE)])
    return proof.sandbox


def _needs(layer: str, monkeypatch) -> None:
    if layer not in _in_force(monkeypatch):
        pytest.skip(f"this platform refuses the {layer} layer")


def _path_literal(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_seccomp_stops_opening_a_file_to_write(tmp_path, monkeypatch):
    _needs("seccomp", monkeypatch)
    marker = tmp_path / "written"
    attack = _body(_syscall(2, _path_literal(str(marker)), str(os.O_WRONLY | os.O_CREAT), "0600") + "ok = r >= 0;\n")
    blocked = _attempt(attack, ALL, monkeypatch)
    assert "SIGSYS" in blocked and "outside the sandbox" in blocked and not marker.exists()
    assert _attempt(attack, ("rlimits", "namespaces"), monkeypatch) == "worked" and marker.exists()


def test_seccomp_stops_a_socket_and_a_new_process(tmp_path, monkeypatch):
    _needs("seccomp", monkeypatch)
    for attack in (_body(_syscall(41, "2", "1", "0") + "ok = r >= 0;\n"),  # socket(AF_INET, SOCK_STREAM)
                   _body(_syscall(57) + "if (r == 0) " + _syscall(60, "0") + "ok = r > 0;\n")):  # fork; the child exits
        assert "SIGSYS" in _attempt(attack, ALL, monkeypatch)
        assert _attempt(attack, ("rlimits", "namespaces"), monkeypatch) == "worked"


def test_seccomp_stops_running_another_program(tmp_path, monkeypatch):
    _needs("seccomp", monkeypatch)
    marker = tmp_path / "ran"
    script = tmp_path / "script"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(0o700)
    argv = f"const char* argv[] = {{{_path_literal(str(script))}, 0}}; const char* envp[] = {{0}};\n"
    attack = _body(argv + _syscall(57) + "if (r == 0) { " + _syscall(59, _path_literal(str(script)), "argv", "envp")
                   + _syscall(60, "1") + "}\nok = r > 0;\n")
    assert "SIGSYS" in _attempt(attack, ALL, monkeypatch) and not marker.exists()
    assert _attempt(attack, ("rlimits", "namespaces"), monkeypatch) == "worked"


def _program(tmp_path, name: str, source: str) -> str:
    """A small C++ program built with the prover's compiler; its path."""
    (tmp_path / f"{name}.cpp").write_text(source)
    subprocess.run([*prover.host_compiler(), "-O0", "-o", str(tmp_path / name), str(tmp_path / f"{name}.cpp")], check=True)
    return str(tmp_path / name)


def test_seccomp_stops_the_prover_becoming_another_program(tmp_path, monkeypatch):
    """execve of another program in place of the prover (no new process needed) is a system call outside the
    sandbox; without the filter the other program runs and its exit status is the run's."""
    _needs("seccomp", monkeypatch)
    seven = _program(tmp_path, "seven", "int main() { return 7; }\n")
    argv = f"const char* argv[] = {{{_path_literal(seven)}, 0}}; const char* envp[] = {{0}};\n"
    attack = _body(argv + _syscall(59, _path_literal(seven), "argv", "envp") + "ok = false;\n")
    blocked = _attempt(attack, ALL, monkeypatch)
    assert "SIGSYS" in blocked and "status 7" not in blocked
    assert "exited with status 7" in _attempt(attack, ("rlimits", "namespaces"), monkeypatch)


def test_seccomp_allows_execveat_of_no_other_program(tmp_path, monkeypatch):
    """The one execveat the filter lets through is of the launcher's descriptor: another program by its path
    (dirfd AT_FDCWD) is stopped."""
    _needs("seccomp", monkeypatch)
    seven = _program(tmp_path, "seven", "int main() { return 7; }\n")
    argv = f"const char* argv[] = {{{_path_literal(seven)}, 0}}; const char* envp[] = {{0}};\n"
    regs = 'register long envr asm("r10") = (long)envp;\nregister long flags asm("r8") = 0;\n'
    call = ('asm volatile("syscall" : "=a"(r) : "a"(322L), "D"(-100L), "S"((long)' + _path_literal(seven)
            + '), "d"((long)argv), "r"(envr), "r"(flags) : "rcx", "r11", "memory");\n')
    attack = _body(argv + regs + call + "ok = false;\n")
    blocked = _attempt(attack, ALL, monkeypatch)
    assert "SIGSYS" in blocked and "status 7" not in blocked
    assert "exited with status 7" in _attempt(attack, ("rlimits", "namespaces"), monkeypatch)


def test_seccomp_stops_opening_an_existing_file_to_write(tmp_path, monkeypatch):
    """O_WRONLY alone (no O_CREAT, O_TRUNC or O_APPEND) is a write too: the access mode is part of the filter."""
    _needs("seccomp", monkeypatch)
    marker = tmp_path / "existing"
    marker.write_text("kept")
    attack = _body(_syscall(2, _path_literal(str(marker)), str(os.O_WRONLY), "0") + "ok = r >= 0;\n")
    assert "SIGSYS" in _attempt(attack, ALL, monkeypatch)
    assert _attempt(attack, ("rlimits", "namespaces"), monkeypatch) == "worked" and marker.read_text() == "kept"


def test_seccomp_allows_ioctl_only_to_ask_for_a_terminal(monkeypatch):
    """TIOCSTI (push a character into a terminal's input) or any request but TCGETS is stopped, even on a
    descriptor where it would fail anyway."""
    _needs("seccomp", monkeypatch)
    attack = _body("char c = 65;\n" + _syscall(16, "0", "0x5412", "&c") + "ok = r != -38;\n")  # ioctl(0, TIOCSTI, &c)
    assert "SIGSYS" in _attempt(attack, ALL, monkeypatch)
    assert _attempt(attack, ("rlimits", "namespaces"), monkeypatch) == "worked"  # -ENOTTY on the pipe: not -ENOSYS


def test_the_launcher_empties_the_environment(tmp_path):
    """The launcher itself, given an environment, hands the program none (swzc gives it none either)."""
    env_size = _program(tmp_path, "env_size",
                        "extern char** environ;\nint main() { int n = 0; while (environ && environ[n]) ++n; return n; }\n")
    sandbox = prover._sandbox(prover.host_compiler())
    if sandbox is None:
        pytest.skip("no sandbox launcher on this platform")
    fd = os.open(env_size, os.O_RDONLY)
    try:
        run = subprocess.run([sandbox.path, str(fd), str(prover.RUN_MEMORY_BYTES), "10", ",".join(ALL)],
                             env={"SECRET": "sk-secret", "PATH": "/usr/bin"}, pass_fds=(fd, sandbox.fd), capture_output=True)
    finally:
        os.close(fd)
    assert run.stderr.decode().startswith("swzc-sandbox: ") and run.returncode == 0, (run.returncode, run.stderr)


@pytest.fixture
def listener():
    """A TCP server on the loopback interface that counts the connections it accepts."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(5)
    server.close()


def test_the_network_namespace_leaves_no_address_to_reach(listener, monkeypatch):
    _needs("namespaces", monkeypatch)
    port, accepted = listener
    address = f"unsigned char addr[16] = {{2, 0, {port >> 8}, {port & 255}, 127, 0, 0, 1}};\n"
    attack = _body(address + _syscall(41, "2", "1", "0") + "long s = r;\n"
                   + _syscall(42, "s", "addr", "16") + "ok = s >= 0 && r == 0;\n")
    assert _attempt(attack, ("rlimits", "namespaces"), monkeypatch) == "failed" and not accepted
    assert _attempt(attack, ("rlimits",), monkeypatch) == "worked" and accepted


def test_rlimits_bound_memory(monkeypatch):
    _needs("rlimits", monkeypatch)
    # mmap(0, 8 GiB, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE): past the address-space limit
    take = "register long flags asm(\"r10\") = 0x4022;\nregister long fd asm(\"r8\") = -1;\nregister long off asm(\"r9\") = 0;\n"
    mmap = ('asm volatile("syscall" : "=a"(r) : "a"(9L), "D"(0L), "S"(8L << 30), "d"(3L), "r"(flags), "r"(fd), "r"(off)'
            ' : "rcx", "r11", "memory");\n')
    attack = _body(take + mmap + "ok = r > 0 || r < -4095;\n")
    assert _attempt(attack, ALL, monkeypatch) == "failed"
    assert _attempt(attack, ("namespaces", "seccomp"), monkeypatch) == "worked"


def test_rlimits_bound_cpu_time(monkeypatch):
    _needs("rlimits", monkeypatch)
    monkeypatch.setattr(prover, "RUN_CPU_S", 1)
    monkeypatch.setattr(prover, "RUN_TIMEOUT_S", 30)  # without the limit: a timeout, not a signal
    spin = _body("volatile unsigned long long i = 0; while (i != ~0ull) ++i;\nok = true;\n")
    stopped = _attempt(spin, ALL, monkeypatch)
    assert "SIGXCPU" in stopped or "SIGKILL" in stopped


def test_rlimits_bound_what_a_file_may_hold(tmp_path, monkeypatch):
    """With the filter off a file can be opened; the size limit still stops a byte being written to it."""
    _needs("rlimits", monkeypatch)
    marker = tmp_path / "grown"
    attack = _body(_syscall(2, _path_literal(str(marker)), str(os.O_WRONLY | os.O_CREAT), "0600")
                   + "long f = r; char c = 65;\n" + _syscall(1, "f", "&c", "1") + "ok = r == 1;\n")
    assert "SIGXFSZ" in _attempt(attack, ("rlimits", "namespaces"), monkeypatch) and marker.read_bytes() == b""
    assert _attempt(attack, ("namespaces",), monkeypatch) == "worked" and marker.read_bytes() == b"A"


def test_the_prover_gets_no_environment(monkeypatch):
    """The user's environment (an API key among it) is not the prover's: environ is empty."""
    _needs("seccomp", monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    attack = _body("extern char** environ;\nok = environ != 0 && environ[0] != 0;\n")
    assert _attempt(attack, ALL, monkeypatch) == "failed"


def test_every_layer_the_platform_grants_is_in_force(monkeypatch):
    """Each layer this platform allows is set up (the limits always; a user and network namespace where
    `unshare` can make one; the filter where libseccomp is installed), and each proof says so."""
    import ctypes.util
    import shutil
    expected = {"rlimits", "no_new_privs"}
    if shutil.which("unshare") and subprocess.run(["unshare", "--user", "--net", "true"], capture_output=True).returncode == 0:
        expected.add("namespaces")
    if ctypes.util.find_library("seccomp"):
        expected.add("seccomp")
    layers = _in_force(monkeypatch)
    assert expected <= set(layers), layers
