"""The training pipeline of DeepSpeed's ZeRO-3 walkthrough (setup_training / train_model, its config
unchanged) on a small masked-language model in plain PyTorch, with deepshard in DeepSpeed's place:
`import deepshard as deepspeed` is the only change. Run it with

    deepshard launch -n 2 -- /usr/bin/python3 examples/python/train.py [--steps N]

(PYTHONPATH=<build>/python from a build tree). train_batch_size 16 with 2 accumulation steps is a
micro-batch of 4 per rank at 2 ranks. On a CPU, fp16.enabled trains in fp32 with loss scaling
(the engine warns: libtorch has no fp16 CPU kernels)."""
import argparse
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

import deepshard as deepspeed

VOCAB, DIM, HEADS, LAYERS, CONTEXT = 128, 64, 4, 2, 32


class TinyMaskedLM(nn.Module):
    """A small encoder with an LM head: model(input_ids, labels=labels).loss, as a Hugging Face
    model is called."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.position = nn.Embedding(CONTEXT, DIM)
        layer = nn.TransformerEncoderLayer(DIM, HEADS, 4 * DIM, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, input_ids, labels=None):
        positions = torch.arange(input_ids.shape[1])
        hidden = self.encoder(self.embed(input_ids) + self.position(positions))
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
        return types.SimpleNamespace(loss=loss, logits=logits)


class MaskedTokens(torch.utils.data.Dataset):
    """Sequences following a simple rule; 15% of the positions masked (token 0) for the model to
    predict."""

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        start, stride = torch.randint(1, VOCAB, (1,), generator=g), torch.randint(1, 5, (1,),
                                                                                     generator=g)
        tokens = 1 + (start + stride * torch.arange(CONTEXT)) % (VOCAB - 1)
        masked = torch.rand(CONTEXT, generator=g) < 0.15
        return {"input_ids": torch.where(masked, 0, tokens),
                "labels": torch.where(masked, tokens, -100)}


# Initialize model with ZeRO3
def setup_training():
    model = TinyMaskedLM()
    ds_config = {
        "train_batch_size": 16,
        "gradient_accumulation_steps": 2,
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": 5e-5,
                "weight_decay": 0.1
            }
        },
        "zero_optimization": {
            "stage": 3,
            "offload_optimizer": {
                "device": "cpu",
                "pin_memory": True
            },
            "overlap_comm": True,
            "contiguous_gradients": True
        },
        "fp16": {
            "enabled": True
        }
    }
    model_engine, optimizer, _, _ = deepspeed.initialize(
        model=model,
        config=ds_config
    )
    return model_engine, optimizer


# Training loop
def train_model(model_engine, dataloader):
    for batch in dataloader:
        outputs = model_engine(batch["input_ids"], labels=batch["labels"])
        loss = outputs.loss
        model_engine.backward(loss)
        model_engine.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps")
    args = parser.parse_args()
    torch.manual_seed(0)
    model_engine, optimizer = setup_training()
    micro = model_engine.train_micro_batch_size_per_gpu()
    samples = args.steps * model_engine.train_batch_size()
    dataset = MaskedTokens(samples)
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=model_engine.world_size, rank=model_engine.global_rank,
        shuffle=False)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=micro, sampler=sampler)
    first = model_engine(next(iter(dataloader))["input_ids"],
                         labels=next(iter(dataloader))["labels"]).loss.item()
    train_model(model_engine, dataloader)
    last = model_engine(next(iter(dataloader))["input_ids"],
                        labels=next(iter(dataloader))["labels"]).loss.item()
    if model_engine.global_rank == 0:
        print(f"{model_engine.global_steps} steps, loss on the first batch {first:.4f} -> "
              f"{last:.4f}, lr {model_engine.get_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
