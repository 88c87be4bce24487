// run_process: see subprocess.h.
#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace fish {
namespace {

using Clock = std::chrono::steady_clock;

struct Fd {
  int fd = -1;
  ~Fd() { close_now(); }
  void close_now() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

bool make_pipe(Fd& r, Fd& w) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return false;
  r.fd = p[0];
  w.fd = p[1];
  return true;
}

}  // namespace

std::string ProcessResult::how_it_ended() const {
  if (timed_out) return fmt::format("timed out after {:.0f} s (killed)", wall_s);
  if (term_signal != 0) {
    const char* name = sigabbrev_np(term_signal);
    return fmt::format("killed by signal {} (SIG{})", term_signal, name ? name : "?");
  }
  return fmt::format("exited with status {}", exit_code);
}

Result<ProcessResult> run_process(const std::vector<std::string>& argv, double timeout_s,
                                  size_t max_bytes) {
  if (argv.empty() || argv[0].empty()) return make_error("run_process: no program given");
  const std::string& prog = argv[0];
  struct stat st {};
  if (::stat(prog.c_str(), &st) != 0)
    return make_error("{}: {}", prog, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error("{}: not a regular file", prog);
  if (::access(prog.c_str(), X_OK) != 0)
    return make_error("{}: not executable ({})", prog, std::strerror(errno));

  Fd out_r, out_w, err_r, err_w, exec_r, exec_w;  // exec_*: the child's exec errno, if it fails
  if (!make_pipe(out_r, out_w) || !make_pipe(err_r, err_w) || !make_pipe(exec_r, exec_w))
    return make_error("run_process: pipe: {}", std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return make_error("run_process: fork: {}", std::strerror(errno));
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out_w.fd, 1);
    ::dup2(err_w.fd, 2);
    ::setpgid(0, 0);  // its own group: a timeout kills what it started too
    ::execv(prog.c_str(), args.data());
    const int e = errno;
    (void)!::write(exec_w.fd, &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  out_w.close_now();
  err_w.close_now();
  exec_w.close_now();

  ProcessResult r;
  int exec_errno = 0;
  if (::read(exec_r.fd, &exec_errno, sizeof exec_errno) == ssize_t(sizeof exec_errno)) {
    ::waitpid(pid, nullptr, 0);
    return make_error("{}: cannot execute: {}", prog, std::strerror(exec_errno));
  }
  char buf[65536];
  pollfd fds[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const double left_s =
        timeout_s - std::chrono::duration<double>(Clock::now() - t0).count();
    if (left_s <= 0) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      break;
    }
    const int n = ::poll(fds, 2, int(std::min(left_s * 1000.0, 1000.0)) + 1);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        const size_t room = max_bytes > sinks[i]->size() ? max_bytes - sinks[i]->size() : 0;
        sinks[i]->append(buf, std::min(size_t(got), room));
      } else if (got == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !r.timed_out) r.term_signal = WTERMSIG(status);
  return r;
}

}  // namespace fish
