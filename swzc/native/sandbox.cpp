// swzc sandbox: runs a program built from outside text (the swizzle prover) with every layer of isolation
// the platform grants, then becomes that program.
//
//   swzc-sandbox FD MEMORY_BYTES CPU_SECONDS LAYERS [ARG...]
//
// FD is an open descriptor of the program to run (the bytes swzc hashed: nothing is looked up by name).
// LAYERS names the layers to set up, comma-separated, from "rlimits", "namespaces" and "seccomp"; a
// layer the platform refuses is left out and the run goes on.  Before it becomes the program, the
// launcher writes one line to stderr: "swzc-sandbox: " and the layers that are in force.
//
// - rlimits: address space MEMORY_BYTES, CPU time CPU_SECONDS, no file may grow past 0 bytes, no core
//   dump, at most 32 descriptors, no new process of this user (where the user has no CAP_SYS_RESOURCE).
// - namespaces: a new user and network namespace: no interface but a loopback that is down, so no
//   address, local or remote, can be reached.
// - seccomp (through libseccomp, loaded at run time): every system call not listed below kills the
//   process (SIGSYS).  Files may be opened only to read (the dynamic loader needs that), ioctl may only
//   ask whether a descriptor is a terminal, and the only program that may be executed is FD itself, once:
//   FD is closed on exec and no descriptor can be opened to take its number again.  No socket, no
//   process or thread, no write to any file but the open pipes, no signal to another process.
// The environment is emptied; the working folder is the one swzc gives (its private folder).
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

namespace {

// libseccomp's interface (seccomp.h), declared here so that only the shared library is needed.
typedef void* scmp_filter_ctx;
typedef uint64_t scmp_datum_t;
struct scmp_arg_cmp {
  unsigned int arg;
  int op;  // enum scmp_compare
  scmp_datum_t datum_a;
  scmp_datum_t datum_b;
};
const int SCMP_CMP_EQ = 4;
const int SCMP_CMP_MASKED_EQ = 7;
const uint32_t SCMP_ACT_KILL_PROCESS = 0x80000000U;
const uint32_t SCMP_ACT_ALLOW = 0x7fff0000U;

struct Seccomp {
  scmp_filter_ctx (*init)(uint32_t);
  int (*rule_add_array)(scmp_filter_ctx, uint32_t, int, unsigned int, const scmp_arg_cmp*);
  int (*load)(scmp_filter_ctx);
  void (*release)(scmp_filter_ctx);
  int (*resolve)(const char*);
};

// Calls a program needs to start (dynamic loader, C and C++ runtimes, the sanitizer's report), read its
// requests, allocate, answer and exit.
const char* const kAllowed[] = {
    "read", "write", "readv", "writev", "pread64", "close", "fstat", "newfstatat", "lseek", "brk", "mmap",
    "mprotect", "munmap", "mremap", "madvise", "rt_sigreturn", "rt_sigaction", "rt_sigprocmask",
    "sigaltstack", "exit", "exit_group", "arch_prctl", "set_tid_address", "set_robust_list", "rseq",
    "getrandom", "futex", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getpid", "gettid",
    "getuid", "geteuid", "getgid", "getegid", "uname", "sched_yield", "clock_gettime", "gettimeofday",
    "prlimit64", "getrlimit", "getcwd", "statx", "sysinfo",
};

bool install_seccomp(int fd) {
  void* lib = dlopen("libseccomp.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  Seccomp s;
  s.init = reinterpret_cast<scmp_filter_ctx (*)(uint32_t)>(dlsym(lib, "seccomp_init"));
  s.rule_add_array = reinterpret_cast<int (*)(scmp_filter_ctx, uint32_t, int, unsigned int, const scmp_arg_cmp*)>(
      dlsym(lib, "seccomp_rule_add_array"));
  s.load = reinterpret_cast<int (*)(scmp_filter_ctx)>(dlsym(lib, "seccomp_load"));
  s.release = reinterpret_cast<void (*)(scmp_filter_ctx)>(dlsym(lib, "seccomp_release"));
  s.resolve = reinterpret_cast<int (*)(const char*)>(dlsym(lib, "seccomp_syscall_resolve_name"));
  if (!s.init || !s.rule_add_array || !s.load || !s.release || !s.resolve) return false;
  scmp_filter_ctx ctx = s.init(SCMP_ACT_KILL_PROCESS);
  if (ctx == nullptr) return false;
  bool ok = true;
  for (const char* name : kAllowed) {
    const int nr = s.resolve(name);
    if (nr >= 0) ok = ok && s.rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 0, nullptr) == 0;
  }
  // Files only to read: no access mode but O_RDONLY, and nothing that creates, truncates or appends.
  const scmp_datum_t writes = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND;
  const scmp_arg_cmp open_flags = {1, SCMP_CMP_MASKED_EQ, writes, 0};
  const scmp_arg_cmp openat_flags = {2, SCMP_CMP_MASKED_EQ, writes, 0};
  const int open_nr = s.resolve("open"), openat_nr = s.resolve("openat");
  if (open_nr >= 0) ok = ok && s.rule_add_array(ctx, SCMP_ACT_ALLOW, open_nr, 1, &open_flags) == 0;
  if (openat_nr >= 0) ok = ok && s.rule_add_array(ctx, SCMP_ACT_ALLOW, openat_nr, 1, &openat_flags) == 0;
  // ioctl only to ask whether a descriptor is a terminal (TCGETS); never TIOCSTI or any other request.
  const scmp_arg_cmp tcgets = {1, SCMP_CMP_EQ, 0x5401, 0};
  ok = ok && s.rule_add_array(ctx, SCMP_ACT_ALLOW, s.resolve("ioctl"), 1, &tcgets) == 0;
  // The one exec: of FD, which closes on it.
  const scmp_arg_cmp the_program = {0, SCMP_CMP_EQ, static_cast<scmp_datum_t>(fd), 0};
  ok = ok && s.rule_add_array(ctx, SCMP_ACT_ALLOW, s.resolve("execveat"), 1, &the_program) == 0;
  ok = ok && s.load(ctx) == 0;
  s.release(ctx);
  return ok;
}

bool set_limits(rlim_t memory, rlim_t cpu) {
  struct Limit {
    int resource;
    rlim_t value;
  };
  const Limit limits[] = {
      {RLIMIT_AS, memory}, {RLIMIT_CPU, cpu}, {RLIMIT_FSIZE, 0}, {RLIMIT_CORE, 0}, {RLIMIT_NOFILE, 32},
      {RLIMIT_NPROC, 0},
  };
  bool ok = true;
  for (const Limit& limit : limits) {
    const rlimit value = {limit.value, limit.value};
    ok = ok && setrlimit(limit.resource, &value) == 0;
  }
  return ok;
}

bool enter_namespaces() {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) return true;
  return unshare(CLONE_NEWNET) == 0;  // a user with the right to do it without a user namespace
}

bool wanted(const std::string& layers, const char* layer) {
  return ("," + layers + ",").find(std::string(",") + layer + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: swzc-sandbox FD MEMORY_BYTES CPU_SECONDS LAYERS [ARG...]\n");
    return 125;
  }
  const int fd = std::atoi(argv[1]);
  const rlim_t memory = std::strtoull(argv[2], nullptr, 10);
  const rlim_t cpu = std::strtoull(argv[3], nullptr, 10);
  const std::string layers = argv[4];
  if (fd < 3 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    std::fprintf(stderr, "swzc-sandbox: %s is not an open descriptor\n", argv[1]);
    return 125;
  }
  std::string in_force;
  // The namespaces first: entering a user namespace resets the limits' owner, not their values.
  if (wanted(layers, "namespaces") && enter_namespaces()) in_force += ",namespaces";
  if (wanted(layers, "rlimits") && set_limits(memory, cpu)) in_force += ",rlimits";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) in_force += ",no_new_privs";
  if (wanted(layers, "seccomp") && in_force.find("no_new_privs") != std::string::npos && install_seccomp(fd))
    in_force += ",seccomp";
  std::fprintf(stderr, "swzc-sandbox: %s\n", in_force.empty() ? "none" : in_force.c_str() + 1);
  std::fflush(stderr);
  char* no_environment[] = {nullptr};
  argv[4] = argv[0];  // the program's own argv[0]
  syscall(SYS_execveat, fd, "", argv + 4, no_environment, AT_EMPTY_PATH);
  std::fprintf(stderr, "swzc-sandbox: cannot run the program: %s\n", std::strerror(errno));
  return 126;
}
