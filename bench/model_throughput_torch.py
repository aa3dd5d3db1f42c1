"""PyTorch/transformers side of bench/model_throughput.rs: same Qwen2 shapes, batches and
thread count, the same GFLOP/s accounting and a GEMM rate measured in the same run.
Run: python bench/model_throughput_torch.py --threads 2 --shape medium
(`--gradient-checkpointing`: transformers' `gradient_checkpointing_enable()`, beside the
Rust bench's MODEL_BENCH_GRADIENT_CHECKPOINTING=1).
"""
import argparse
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

TRAIN_BATCH, TRAIN_LEN = 8, 128
GEN_BATCH, GEN_PROMPT, GEN_NEW = 32, 16, 64

# name: (layers, hidden, heads, kv heads, ffn, vocab, rope theta, timed training iterations);
# the Rust bench's `Shape::named`.
SHAPES = {
    "tiny": (2, 128, 4, 4, 512, 516, 1e4, 20),
    "medium": (4, 512, 8, 8, 2048, 8192, 1e4, 5),
    "qwen0.5b": (24, 896, 14, 2, 4864, 151936, 1e6, 1),
    "smollm2": (30, 576, 9, 3, 1536, 49152, 1e5, 2),
}


def config(shape):
    layers, hidden, heads, kv, ffn, vocab, theta, _ = SHAPES[shape]
    return Qwen2Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=4096,
        rope_theta=theta, rms_norm_eps=1e-6, tie_word_embeddings=True,
    )


def dense_flops_per_token(c):
    d = c.hidden_size // c.num_attention_heads
    q, kv = c.num_attention_heads * d, c.num_key_value_heads * d
    layer = c.hidden_size * (q + 2 * kv) + q * c.hidden_size + 3 * c.hidden_size * c.intermediate_size
    return 2.0 * (c.num_hidden_layers * layer + c.hidden_size * c.vocab_size)


def attention_flops(c, keys):
    return 4.0 * c.num_hidden_layers * c.hidden_size * keys


def train_flops(c):
    forward = sum(dense_flops_per_token(c) + attention_flops(c, i + 1) for i in range(TRAIN_LEN))
    return 3.0 * forward * TRAIN_BATCH


def generation_flops(c):
    head = 2.0 * c.hidden_size * c.vocab_size
    decoder = dense_flops_per_token(c) - head
    prefill = sum(decoder + attention_flops(c, i + 1) for i in range(GEN_PROMPT)) + head
    decode = sum(dense_flops_per_token(c) + attention_flops(c, i + 1)
                 for i in range(GEN_PROMPT, GEN_PROMPT + GEN_NEW - 1))
    return (prefill + decode) * GEN_BATCH


def tokens(n, salt, vocab):
    return [((i * 7919 + salt * 104729) % (vocab - 3) + 3) for i in range(n)]


def gemm_rate(n=1024):
    x, w = torch.rand(n, n), torch.rand(n, n)
    best = 0.0
    for i in range(6):
        start = time.perf_counter()
        torch.mm(x, w)
        rate = 2.0 * n ** 3 / (time.perf_counter() - start) / 1e9
        best = max(best, rate) if i else 0.0
    return best


def train_throughput(model, iters, parts=1):
    vocab = model.config.vocab_size
    ids = torch.tensor([tokens(TRAIN_LEN, s, vocab) for s in range(TRAIN_BATCH)])

    def step():
        # `parts` equal micro-batches, one after another, gradients accumulated (scaled by
        # 1/parts: the whole batch's gradient), as the burn bench's second figure.
        for chunk in ids.chunk(parts):
            logits = model(chunk).logits[:, :-1]
            logp = torch.log_softmax(logits.float(), dim=-1)
            loss = -logp.gather(-1, chunk[:, 1:, None]).mean() / parts
            loss.backward()
        model.zero_grad(set_to_none=True)

    step()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    return iters * TRAIN_BATCH * TRAIN_LEN / (time.perf_counter() - start)


@torch.no_grad()
def generation_throughput(model):
    vocab = model.config.vocab_size
    ids = torch.tensor([tokens(GEN_PROMPT, i, vocab) for i in range(GEN_BATCH)])

    def run():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=GEN_NEW,
                             min_new_tokens=GEN_NEW, do_sample=False, use_cache=True,
                             pad_token_id=0, eos_token_id=None)
        return (out.shape[1] - GEN_PROMPT) * GEN_BATCH

    run()
    start = time.perf_counter()
    generated = run()
    return generated / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--parts", choices=["all", "train", "gen"], default="all")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    c = config(args.shape)
    peak = gemm_rate()
    model = Qwen2ForCausalLM(c).float()
    iters = SHAPES[args.shape][-1]
    nan = float("nan")
    train = train_parts = gen = nan
    if args.parts in ("all", "train"):
        model.train()
        if args.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        train = train_throughput(model, iters)
        train_parts = train_throughput(model, iters, parts=2)
    if args.parts in ("all", "gen"):
        model.eval()
        gen = generation_throughput(model)
    g = [train_flops(c) * train / (TRAIN_BATCH * TRAIN_LEN) / 1e9,
         train_flops(c) * train_parts / (TRAIN_BATCH * TRAIN_LEN) / 1e9,
         generation_flops(c) * gen / (GEN_BATCH * GEN_NEW) / 1e9]
    print(f"torch {torch.__version__} {args.shape} threads {args.threads}: GEMM 1024^3 {peak:.1f} GFLOP/s; "
          f"train fwd+bwd {train:.0f} tok/s (2 micro-batches: {train_parts:.0f}), "
          f"generate {gen:.0f} tok/s (batch {GEN_BATCH}, {GEN_PROMPT}+{GEN_NEW}) "
          f"[{g[0]:.1f} {g[1]:.1f} {g[2]:.1f} GFLOP/s; "
          f"{100 * g[0] / peak:.0f}% {100 * g[1] / peak:.0f}% {100 * g[2] / peak:.0f}%]")


if __name__ == "__main__":
    main()
