"""PyTorch's peer of bench/product_shapes.rs: `a @ b` at the same shapes and layouts.

    python bench/product_shapes_torch.py --threads 2
"""
import argparse
import time

import torch

SHAPES = [
    ("attention scores q·kᵀ", 128, 64, 128, False, True),
    ("attention p·v", 128, 128, 64, False, False),
    ("attention dv = pᵀ·do", 128, 128, 64, True, False),
    ("q projection x·W", 1024, 576, 576, False, False),
    ("up projection x·W", 1024, 576, 1536, False, False),
    ("down projection x·W", 1024, 1536, 576, False, False),
    ("down dx = dy·Wᵀ", 1024, 576, 1536, False, True),
    ("up dW = xᵀ·dy", 576, 1024, 1536, True, False),
    ("tied head x·Eᵀ", 1024, 576, 49152, False, True),
    ("head dx = dy·E", 1024, 49152, 576, False, False),
    ("head dE = dyᵀ·x", 49152, 1024, 576, True, False),
    ("square", 1024, 1024, 1024, False, False),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    torch.set_num_threads(parser.parse_args().threads)
    print(f"torch {torch.__version__} threads {torch.get_num_threads()}")
    for name, m, k, n, a_t, b_t in SHAPES:
        a = torch.randn(k, m).t() if a_t else torch.randn(m, k)
        b = torch.randn(n, k).t() if b_t else torch.randn(k, n)
        flop = 2.0 * m * k * n
        reps = min(2000, max(3, int(6e10 / flop)))
        rates = []
        for _ in range(10):
            start = time.perf_counter()
            for _ in range(reps):
                a @ b
            rates.append(reps * flop / (time.perf_counter() - start) / 1e9)
        rates = sorted(rates[1:])
        print(f"{name:<24} {m:>6} × {k:>6} × {n:>6}  best {rates[8]:6.1f}  median {rates[4]:6.1f} GFLOP/s")


if __name__ == "__main__":
    main()
