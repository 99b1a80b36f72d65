// Multi-rank scenarios for Engine::save_checkpoint / load_checkpoint misuse, run by
// tests/train/checkpoint_collective_test.cpp: ranks calling different checkpoint operations, a
// save on rank 0 only, a save inside an accumulation window, module state in a model-parallel
// layout. Every rank must get an error (never hang) and check its text.
#include <torch/torch.h>

#include <string>

#include "comm/transport_options.h"
#include "deepshard/checkpoint/tensor_slice.h"
#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"
#include "deepshard/zero/engine.h"
#include "workers/worker.h"

namespace deepshard::testing {
namespace {

config::DsConfig ds_config(int stage, int world, int64_t gas) {
  config::DsConfig c;
  c.train_micro_batch_size_per_gpu = 2;
  c.gradient_accumulation_steps = gas;
  c.train_batch_size = 2 * gas * world;
  c.optimizer.type = "AdamW";
  c.optimizer.lr = 1e-3;
  c.zero.stage = stage;
  return c;
}

models::GptConfig tiny() {
  models::GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  c.vocab_size = 32;
  return c;
}

void micro_step(models::Gpt& model, zero::Engine& engine) {
  auto x = torch::randint(0, 32, {2, 9}, torch::kLong);
  engine.backward(model->loss(x.narrow(1, 0, 8), x.narrow(1, 1, 8)));
  engine.step();
}

// Runs `fn`, expecting an exception whose text contains `want`; returns it.
template <typename Fn>
std::string expect_error(Fn&& fn, const std::string& want) {
  try {
    fn();
  } catch (const std::exception& e) {
    DS_WORKER_EXPECT(std::string(e.what()).find(want) != std::string::npos,
                     "error '" << e.what() << "' does not contain '" << want << "'");
    std::printf("got the expected error: %s\n", e.what());
    return e.what();
  }
  DS_WORKER_EXPECT(false, "no error; expected '" << want << "'");
  return "";
}

// args: stage, checkpoint dir. Rank 0 saves, the others load.
DS_WORKER_SCENARIO(save_vs_load) {
  models::Gpt model(tiny(), 1);
  auto engine =
      zero::Engine::initialize(model.ptr(), ds_config(std::stoi(args[0]), group.size(), 1), group);
  micro_step(model, *engine);
  const std::string dir = args[1];
  const std::string message = expect_error(
      [&] {
        if (group.rank() == 0) {
          engine->save_checkpoint(dir, "t1");
        } else {
          engine->load_checkpoint(dir, "t1");
        }
      },
      "the ranks called different collective operations");
  DS_WORKER_EXPECT(
      message.find("rank 0: save_checkpoint(dir '" + dir + "', tag 't1')") != std::string::npos,
      message);
  DS_WORKER_EXPECT(message.find("rank 1: load_checkpoint") != std::string::npos, message);
}

// args: stage, checkpoint dir. Rank 0 saves while the others go on to a barrier (and then exit):
// rank 0 gets an error (after the group's timeout at worst) instead of hanging; what the others'
// barrier does with rank 0's unmatched messages is Gloo's business.
DS_WORKER_SCENARIO(save_on_rank0_only) {
  models::Gpt model(tiny(), 1);
  auto engine =
      zero::Engine::initialize(model.ptr(), ds_config(std::stoi(args[0]), group.size(), 1), group);
  micro_step(model, *engine);
  if (group.rank() == 0) {
    expect_error([&] { engine->save_checkpoint(args[1], "t2"); }, "");
  } else {
    try {
      group.barrier();
    } catch (const std::exception& e) {
      std::printf("barrier: %s\n", e.what());
    }
  }
}

// args: stage, checkpoint dir. A save after the first of two micro-steps is refused on every rank.
DS_WORKER_SCENARIO(save_inside_window) {
  models::Gpt model(tiny(), 1);
  auto engine =
      zero::Engine::initialize(model.ptr(), ds_config(std::stoi(args[0]), group.size(), 2), group);
  micro_step(model, *engine);
  expect_error([&] { engine->save_checkpoint(args[1], "t3"); },
               "inside a gradient accumulation window (micro-step 1 of 2)");
  micro_step(model, *engine);
  engine->save_checkpoint(args[1], "t3");  // at the boundary: fine
  engine->load_checkpoint(args[1]);
}

// args: stage, checkpoint dir. checkpoint.tag_validation with each rank given its own tag: Fail is
// an error on every rank naming the tags (nothing saved); Warn and Ignore save under rank 0's tag.
DS_WORKER_SCENARIO(tag_validation) {
  for (const char* mode : {"Fail", "Warn", "Ignore"}) {
    models::Gpt model(tiny(), 1);
    auto config = ds_config(std::stoi(args[0]), group.size(), 1);
    config.checkpoint.tag_validation = mode;
    auto engine = zero::Engine::initialize(model.ptr(), config, group);
    micro_step(model, *engine);
    const std::string dir = args[1] + "/" + mode;
    const std::string tag = "t" + std::to_string(group.rank());
    if (std::string(mode) == "Fail") {
      expect_error([&] { engine->save_checkpoint(dir, tag); },
                   "checkpoint.tag_validation=Fail and the ranks were given different tags "
                   "(rank 0 't0', rank 1 't1')");
    } else {
      engine->save_checkpoint(dir, tag);
      const auto loaded = engine->load_checkpoint(dir);
      DS_WORKER_EXPECT(loaded.tag == "t0", mode << ": loaded tag " << loaded.tag);
    }
  }
}

// args: stage, checkpoint dir. Module state in a model-parallel layout is refused at save on every
// rank (and at load, by the same check), naming the tensor (docs/checkpoint.md, "Pipeline
// layouts"): a buffer with the two ranks as the stages of a pipeline, and a frozen parameter the
// tensor split cuts with them as tensor ranks. Each rank's engine runs over its own one-member data
// group.
DS_WORKER_SCENARIO(model_parallel_module_state) {
  auto data = comm::create_subgroup(group, {group.rank()}, "data/" + std::to_string(group.rank()),
                                    comm::GroupOptions{});
  for (const bool pipeline : {true, false}) {
    models::Gpt model(tiny(), 1);
    if (pipeline) {
      model->register_buffer("counter", torch::zeros({4}));
    } else {
      model->blocks[0]->named_parameters()["attn.c_attn.weight"].set_requires_grad(false);
    }
    auto engine = zero::Engine::initialize(model.ptr(), ds_config(std::stoi(args[0]), 1, 1), *data);
    zero::CheckpointLayout layout;
    layout.job = &group;
    layout.pipeline = pipeline ? 2 : 1;
    layout.tensor = pipeline ? 1 : 2;
    const int t = pipeline ? 0 : group.rank();
    layout.slice = [pipeline, t](const std::string& name) {
      checkpoint::TensorSlice slice;
      if (!pipeline && name.find("c_attn.weight") != std::string::npos) {
        slice.dim = 0;
        slice.blocks = 3;
        slice.rank = t;
        slice.size = 2;
      }
      return slice;
    };
    engine->set_checkpoint_layout(layout);
    micro_step(model, *engine);
    const std::string want = pipeline ? "checkpoint: 'counter' is module state (a buffer or frozen "
                                        "parameter) of a pipeline of 2 stages"
                                      : "checkpoint: 'h.0.attn.c_attn.weight' is a frozen "
                                        "parameter split over 2 tensor ranks";
    expect_error([&] { engine->save_checkpoint(args[1], "t4"); }, want);
  }
}

}  // namespace
}  // namespace deepshard::testing
