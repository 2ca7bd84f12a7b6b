"""The listener's scalar mix, version 2 (`bilm.ScalarMix` behind a Thinc shim) against version 1
(numpy, hand-written gradients), side by side in one process: forward + backward per batch.

    python bench/bench_mix.py --docs 64 --tokens 25 --width 1024 --threads 2

Prints the CPU, the median seconds per batch of each, and the ratio v2 / v1 (above 1: v2 slower).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from machine import cpu_name

from spacy_elmo.pipeline.legacy import elmo_mix_v1
from spacy_elmo.pipeline.mix import MixModel, elmo_mix


def seconds_per_batch(model: MixModel, layer_arrays: list, d_outputs: list, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _, backprop = model(layer_arrays, is_train=True)
        backprop(d_outputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=64, help="docs per batch")
    parser.add_argument("--tokens", type=int, default=25, help="tokens per doc")
    parser.add_argument("--width", type=int, default=1024, help="2P, the biLM's output width")
    parser.add_argument("--projection", type=int, default=None, help="the listener's width; none: 2P")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    layer_arrays = [rng.normal(size=(3, args.tokens, args.width)).astype("float32") for _ in range(args.docs)]
    out_width = args.projection or args.width
    d_outputs = [rng.normal(size=(args.tokens, out_width)).astype("float32") for _ in range(args.docs)]
    print(
        f"CPU: {cpu_name()}; {args.threads} threads; {args.docs} docs x {args.tokens} tokens x {args.width}"
    )
    for input_gradient in (False, True):
        timings = {}
        for name, build in (("v1", elmo_mix_v1), ("v2", elmo_mix)):
            model = build(width=args.projection, dropout=0.1, l2_lambda=0.001, input_gradient=input_gradient)
            model.initialize(X=layer_arrays[:1])
            seconds_per_batch(model, layer_arrays, d_outputs, 3)  # warm-up
            timings[name] = seconds_per_batch(model, layer_arrays, d_outputs, args.repeats)
        what = "fine-tuned biLM (layer gradients)" if input_gradient else "frozen biLM (no layer gradients)"
        print(
            f"{what}: v1 {timings['v1'] * 1e3:.2f} ms, v2 {timings['v2'] * 1e3:.2f} ms per batch, "
            f"v2 / v1 = {timings['v2'] / timings['v1']:.2f}"
        )


if __name__ == "__main__":
    main()
