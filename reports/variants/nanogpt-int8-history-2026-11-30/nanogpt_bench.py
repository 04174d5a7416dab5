"""perfsuite workloads for nanoGPT's model.py, written to run on every revision of model.py.

The GPTConfig fields differ across history (no `bias` before cc5444e1, dropout defaulted to 0.1
early on), so the config is built from the fields the revision's GPTConfig accepts.
configure_optimizers' signature changed too (device_type added later)."""
import dataclasses
import inspect

import torch

import perfsuite
import model as nanogpt_model  # nanoGPT's model.py at the repository root


def make_model(n_layer, n_head, n_embd, block_size, vocab_size, device, bias=None):
    GPTConfig, GPT = nanogpt_model.GPTConfig, nanogpt_model.GPT
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    kw = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size)
    if vocab_size:  # 0: the revision's own default (50257 before 77e7e04c, 50304 after)
        kw["vocab_size"] = vocab_size
    if "dropout" in fields:
        kw["dropout"] = 0.0
    if bias is not None and "bias" in fields:
        kw["bias"] = bias
    kw = {k: v for k, v in kw.items() if k in fields}
    config = GPTConfig(**kw)
    torch.manual_seed(0)
    model = GPT(config).to(device)
    return model, config


def make_optimizer(model, device, which):
    if which == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    sig = inspect.signature(model.configure_optimizers).parameters
    kw = dict(weight_decay=0.1, learning_rate=1e-4, betas=(0.9, 0.95))
    if "device_type" in sig:
        kw["device_type"] = "cuda" if str(device).startswith("cuda") else "cpu"
    return model.configure_optimizers(**kw)


COMMON = dict(n_layer=2, n_head=4, n_embd=128, block_size=64)


@perfsuite.workload(params={"batch_size": 4, "vocab_size": perfsuite.param(512, help="0 = the revision's GPTConfig default"),
                            "opt": perfsuite.param("model", choices=["model", "adamw"])})
def nanogpt_train(batch_size: int, vocab_size: int, opt: str, device: str):
    """nanoGPT training step: forward, cross-entropy, backward, AdamW (the model's configure_optimizers)."""
    model, config = make_model(vocab_size=vocab_size, device=device, **COMMON)
    model.train()
    optimizer = make_optimizer(model, device, opt)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, config.vocab_size, (batch_size, config.block_size), generator=g).to(device)
    y = torch.randint(0, config.vocab_size, (batch_size, config.block_size), generator=g).to(device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        optimizer.step()

    return perfsuite.Step(step, items=batch_size * config.block_size, unit="tokens")


@perfsuite.workload(params={"batch_size": 8, "vocab_size": perfsuite.param(512, help="0 = the revision's GPTConfig default")})
def nanogpt_forward(batch_size: int, vocab_size: int, device: str):
    """nanoGPT inference forward pass (no targets) over a full block, under no_grad."""
    model, config = make_model(vocab_size=vocab_size, device=device, **COMMON)
    model.eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, config.vocab_size, (batch_size, config.block_size), generator=g).to(device)

    def step():
        with torch.no_grad():
            model(x)

    return perfsuite.Step(step, items=batch_size * config.block_size, unit="tokens", model=model, inputs=(x,))


@perfsuite.workload(params={"new_tokens": 8, "vocab_size": perfsuite.param(512, help="0 = the revision's GPTConfig default")})
def nanogpt_generate(new_tokens: int, vocab_size: int, device: str):
    """nanoGPT model.generate: a 32-token prompt, new_tokens sampled tokens, top_k=50."""
    model, config = make_model(vocab_size=vocab_size, device=device, **COMMON)
    model.eval()
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, config.vocab_size, (1, 32), generator=g).to(device)

    def step():
        torch.manual_seed(2)
        with torch.no_grad():
            model.generate(prompt, new_tokens, temperature=1.0, top_k=50)

    return perfsuite.Step(step, items=new_tokens, unit="tokens")
