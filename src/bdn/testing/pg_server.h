// PgServer: a throwaway PostgreSQL server for tests, started by the test itself: initdb into a
// private temporary directory, then `postgres` on a free port of 127.0.0.1 (and its socket in
// that directory), with fsync off; stopped (fast shutdown) and removed when destroyed. PostgreSQL
// refuses to run as root, so as root the server runs as the `postgres` OS user, which Debian's
// postgresql package creates (scripts/setup.sh installs it). Header-only; for tests only.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace bdn::testutil {

class PgServer {
 public:
  // Starts a server. On failure returns null and sets `why` (no PostgreSQL installed, no
  // `postgres` user for a root caller, initdb or the server failing, with its log's end).
  static std::unique_ptr<PgServer> Start(std::string* why) {
    std::unique_ptr<PgServer> s(new PgServer());
    if (!s->Init(why) || !s->Launch(why)) return nullptr;
    return s;
  }

  ~PgServer() {
    Stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  int port() const { return port_; }
  // A URL for database `db` as the superuser "postgres" (trust authentication on 127.0.0.1).
  std::string Url(const std::string& db) const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }

  // Stops the server (SIGINT: fast shutdown, every connection ended) and waits for it to exit.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGINT);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }

  // Starts the stopped server again on the same port and data. False (and `why`) on failure.
  bool Restart(std::string* why) {
    Stop();
    return Launch(why);
  }

 private:
  PgServer() = default;

  // The directory of initdb and postgres: $BDN_PG_BINDIR, else the newest
  // /usr/lib/postgresql/<version>/bin.
  static std::string BinDir() {
    if (const char* env = std::getenv("BDN_PG_BINDIR")) return env;
    std::vector<std::filesystem::path> found;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      if (std::filesystem::exists(e.path() / "bin" / "postgres", ec)) found.push_back(e.path());
    }
    if (found.empty()) return "";
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      return std::stoi(a.filename().string()) < std::stoi(b.filename().string());
    });
    return (found.back() / "bin").string();
  }

  // Runs argv (as the server's user), its output appended to <dir>/log; returns the pid, or -1.
  pid_t Spawn(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const std::string log = (dir_ / "log").string();
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    // Child: only async-signal-safe calls until exec.
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (uid_ >= 0) {
      gid_t g = static_cast<gid_t>(gid_);
      if (::setgroups(1, &g) != 0 || ::setgid(g) != 0 || ::setuid(static_cast<uid_t>(uid_)) != 0) {
        ::_exit(126);
      }
    }
    // A test killed (a timeout, a crash) takes its server with it: fast shutdown. Set after the
    // change of user, which clears it.
    ::prctl(PR_SET_PDEATHSIG, SIGINT);
    if (::getppid() != parent) ::_exit(125);
    if (::chdir(dir_.c_str()) != 0) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }

  std::string LogTail() const {
    std::ifstream in(dir_ / "log");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  }

  bool Init(std::string* why) {
    bin_ = BinDir();
    if (bin_.empty()) {
      *why =
          "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres; "
          "apt-get install postgresql, or set BDN_PG_BINDIR)";
      return false;
    }
    std::string t = (std::filesystem::temp_directory_path() / "bdn-pg.XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) {
      *why = "mkdtemp failed";
      return false;
    }
    dir_ = t;
    if (::geteuid() == 0) {
      struct passwd* pw = ::getpwnam("postgres");
      if (!pw) {
        *why =
            "running as root, and there is no `postgres` OS user to run PostgreSQL as "
            "(apt-get install postgresql creates it)";
        return false;
      }
      uid_ = static_cast<int>(pw->pw_uid);
      gid_ = static_cast<int>(pw->pw_gid);
      if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        *why = "chown " + dir_.string() + " to postgres failed";
        return false;
      }
    }
    pid_t pid = Spawn({bin_ + "/initdb", "-D", (dir_ / "data").string(), "-U", "postgres",
                       "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"});
    int st = 0;
    if (pid < 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      *why = "initdb failed: " + LogTail();
      return false;
    }
    port_ = FreePort();
    if (port_ <= 0) {
      *why = "no free port on 127.0.0.1";
      return false;
    }
    return true;
  }

  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    ::close(fd);
    return port;
  }

  // Starts postgres and waits until its postmaster.pid says "ready" (PostgreSQL 10 and later
  // write the state as the file's eighth line).
  bool Launch(std::string* why) {
    pid_ = Spawn({bin_ + "/postgres", "-D", (dir_ / "data").string(), "-p", std::to_string(port_),
                  "-k", dir_.string(), "-h", "127.0.0.1", "-c", "fsync=off", "-c",
                  "synchronous_commit=off", "-c", "full_page_writes=off", "-c",
                  "max_connections=300"});
    if (pid_ < 0) {
      *why = "fork failed";
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        *why = "postgres exited at start: " + LogTail();
        return false;
      }
      std::ifstream pidfile(dir_ / "data" / "postmaster.pid");
      std::string line;
      int lines = 0;
      while (lines < 8 && std::getline(pidfile, line)) ++lines;
      if (lines == 8 && line.starts_with("ready")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *why = "postgres did not become ready within 60 s: " + LogTail();
    return false;
  }

  std::filesystem::path dir_;
  std::string bin_;
  int uid_ = -1, gid_ = -1;  // the server's user when started by root
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace bdn::testutil
