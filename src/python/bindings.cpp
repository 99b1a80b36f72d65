// The `deepshard._C` Python extension: the process group from the launcher's environment, and
// zero::Engine over a Python torch.nn.Module given as a ModuleTree (the module's own tensors,
// nothing copied), and the fused kernels (ops_bindings.h). The Python package (python/deepshard)
// builds DeepSpeed's API on it.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/process_options.h"
#include "comm/transport_options.h"
#include "deepshard/comm/group.h"
#include "deepshard/comm/rendezvous.h"
#include "deepshard/config/loader.h"
#include "deepshard/sharding/sharding_plan.h"
#include "deepshard/util/error.h"
#include "deepshard/zero/engine.h"
#include "deepshard/zero/partitioned_build.h"
#include "platform/heap_policy.h"
#include "python/ops_bindings.h"
#include "util/log.h"
#include "zero/stage3/storage_resize.h"

namespace py = pybind11;
using namespace deepshard;

namespace {

// The process's group (one per process, as torch.distributed's default group).
std::unique_ptr<comm::Group>& process_group() {
  static std::unique_ptr<comm::Group> group;
  return group;
}

comm::Group& init_distributed(double timeout_s) {
  auto& group = process_group();
  if (!group) {
    const auto info = comm::rendezvous_from_env();
    log::set_rank(info.rank);
    comm::GroupOptions options;
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    py::gil_scoped_release no_gil;
    group = comm::create_group(info, options);
  }
  return *group;
}

comm::Group& group_or_throw(const char* what) {
  DS_CHECK(process_group() != nullptr, UsageError, what,
           ": no process group; call deepshard.init_distributed() first");
  return *process_group();
}

// Every call into the engine that can issue a collective releases the GIL while it waits: the
// comm thread may drop the last reference to a tensor Python owns, and freeing it takes the GIL
// (c10::TensorImpl::destroy_pyobj_if_needed), so a caller waiting with the GIL would deadlock.
// Callbacks into Python (a unit's forward, a with-block) take the GIL back.

// (parameters, buffers, children): [(name, tensor)], [(name, tensor)], [(name, node)].
zero::ModuleTree::Node to_node(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  DS_CHECK(t.size() == 3, UsageError, "module tree node: want (parameters, buffers, children)");
  zero::ModuleTree::Node node;
  for (auto item : t[0])
    node.parameters.emplace_back(item.cast<py::tuple>()[0].cast<std::string>(),
                                 item.cast<py::tuple>()[1].cast<at::Tensor>());
  for (auto item : t[1])
    node.buffers.emplace_back(item.cast<py::tuple>()[0].cast<std::string>(),
                              item.cast<py::tuple>()[1].cast<at::Tensor>());
  for (auto item : t[2])
    node.children.emplace_back(item.cast<py::tuple>()[0].cast<std::string>(),
                               to_node(item.cast<py::tuple>()[1]));
  return node;
}

// A DeepSpeed config: a JSON text (from a dict) or a file path, for the group's size.
config::DsConfig resolve_config(const std::string& json_text, const std::string& path,
                                const comm::Group& group) {
  if (!path.empty()) return config::load_ds_config(path, group.size());
  config::ResolveContext context;
  context.dp_world_size = group.size();
  context.origin = "config dict";
  std::vector<std::string> warnings;
  auto config = config::parse_ds_config(nlohmann::json::parse(json_text), context, &warnings);
  if (group.rank() == 0)
    for (const auto& w : warnings) log::warn(w);
  return config;
}

// zero.Init: partitions each unit of a Python model as it is built.
class PyPartitionedBuild {
 public:
  explicit PyPartitionedBuild(const std::string& dtype)
      : build_(group_or_throw("deepshard.zero.Init"), dtype == "bf16"   ? at::kBFloat16
                                                      : dtype == "fp16" ? at::kHalf
                                                                        : at::kFloat),
        hook_(build_.unit_hook()) {}

  // Partitions unit `index` (its submodule tree `node`).
  void partition(size_t index, const py::handle& node) {
    zero::ModuleTree unit(to_node(node));
    py::gil_scoped_release no_gil;  // collectives (see PyEngine)
    hook_(index, *unit.module());
  }
  int64_t peak_full_bytes() const { return build_.peak_full_bytes(); }
  zero::PartitionedBuild& build() { return build_; }

 private:
  zero::PartitionedBuild build_;
  sharding::UnitBuilt hook_;
};

class PyEngine {
 public:
  PyEngine(const py::handle& root, std::vector<std::string> units, const std::string& config_json,
           const std::string& config_path, PyPartitionedBuild* build)
      : tree_(to_node(root), std::move(units)) {
    auto& group = group_or_throw("deepshard.initialize");
    const auto config = resolve_config(config_json, config_path, group);
    py::gil_scoped_release no_gil;
    engine_ = zero::Engine::initialize(tree_, config, group, build ? &build->build() : nullptr);
  }
  ~PyEngine() {
    py::gil_scoped_release no_gil;  // the engine may wait for its outstanding collectives
    engine_.reset();
  }
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  zero::Engine& engine() { return *engine_; }

  // Runs unit `index`'s forward `body` (a callable returning a tensor) through the hook point.
  at::Tensor run_unit(size_t index, const py::function& body) {
    py::gil_scoped_release no_gil;  // the unit's gather and release are collectives
    return tree_.calls()(index, [&] {
      py::gil_scoped_acquire gil;
      return body().cast<at::Tensor>();
    });
  }

 private:
  zero::ModuleTree tree_;
  std::unique_ptr<zero::Engine> engine_;
};

// GatheredParameters' with-block: every parameter holds its full value between enter() and exit().
// Engine::with_full_parameters runs on a helper thread whose callback waits for exit(), so the
// block runs on the caller's thread in between (a forward in it finds the units gathered).
class FullParameters {
 public:
  explicit FullParameters(zero::Engine& engine) : engine_(engine) {}
  ~FullParameters() {
    if (thread_.joinable()) {
      py::gil_scoped_release no_gil;
      request_exit();
      thread_.join();
    }
  }

  void enter() {
    DS_CHECK(!thread_.joinable(), UsageError, "GatheredParameters: entered twice");
    py::gil_scoped_release no_gil;
    thread_ = std::thread([this] {
      try {
        engine_.with_full_parameters([this] {
          std::unique_lock<std::mutex> lock(mu_);
          held_ = true;
          cv_.notify_all();
          cv_.wait(lock, [this] { return exit_requested_; });
        });
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      cv_.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return held_ || done_; });
    if (!held_) {
      lock.unlock();
      thread_.join();
      std::rethrow_exception(error_);
    }
  }

  void exit() {
    py::gil_scoped_release no_gil;
    request_exit();
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void request_exit() {
    std::lock_guard<std::mutex> lock(mu_);
    exit_requested_ = true;
    cv_.notify_all();
  }

  zero::Engine& engine_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false, done_ = false, exit_requested_ = false;
  std::exception_ptr error_;
};

py::dict step_dict(const zero::StepResult& r) {
  py::dict d;
  d["boundary"] = r.boundary;
  d["applied"] = r.applied;
  d["skipped"] = r.skipped;
  d["grad_norm"] = r.grad_norm;
  d["lr"] = r.lr;
  d["loss_scale"] = r.loss_scale;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "deepshard's C++ engines (use the deepshard package, not this module)";
  static py::exception<Error> error(m, "DeepshardError", PyExc_RuntimeError);
  static py::exception<ConfigError> config_error(m, "ConfigError", error.ptr());
  static py::exception<CommError> comm_error(m, "CommError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      config_error(e.what());
    } catch (const CommError& e) {
      comm_error(e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });

  // The process's environment knobs, applied at import as the deepshard executable applies them
  // at start (cli/process_options.h: the log level, a forced kernel level with libtorch's oneDNN
  // use following it, the Linear backend), and the bf16 compute `deepshard train` would choose
  // (DEEPSHARD_BF16_COMPUTE, else auto: kernels/bf16_compute.h) for deepshard's kernels.
  cli::apply_process_options(cli::process_options());
  kernels::set_bf16_compute(
      cli::bf16_compute_from_environment(cli::process_options(), platform::detect_cpu()));

  m.def(
      "init_distributed",
      [](double timeout_s) {
        auto& g = init_distributed(timeout_s);
        return py::make_tuple(g.rank(), g.size());
      },
      py::arg("timeout_s") = 1800.0);
  // deepshard train's heap policy (platform/heap_policy.h) for the Python process, from the same
  // environment (DEEPSHARD_HEAP, the user's own glibc malloc settings win); the reason line.
  m.def("retain_freed_heap_memory", [] {
    const platform::HeapRequest request = cli::process_options().heap_request();
    if (!request.users_setting.empty()) zero::leave_mmap_threshold_to_user();
    return platform::retain_freed_heap_memory(request).reason;
  });
  m.def("is_initialized", [] { return process_group() != nullptr; });
  m.def("get_rank", [] { return group_or_throw("deepshard.get_rank").rank(); });
  m.def("get_world_size", [] { return group_or_throw("deepshard.get_world_size").size(); });
  m.def(
      "barrier", [] { group_or_throw("deepshard.barrier").barrier(); },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "all_reduce_sum", [](const at::Tensor& t) { group_or_throw("all_reduce").all_reduce(t); },
      py::call_guard<py::gil_scoped_release>());
  m.def("log_info", [](const std::string& s) { log::info(s); });
  m.def("log_warn", [](const std::string& s) { log::warn(s); });
  python::bind_ops(m);

  py::class_<PyPartitionedBuild>(m, "PartitionedBuild")
      .def(py::init<const std::string&>())
      .def("partition", &PyPartitionedBuild::partition)
      .def_property_readonly("peak_full_bytes", &PyPartitionedBuild::peak_full_bytes);

  py::class_<FullParameters>(m, "FullParameters")
      .def("enter", &FullParameters::enter)
      .def("exit", &FullParameters::exit);

  py::class_<PyEngine>(m, "Engine")
      .def(py::init<const py::handle&, std::vector<std::string>, const std::string&,
                    const std::string&, PyPartitionedBuild*>(),
           py::arg("tree"), py::arg("units"), py::arg("config_json"), py::arg("config_path"),
           py::arg("build") = nullptr)
      .def("run_unit", &PyEngine::run_unit)
      .def(
          "backward", [](PyEngine& e, const at::Tensor& loss) { e.engine().backward(loss); },
          py::call_guard<py::gil_scoped_release>())
      .def("step",
           [](PyEngine& e) {
             zero::StepResult r;
             {
               py::gil_scoped_release no_gil;
               r = e.engine().step();
             }
             return step_dict(r);
           })
      .def(
          "full_parameters",
          [](PyEngine& e) { return std::make_unique<FullParameters>(e.engine()); },
          py::keep_alive<0, 1>())
      .def("with_full_parameters",
           [](PyEngine& e, const py::function& fn) {
             py::gil_scoped_release no_gil;
             e.engine().with_full_parameters([&] {
               py::gil_scoped_acquire gil;
               fn();
             });
           })
      .def("save_checkpoint",
           [](PyEngine& e, const std::string& dir, const std::string& tag,
              const std::string& client_json) {
             py::gil_scoped_release no_gil;
             e.engine().save_checkpoint(dir, tag, client_json);
           })
      .def("load_checkpoint",
           [](PyEngine& e, const std::string& dir, const std::string& tag) {
             zero::LoadedCheckpoint c;
             {
               py::gil_scoped_release no_gil;
               c = e.engine().load_checkpoint(dir, tag);
             }
             py::dict d;
             d["path"] = c.path;
             d["tag"] = c.tag;
             d["client_state_json"] = c.client_state_json;
             d["global_steps"] = c.global_steps;
             d["saved_world_size"] = c.saved_world_size;
             d["saved_stage"] = c.saved_stage;
             return d;
           })
      .def_property_readonly("global_steps", [](PyEngine& e) { return e.engine().global_steps(); })
      .def_property_readonly("skipped_steps",
                             [](PyEngine& e) { return e.engine().skipped_steps(); })
      .def_property_readonly("micro_steps", [](PyEngine& e) { return e.engine().micro_steps(); })
      .def_property_readonly("current_lr", [](PyEngine& e) { return e.engine().current_lr(); })
      .def_property_readonly("loss_scale", [](PyEngine& e) { return e.engine().loss_scale(); })
      .def_property_readonly("num_parameters",
                             [](PyEngine& e) { return e.engine().num_parameters(); })
      .def_property_readonly(
          "is_gradient_accumulation_boundary",
          [](PyEngine& e) { return e.engine().is_gradient_accumulation_boundary(); })
      .def_property_readonly(
          "config_json", [](PyEngine& e) { return config::to_json(e.engine().config()).dump(); })
      .def("memory_bytes", [](PyEngine& e) {
        // The engine's ledger: bytes per category (every place) and their peaks.
        py::dict d;
        const auto& ledger = e.engine().ledger();
        for (size_t c = 0; c < static_cast<size_t>(zero::MemoryCategory::kCount); ++c) {
          const auto category = static_cast<zero::MemoryCategory>(c);
          d[zero::to_string(category)] =
              py::make_tuple(ledger.bytes(category), ledger.peak_bytes(category));
        }
        return d;
      });
}
