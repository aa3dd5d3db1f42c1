"""PyTorch/transformers side of bench/model_throughput.rs: same Tiny Qwen2 config, shapes and
thread count. Run: python bench/model_throughput_torch.py --threads 2
"""
import argparse
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

VOCAB = 516
TRAIN_BATCH, TRAIN_LEN, TRAIN_ITERS = 8, 128, 20
GEN_BATCH, GEN_PROMPT, GEN_NEW = 32, 16, 64


def config():
    # Qwen2Config.tiny(TinyArch::default()): layers 2, dim 128, heads 4 (= kv heads), ffn 512.
    return Qwen2Config(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
        rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
    )


def tokens(n, salt):
    return [((i * 7919 + salt * 104729) % (VOCAB - 3) + 3) for i in range(n)]


def train_throughput(model, parts=1):
    ids = torch.tensor([tokens(TRAIN_LEN, s) for s in range(TRAIN_BATCH)])

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
    for _ in range(TRAIN_ITERS):
        step()
    return TRAIN_ITERS * TRAIN_BATCH * TRAIN_LEN / (time.perf_counter() - start)


@torch.no_grad()
def generation_throughput(model):
    ids = torch.tensor([tokens(GEN_PROMPT, i) for i in range(GEN_BATCH)])

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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config()).float()
    model.train()
    train = train_throughput(model)
    train_parts = train_throughput(model, parts=2)
    model.eval()
    gen = generation_throughput(model)
    print(f"torch {torch.__version__} threads {args.threads}: train fwd+bwd {train:.0f} tok/s "
          f"(2 micro-batches: {train_parts:.0f}), "
          f"generate {gen:.0f} tok/s (batch {GEN_BATCH}, {GEN_PROMPT}+{GEN_NEW})")


if __name__ == "__main__":
    main()
