"""The Python tests' model and data: a tiny language model in plain PyTorch with a tied weight (the
output head is the embedding), a frozen parameter and a buffer, and deterministic token batches
(sample i of step s is the same whichever rank draws it)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, CONTEXT, LAYERS = 32, 16, 8, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied
        # Frozen: a fixed per-position gain (trained by no one).
        self.position_gain = nn.Parameter(torch.linspace(0.5, 1.5, CONTEXT).unsqueeze(1),
                                          requires_grad=False)
        # A buffer: sinusoidal positions.
        pos = torch.arange(CONTEXT).unsqueeze(1) * torch.arange(1, DIM + 1) / DIM
        self.register_buffer("positions", torch.sin(pos))

    def forward(self, tokens):
        x = self.embed(tokens[:, :-1]) * self.position_gain + self.positions
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB).float(), tokens[:, 1:].reshape(-1))


def build_model(seed=1):
    torch.manual_seed(seed)
    return TinyLM()


def samples(step, first, count):
    """Samples [first, first + count) of step `step`: [count, CONTEXT + 1] tokens following a
    simple rule with noise."""
    rows = []
    for i in range(first, first + count):
        g = torch.Generator().manual_seed(1000003 * step + i)
        start = torch.randint(0, VOCAB, (1,), generator=g)
        stride = torch.randint(1, 4, (1,), generator=g)
        row = (start + stride * torch.arange(CONTEXT + 1)) % VOCAB
        noise = torch.randint(0, VOCAB, row.shape, generator=g)
        rows.append(torch.where(torch.rand(row.shape, generator=g) < 0.1, noise, row))
    return torch.stack(rows)


def adamw_reference(config, world, steps):
    """The model trained in one process with torch.optim.AdamW on the whole global batch of every
    step (decay on matrices only, as the engines apply it; gradient clipping as the config's):
    per-step losses and the final parameters. `world`: the ranks the global batch is for, or a
    function of the step giving it (a run resumed at another world size)."""
    world_at = world if callable(world) else (lambda step: world)
    model = build_model()
    opt = config["optimizer"]["params"]
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": opt["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"])
    losses = []
    for step in range(steps):
        global_batch = config["train_micro_batch_size_per_gpu"] * \
            config["gradient_accumulation_steps"] * world_at(step)
        loss = model(samples(step, 0, global_batch))
        optimizer.zero_grad()
        loss.backward()
        if config.get("gradient_clipping"):
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                           config["gradient_clipping"])
        optimizer.step()
        losses.append(loss.item())
    return losses, {n: p.detach().clone() for n, p in model.state_dict().items()}
