// SPDX-License-Identifier: BSD-3-Clause
// et-agent: serves wire-format requests with the real ExecuTorch runtime.
//
//   et-agent [--no-records] [--session]               requests on stdin, reports on stdout
//   et-agent [--no-records] --oneshot REQUESTS REPORTS  a file of requests in, reports out
//   et-agent --version | --help
//
// Logs go to stderr only. See docs/agent.md. A REBOOT it serves (ET_AGENT_REBOOT=1, as
// root: a board of its own) is answered, and the kernel rebooted at the end of the input.
#include <executorch/runtime/platform/runtime.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "agent.h"
#include "etb/wire.h"
#include "message_reader.h"
#include "recording_backend.h"
#include "report_builder.h"
#include "runtime_label.h"
#include "runtime_log.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitIoError = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: et-agent [--no-records] [--session]\n"
    "       et-agent [--no-records] --oneshot REQUESTS.bin REPORTS.bin\n"
    "       et-agent --version\n"
    "\n"
    "Serves wire-format v2 requests (docs/wire-format.md) with the ExecuTorch\n"
    "runtime: in session mode (the default) from stdin, each report written to\n"
    "stdout as soon as it is ready; in one-shot mode from a file of back-to-back\n"
    "requests, the reports written back to back to REPORTS.bin. Logs go to stderr.\n"
    "--no-records: the real backends' calls are forwarded without being recorded.\n"
    "Exits 0 at the end of the input.\n";

bool write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t put = ::write(fd, data, size);
    if (put < 0) {
      if (errno == EINTR) {
        continue;
      }
      std::fprintf(stderr, "et-agent: write failed: %s\n", std::strerror(errno));
      return false;
    }
    data += put;
    size -= static_cast<size_t>(put);
  }
  return true;
}

// Buffers live on the heap: a decoded request references its message bytes
// and a report may take up to the maximum message size.
struct Buffers {
  etb_request_t request{};
  std::vector<etb_option_t> option_pool = std::vector<etb_option_t>(ETB_MAX_REQUEST_OPTIONS);
  std::vector<uint8_t> out = std::vector<uint8_t>(ETB_MAX_MESSAGE);
  etb::ReportBuilder report;
};

// version: the refused unit's version byte, named in a VERSION refusal's message.
void reject(etb::ReportBuilder& report, uint32_t seq, etb_status_t error, uint8_t version) {
  std::string message = std::string("request refused by the agent's decoder: ") + etb_status_name(error);
  if (error == ETB_ERR_VERSION) {
    message += " (the request is wire-format version " + std::to_string(version) + ", this agent speaks version " +
               std::to_string(ETB_WIRE_VERSION) + ")";
  }
  report.start(seq, ETB_ACTION_NONE);
  report.set_outcome(ETB_OUTCOME_REJECTED, static_cast<uint32_t>(error), message);
}

int serve(int in_fd, int out_fd) {
  etb::Agent agent;
  auto buffers = std::make_unique<Buffers>();
  etb::MessageReader reader(in_fd, ETB_MSG_REQUEST, ETB_MAX_MESSAGE);
  for (;;) {
    const etb::MessageReader::Item item = reader.next();
    if (item.kind == etb::MessageReader::Kind::kEnd) {
      if (agent.reboot_pending()) {  // REBOOT answered: the board reboots once the host hangs up
        etb::reboot_board();
        std::fprintf(stderr, "et-agent: the kernel refused to reboot: %s\n", std::strerror(errno));
        return kExitIoError;
      }
      return kExitOk;
    }
    if (item.kind == etb::MessageReader::Kind::kRejected) {
      std::fprintf(stderr, "et-agent: refused input (seq %u): %s\n", item.seq, etb_status_name(item.error));
      reject(buffers->report, item.seq, item.error, item.version);
    } else {
      const etb_status_t status = etb_decode_request(item.data, item.size, &buffers->request,
                                                     buffers->option_pool.data(), buffers->option_pool.size());
      if (status != ETB_OK) {
        std::fprintf(stderr, "et-agent: refused request seq %u: %s\n", item.seq, etb_status_name(status));
        reject(buffers->report, item.seq, status, item.version);
      } else {
        buffers->report.start(buffers->request.seq, buffers->request.action);
        agent.handle(buffers->request, buffers->report);
      }
    }
    size_t size = 0;
    const etb_status_t encoded = buffers->report.encode(buffers->out.data(), buffers->out.size(), &size);
    if (encoded != ETB_OK) {
      std::fprintf(stderr, "et-agent: cannot encode report: %s\n", etb_status_name(encoded));
      return kExitIoError;
    }
    if (!write_all(out_fd, buffers->out.data(), size)) {
      return kExitIoError;
    }
  }
}

int run_session() {
  // Reports get a private copy of stdout; fd 1 then points at stderr, so
  // nothing the runtime or a library prints can corrupt the report stream.
  const int report_fd = ::dup(STDOUT_FILENO);
  if (report_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::fprintf(stderr, "et-agent: cannot set up stdout: %s\n", std::strerror(errno));
    return kExitIoError;
  }
  const int code = serve(STDIN_FILENO, report_fd);
  ::close(report_fd);
  return code;
}

int run_oneshot(const char* requests_path, const char* reports_path) {
  const int in_fd = ::open(requests_path, O_RDONLY | O_CLOEXEC);
  if (in_fd < 0) {
    std::fprintf(stderr, "et-agent: cannot open %s: %s\n", requests_path, std::strerror(errno));
    return kExitIoError;
  }
  const int out_fd = ::open(reports_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    std::fprintf(stderr, "et-agent: cannot create %s: %s\n", reports_path, std::strerror(errno));
    ::close(in_fd);
    return kExitIoError;
  }
  int code = serve(in_fd, out_fd);
  ::close(in_fd);
  if (::close(out_fd) != 0 && code == kExitOk) {
    std::fprintf(stderr, "et-agent: cannot write %s: %s\n", reports_path, std::strerror(errno));
    code = kExitIoError;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--no-records") {
    etb::RecordingBackend::set_recording(false);
    args.erase(args.begin());
  }
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (args.size() == 1 && args[0] == "--version") {
    std::printf("et-agent %s (executorch %s, %s, wire format v%u)\n", ETB_AGENT_VERSION, etb::runtime_label(), ETB_ABI,
                ETB_WIRE_VERSION);
    return kExitOk;
  }
  const bool session = args.empty() || (args.size() == 1 && args[0] == "--session");
  const bool oneshot = args.size() == 3 && args[0] == "--oneshot";
  if (!session && !oneshot) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  ::signal(SIGPIPE, SIG_IGN);  // a vanished host is a write error, not a crash
  etb::install_runtime_log();  // before anything is loaded: missing operators are named
  executorch::runtime::runtime_init();
  std::fprintf(stderr, "et-agent %s: executorch %s, %s, %s mode\n", ETB_AGENT_VERSION, etb::runtime_label(), ETB_ABI,
               session ? "session" : "one-shot");
  return session ? run_session() : run_oneshot(args[1].c_str(), args[2].c_str());
}
