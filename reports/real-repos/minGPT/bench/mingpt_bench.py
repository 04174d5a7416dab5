"""perfsuite workloads for minGPT's mingpt/model.py, written to run across its history.

Two configuration eras: GPTConfig(vocab_size, block_size, **kw) up to ~2022, then
GPT.get_default_config() (a CfgNode) with model_type/n_layer/...; generation moved from
mingpt.utils.sample into GPT.generate at acaadac."""
import types

import torch

import perfsuite
import mingpt.model as M


def make_model(n_layer, n_head, n_embd, block_size, vocab_size, device):
    shape = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd)
    drops = dict(embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    if hasattr(M.GPT, "get_default_config"):
        C = M.GPT.get_default_config()
        for preset in ("model_type", "name"):  # a named preset would override n_layer/n_head/n_embd
            if hasattr(C, preset):
                setattr(C, preset, None)
        for k, v in {**shape, **drops, "vocab_size": vocab_size, "block_size": block_size}.items():
            setattr(C, k, v)
        model = M.GPT(C)
    else:
        model = M.GPT(M.GPTConfig(vocab_size, block_size, **shape, **drops))
    return model.to(device)


COMMON = dict(n_layer=2, n_head=4, n_embd=128, block_size=64)


@perfsuite.workload(params={"batch_size": 4, "vocab_size": 512})
def mingpt_train(batch_size: int, vocab_size: int, device: str):
    """minGPT training step: forward with targets, backward, torch AdamW step."""
    model = make_model(vocab_size=vocab_size, device=device, **COMMON)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    T = COMMON["block_size"]
    x = torch.randint(0, vocab_size, (batch_size, T), generator=g).to(device)
    y = torch.randint(0, vocab_size, (batch_size, T), generator=g).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        opt.step()

    return perfsuite.Step(step, items=batch_size * T, unit="tokens")


@perfsuite.workload(params={"batch_size": 8, "vocab_size": 512})
def mingpt_forward(batch_size: int, vocab_size: int, device: str):
    """minGPT inference forward pass over a full block, under no_grad."""
    model = make_model(vocab_size=vocab_size, device=device, **COMMON)
    model.eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, vocab_size, (batch_size, COMMON["block_size"]), generator=g).to(device)

    def step():
        with torch.no_grad():
            model(x)

    return perfsuite.Step(step, items=batch_size * COMMON["block_size"], unit="tokens")


@perfsuite.workload(params={"new_tokens": 8, "vocab_size": 512})
def mingpt_generate(new_tokens: int, vocab_size: int, device: str):
    """minGPT sampling: a 32-token prompt, new_tokens sampled tokens, top_k=50
    (GPT.generate, or mingpt.utils.sample before it existed)."""
    model = make_model(vocab_size=vocab_size, device=device, **COMMON)
    model.eval()
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, vocab_size, (1, 32), generator=g).to(device)
    if hasattr(model, "generate"):
        gen = lambda: model.generate(prompt, new_tokens, temperature=1.0, do_sample=True, top_k=50)
    else:
        from mingpt.utils import sample
        gen = lambda: sample(model, prompt, new_tokens, temperature=1.0, sample=True, top_k=50)

    def step():
        torch.manual_seed(2)
        with torch.no_grad():
            gen()

    return perfsuite.Step(step, items=new_tokens, unit="tokens")
