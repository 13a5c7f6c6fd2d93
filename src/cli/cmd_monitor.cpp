// `gpuopt monitor`: a terminal UI in the spirit of nvitop/nvtop (panel per GPU with bars and a
// utilisation history, process table, diagnosis), `--once` a snapshot table, `--json` a JSON
// snapshot or a stream of one object per line. The screen layout lives in gpu/tui_layout.h;
// this file only draws it with ncurses and handles keys.
#include "cli/command.h"
#include "monitor/diagnosis.h"
#include "monitor/sampler.h"
#include "monitor/sampler_json.h"
#include "monitor/tui_layout.h"

#include <curses.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>

namespace gpuopt::cli {
namespace {

using namespace gpuopt::gpu;

struct Options {
  bool once = false;
  bool json = false;
  std::string interval = "1s";
  bool interval_given = false;
  long count = 0;  // 0 = until q / Ctrl-C
  std::string sort = "memory";
  bool no_processes = false;
  std::string ids;  // -i/--id as nvidia-smi: "0,1" (indices), UUIDs or PCI bus ids; "" = every GPU
};

// The GPUs --id selects (by index, UUID or PCI bus id, as nvidia-smi -i), or an error naming
// the entry that matches no GPU and the ones there are.
Result<std::vector<unsigned>> select_gpus(const std::string& ids, const std::vector<DeviceInfo>& devices) {
  std::vector<unsigned> out;
  size_t pos = 0;
  while (pos <= ids.size()) {
    size_t comma = ids.find(',', pos);
    if (comma == std::string::npos) comma = ids.size();
    std::string id = ids.substr(pos, comma - pos);
    pos = comma + 1;
    if (id.empty()) return Status::InvalidArgument("--id '{}': an empty entry (expected e.g. 0,1)", ids);
    bool found = false;
    for (const DeviceInfo& d : devices)
      if (std::to_string(d.index) == id || d.uuid == id || d.pci_bus_id == id) {
        out.push_back(d.index);
        found = true;
      }
    if (!found)
      return Status::NotFound("--id '{}': no GPU '{}' on this machine ({} GPU(s){})", ids, id, devices.size(),
                              devices.empty() ? "" : fmt::format(": 0..{}", devices.size() - 1));
  }
  return out;
}

// The snapshot with only the selected GPUs (all when `ids` is empty).
const Snapshot& only(const Snapshot& snap, const std::vector<unsigned>& ids, Snapshot* buf) {
  if (ids.empty()) return snap;
  *buf = snap;
  buf->gpus.clear();
  for (const GpuSample& g : snap.gpus)
    if (g.info && std::find(ids.begin(), ids.end(), g.info->index) != ids.end()) buf->gpus.push_back(g);
  return *buf;
}

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

std::string title_of(const Sampler& s) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const DriverInfo& d = s.driver();
  return fmt::format("{}  driver {}  CUDA {}  {} GPU(s)", host, d.driver_version.empty() ? "n/a" : d.driver_version,
                     d.cuda_driver_version.empty() ? "n/a" : d.cuda_driver_version, s.devices().size());
}

// --once and --json without a stream: two samples one interval apart (GPM, process utilisation
// and clock-event time need an interval).
int run_snapshot(Sampler& s, const Options& o, double interval, ProcessSort sort, const std::vector<unsigned>& ids) {
  Diagnoser diag;
  Snapshot buf;
  diag.add(only(s.sample(), ids, &buf));
  std::this_thread::sleep_for(std::chrono::duration<double>(interval));
  const Snapshot& snap = only(s.sample(), ids, &buf);
  diag.add(snap);
  if (o.json) fmt::print("{}\n", snapshot_to_json(snap, diag.findings()).dump(2));
  else fmt::print("{}", render_once(snap, diag.findings(), sort));
  return kExitOk;
}

int run_stream(Sampler& s, const Options& o, double interval, const std::vector<unsigned>& ids) {
  Diagnoser diag;
  Snapshot buf;
  auto next = std::chrono::steady_clock::now();
  for (long n = 0; (o.count == 0 || n < o.count) && !g_stop; ++n) {
    if (n > 0) {
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(interval));
      while (!g_stop && std::chrono::steady_clock::now() < next)
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            next - std::chrono::steady_clock::now(), std::chrono::milliseconds(100)));
      if (g_stop) break;
    }
    const Snapshot& snap = only(s.sample(), ids, &buf);
    diag.add(snap);
    fmt::print("{}\n", snapshot_to_json(snap, diag.findings()).dump());
    std::fflush(stdout);
  }
  return kExitOk;
}

void draw(const Screen& sc, bool color) {
  for (int r = 0; r < sc.height; ++r) {
    int c = 0;
    while (c < sc.width) {
      Color col = sc.colors[r][c];
      int e = c;
      while (e < sc.width && sc.colors[r][e] == col) ++e;
      // The bottom-right cell scrolls some terminals: leave it.
      int len = (r == sc.height - 1 && e == sc.width) ? e - c - 1 : e - c;
      if (color) attron(COLOR_PAIR(int(col) + 1));
      if (col == Color::kHeader) attron(A_BOLD);
      if (len > 0) mvaddnstr(r, c, sc.rows[r].data() + c, len);
      if (col == Color::kHeader) attroff(A_BOLD);
      if (color) attroff(COLOR_PAIR(int(col) + 1));
      c = e;
    }
  }
}

int run_tui(Sampler& s, const Options& o, ProcessSort sort, const std::vector<unsigned>& ids) {
  if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))
    return report_error(Status::InvalidArgument("monitor: not a terminal; use --once or --json"), true);
  std::mutex mu;
  MonitorView view;
  Diagnoser diag;
  std::atomic<long> samples{0};
  std::atomic<bool> dirty{true};
  ViewOptions vo;
  vo.sort = sort;
  vo.title = title_of(s);

  if (!initscr()) return report_error(Status::Internal("monitor: cannot initialise the terminal"));
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  timeout(100);
  bool color = has_colors();
  if (color) {
    start_color();
    use_default_colors();
    init_pair(int(Color::kNormal) + 1, -1, -1);
    init_pair(int(Color::kHeader) + 1, COLOR_CYAN, -1);
    init_pair(int(Color::kGood) + 1, COLOR_GREEN, -1);
    init_pair(int(Color::kWarn) + 1, COLOR_YELLOW, -1);
    init_pair(int(Color::kBad) + 1, COLOR_RED, -1);
    init_pair(int(Color::kDim) + 1, COLOR_BLUE, -1);
  }
  Snapshot buf;
  s.start([&](const Snapshot& all) {
    std::lock_guard<std::mutex> lock(mu);
    const Snapshot& snap = only(all, ids, &buf);
    diag.add(snap);
    view.update(snap, diag.findings());
    ++samples;
    dirty = true;
  });
  bool quit = false;
  long drawn_samples = 0;
  while (!quit && !g_stop) {
    int ch = getch();
    switch (ch) {
      case 'q': case 'Q': case 27: quit = true; break;
      case 'm': case 'M': vo.sort = ProcessSort::kMemory; dirty = true; break;
      case 'u': case 'U': vo.sort = ProcessSort::kUtilization; dirty = true; break;
      case 's': case 'S':
        vo.sort = vo.sort == ProcessSort::kMemory ? ProcessSort::kUtilization : ProcessSort::kMemory;
        dirty = true;
        break;
      case KEY_RESIZE: dirty = true; break;
      default: break;
    }
    if (quit) break;
    if (dirty.exchange(false)) {
      Screen sc(1, 1);
      {
        std::lock_guard<std::mutex> lock(mu);
        sc = view.render(COLS, LINES, vo);
        drawn_samples = samples;
      }
      erase();
      draw(sc, color);
      refresh();
    }
    if (o.count > 0 && drawn_samples >= o.count) break;
  }
  s.stop();
  endwin();
  return kExitOk;
}

int run(const Options& o) {
  auto interval = parse_interval(o.interval);
  if (!interval.ok()) return report_error(interval.status(), true);
  if (o.count < 0) return report_error(Status::InvalidArgument("--count must be >= 0"), true);
  ProcessSort sort;
  if (o.sort == "memory" || o.sort == "mem") sort = ProcessSort::kMemory;
  else if (o.sort == "util" || o.sort == "utilization") sort = ProcessSort::kUtilization;
  else return report_error(Status::InvalidArgument("--sort '{}': expected memory or util", o.sort), true);
  // --id's form is checked before NVML is: a typo is a usage error on any machine.
  if (!o.ids.empty() && (o.ids.front() == ',' || o.ids.back() == ',' || o.ids.find(",,") != std::string::npos))
    return report_error(Status::InvalidArgument("--id '{}': an empty entry (expected e.g. 0,1)", o.ids), true);
  SamplerOptions so;
  so.interval_s = *interval;
  so.processes = !o.no_processes;
  auto s = Sampler::create(so);
  if (!s.ok()) return report_error(s.status().with_context("monitor"));
  std::vector<unsigned> ids;
  if (!o.ids.empty()) {
    auto sel = select_gpus(o.ids, (*s)->devices());
    if (!sel.ok()) return report_error(sel.status(), sel.status().code() == StatusCode::kInvalidArgument);
    ids = std::move(sel).value();
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  if (o.json && (o.interval_given || o.count > 0)) return run_stream(**s, o, *interval, ids);
  if (o.json || o.once) return run_snapshot(**s, o, *interval, sort, ids);
  return run_tui(**s, o, sort, ids);
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("monitor", "Watch the GPUs: live terminal UI, snapshot table or JSON, with bottleneck diagnosis");
  auto o = std::make_shared<Options>();
  cmd->add_flag("--once", o->once, "Print one snapshot table and exit (samples twice, one interval apart)");
  cmd->add_flag("--json", o->json, "JSON: one snapshot, or with --interval/--count one object per line");
  auto* iv = cmd->add_option("--interval", o->interval, "Sampling interval (1s, 500ms, 2)")->capture_default_str();
  cmd->add_option("--count", o->count, "Stop after N samples (0: until q or Ctrl-C)");
  cmd->add_option("--sort", o->sort, "Process order: memory or util (keys m/u in the UI)")->capture_default_str();
  cmd->add_flag("--no-processes", o->no_processes, "Do not list processes");
  cmd->add_option("-i,--id", o->ids, "Only these GPUs, as nvidia-smi -i: indices (0,1), UUIDs or PCI bus ids");
  cmd->callback([o, iv] {
    o->interval_given = iv->count() > 0;
    set_exit_code(run(*o));
  });
}
GPUOPT_REGISTER_COMMAND(60, setup);

}  // namespace
}  // namespace gpuopt::cli
