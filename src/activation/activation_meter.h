// Counts the activation memory of training passes, from the host allocator itself: while a meter
// is installed on a thread (Scope), libtorch's CPU allocator reports every allocation and free to
// it (c10's memory-reporting hook, the one the profiler uses). Allocations made inside a window
// (the trainer opens one around each training forward; a checkpointed region's recompute opens
// one inside backward) are activations: what a pass creates and autograd keeps. The meter samples
// the live activation bytes at the end of each window (what is kept for backward at that moment)
// and tracks the largest sample (kept peak) and the largest live value at any moment (transient
// peak, including temporaries). Gradients, parameters and engine buffers (allocated outside the
// windows, or not by the CPU allocator, or outliving the step: finish_step) are not counted.
// Accelerator allocations are not seen: on a GPU, read the device allocator's statistics instead.
#pragma once

#include <cstdint>
#include <memory>

namespace deepshard::activation {

class ActivationMeter {
 public:
  ActivationMeter();
  ~ActivationMeter();
  ActivationMeter(const ActivationMeter&) = delete;
  ActivationMeter& operator=(const ActivationMeter&) = delete;

  // Installs the meter on the calling thread for the scope's lifetime (and on the threads autograd
  // runs backward on, which inherit the caller's state). Frees are seen only while installed:
  // keep the scope around the whole forward and backward.
  class Scope {
   public:
    explicit Scope(ActivationMeter& meter);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    struct Guard;
    std::unique_ptr<Guard> guard_;
  };

  // A window: allocations inside it are activations. Windows nest (the outermost counts).
  void begin_window();
  void end_window();  // samples the live activation bytes
  class Window {
   public:
    explicit Window(ActivationMeter* meter) : meter_(meter) {
      if (meter_) meter_->begin_window();
    }
    ~Window() {
      if (meter_) meter_->end_window();
    }
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;

   private:
    ActivationMeter* meter_;
  };

  int64_t live_bytes() const;            // activations allocated in windows and not freed yet
  int64_t kept_peak_bytes() const;       // largest sample at a window's end since reset_peaks()
  int64_t transient_peak_bytes() const;  // largest live value since reset_peaks()
  void reset_peaks();                    // starts new peaks

  // Ends a step (after its last backward) and returns its peaks without the allocations that are
  // still alive: those outlived the backward, so they are not activations (a buffer some layer
  // allocated lazily during the forward and keeps, the loss tensor the caller holds). Then
  // forgets every allocation: the next step starts from zero.
  struct StepPeaks {
    int64_t kept = 0, transient = 0;
  };
  StepPeaks finish_step();

  // The meter installed on the calling thread (nullptr: none).
  static ActivationMeter* on_this_thread();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace deepshard::activation
