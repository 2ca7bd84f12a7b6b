"""biLM inference speed: our `BiLM` in each precision vs AllenNLP 2.10.1's `Elmo` on the same
weights, same process, and how close each cell comes to the machine's limit.

Random weights in the published shapes (speed does not depend on the values), real sentences
(UD EWT dev), tokens/s counting real tokens only, min and median over repetitions, and peak RSS of
each side in a child process. The bound of a cell: with many sentences per batch, the model's
multiply-adds per position (no type cache) at this machine's measured product rate of each
product's precision; with one sentence per batch, the bytes of recurrent and projection weights
that every LSTM step reads, at the machine's one-row bound (docs/speed.md). A sentence
of n tokens is n + 2 positions and LSTM steps (its <S> and </S>), and the bound is in real tokens/s.
The limits are measured again in every repetition, just before the sides run, and each fraction
and ratio is the median over repetitions of that repetition's own: a shared machine's bandwidth
moves by 2x within minutes.

    python bench/bench_bilm.py                       # small and original, batch 1 and 64
    python bench/bench_bilm.py --configs small --batch-sizes 64 --repeats 5
    python bench/bench_bilm.py --device cuda         # both sides on the GPU (no GEMM bound, no RSS)
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allennlp_elmo import import_allennlp_elmo  # noqa: E402
from machine import (  # noqa: E402
    BYTES_PER_VALUE,
    CACHED_MEGABYTES,
    STEP_MEGABYTES,
    Limits,
    fix_threads,
    machine_line,
    measure_limits,
)

from spacy_elmo.bilm import BiLM, BiLMConfig  # noqa: E402

EWT_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud_en_ewt" / "en_ewt-ud-dev.conllu"


def read_conllu_sentences(path: Path, limit: int) -> list[list[str]]:
    """Token forms of the first `limit` sentences (multi-word token lines skipped)."""
    sentences: list[list[str]] = []
    tokens: list[str] = []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line.strip():
            if tokens:
                sentences.append(tokens)
                tokens = []
                if len(sentences) == limit:
                    break
        elif not line.startswith("#"):
            columns = line.split("\t")
            if columns[0].isdigit():
                tokens.append(columns[1])
    return sentences


def product_macs(config: BiLMConfig) -> dict[str, int]:
    """Multiply-accumulates per position of each product (`BiLM.product_sites` names), both
    directions, with the char CNN over all its character windows (no type cache)."""
    width, projection, cell = config.n_filters, config.projection_dim, config.lstm_dim
    chars, char_dim = config.max_characters_per_token, config.char_embedding_dim
    macs = {
        f"token_encoder.convolution{index}": (chars - w + 1) * w * char_dim * n
        for index, (w, n) in enumerate(config.filters)
    }
    macs.update(
        {f"token_encoder.highways.{index}.linear": width * 2 * width for index in range(config.n_highway)}
    )
    macs["token_encoder.projection"] = config.token_features * projection
    for layer in range(config.n_layers):
        prefix = f"lstm.layers.{layer}"
        macs[f"{prefix}.input"] = macs[f"{prefix}.recurrent"] = 2 * projection * 4 * cell
        macs[f"{prefix}.projection"] = 2 * cell * projection
    return macs


def product_bound(config: BiLMConfig, modes: dict[str, str], peaks: dict[str, float]) -> float:
    """Positions/s if every product ran at its precision's measured peak (GFLOP/s) and nothing
    else took time."""
    seconds = sum(2 * macs / (peaks[modes[name]] * 1e9) for name, macs in product_macs(config).items())
    return 1 / seconds


def step_bytes(bilm: BiLM, modes: dict[str, str]) -> int:
    """Bytes of the recurrent and projection weights of every layer and direction, in their
    precision's bytes: what one LSTM step at one row must read."""
    return sum(
        site.parameters[0].numel() * BYTES_PER_VALUE[modes[name]]
        for name, site in bilm.product_sites().items()
        if name.endswith((".recurrent", ".projection")) and name.startswith("lstm.")
    )


def cell_modes(model: BiLM, batch_size: int) -> dict[str, str]:
    """The mode each product runs in for this batch size: at one sentence the mode at the fewest
    rows, in a batch the mode at the most."""
    plan = model.precision_plan.modes  # a product's modes by row count; none for exact fp32
    end = 0 if batch_size == 1 else -1
    return {name: plan[name][end][1] if name in plan else "fp32" for name in model.product_sites()}


def cell_bound(model: BiLM, batch_size: int, limits: Limits, positions_per_token: float) -> float:
    """Real tokens/s of the cell at the machine's `limits` (NaN without them: on a GPU)."""
    modes = cell_modes(model, batch_size)
    if batch_size == 1:
        positions_per_second = limits.bandwidth * 1e9 / step_bytes(model, modes)
    elif limits.peaks:
        positions_per_second = product_bound(model.config, modes, limits.peaks)
    else:
        return float("nan")
    return positions_per_second / positions_per_token


def fraction_of_bound(fractions: dict[str, list[float]], side: str) -> str:
    values = fractions[side]
    return "-" if any(math.isnan(value) for value in values) else f"{statistics.median(values):.0%}"


def paired_ratio(seconds: dict[str, list[float]], side: str, baseline: str) -> str:
    """How many times as fast `side` is as `baseline`: the median over repetitions of the ratio
    within each repetition (the two ran one after the other)."""
    ratios = [base / own for own, base in zip(seconds[side], seconds[baseline])]
    return f"{statistics.median(ratios):.2f}x"


def wait_for(device: torch.device) -> None:
    """Return once the device's queued work is done, so a timing covers it (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ours_runner(bilm: BiLM, sentences: list[list[str]], batch_size: int) -> Callable[[], None]:
    """Embeds the sentences on the model's device; `embed_sentences` returns host arrays."""

    def run() -> None:
        bilm.clear_token_cache()  # every repetition starts cold: no help from earlier repetitions
        bilm.embed_sentences(sentences, batch_size=batch_size)

    return run


def allennlp_runner(
    elmo_module, options: Path, weights: Path, sentences, batch_size: int, device: torch.device
) -> Callable[[], None]:
    """AllenNLP's `Elmo` on `device`; its outputs are copied to the host, as ours are."""
    elmo = elmo_module.Elmo(str(options), str(weights), 1, dropout=0.0, requires_grad=False)
    elmo._elmo_lstm._elmo_lstm.stateful = False
    elmo.to(device).eval()

    def run() -> None:
        with torch.no_grad():
            for start in range(0, len(sentences), batch_size):
                char_ids = elmo_module.batch_to_ids(sentences[start : start + batch_size]).to(device)
                elmo(char_ids)["elmo_representations"][0].cpu()

    return run


def peak_rss_mb(side: str, options: Path, weights: Path, sentences, batch_size: int, threads: int) -> float:
    """Peak RSS (MB) of a fresh child process that loads one side and embeds the sentences once."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(_child_peak_rss, (side, options, weights, sentences, batch_size, threads))


def _child_peak_rss(
    side: str, options: Path, weights: Path, sentences, batch_size: int, threads: int
) -> float:
    fix_threads(threads)
    if side == "ours":
        ours_runner(BiLM.from_allennlp(options, weights), sentences, batch_size)()
    else:
        allennlp_runner(
            import_allennlp_elmo(), options, weights, sentences, batch_size, torch.device("cpu")
        )()
    return peak_rss_of_this_process_mb()


def peak_rss_of_this_process_mb() -> float:
    """VmHWM: unlike ru_maxrss, it is not inherited from the parent across fork + exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/self/status has no VmHWM line (not Linux?)")


def time_runs(
    runners: dict[str, Callable[[], None]],
    repeats: int,
    device: torch.device,
    limits: Callable[[], Limits],
) -> tuple[dict[str, list[float]], list[Limits]]:
    """Interleave the sides repetition by repetition so machine noise hits them alike, and
    measure the machine's limits at the start of each repetition."""
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    measured: list[Limits] = []
    for _ in range(repeats):
        measured.append(limits())
        for name, run in runners.items():
            wait_for(device)
            start = time.perf_counter()
            run()
            wait_for(device)
            seconds[name].append(time.perf_counter() - start)
    return seconds, measured


def speed_cell(speed: dict[str, list[float]], median: dict[str, float], side: str) -> str:
    return f"{max(speed[side]):,.0f} / {median[side]:,.0f}" if side in speed else "-"


def limits_summary(measured: list[Limits], batch_size: int) -> str:
    """The cell's limit, median (lowest-highest) over repetitions: read GB/s at batch 1, fp32
    GFLOP/s above. A wide range says the machine was busy with something else during the cell."""
    if batch_size == 1:
        values, unit = [limit.bandwidth for limit in measured], "GB/s"
    else:
        values, unit = [limit.peaks["fp32"] for limit in measured], "GFLOP/s"
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f}) {unit}"


def deviation(exact: BiLM, reduced: BiLM, sentences: list[list[str]]) -> str:
    """Max abs difference of reduced-precision outputs from the exact ones, and the smallest
    cosine similarity of a token vector."""
    worst, lowest_cosine = 0.0, 1.0
    for got, want in zip(reduced.embed_sentences(sentences), exact.embed_sentences(sentences)):
        worst = max(worst, float(abs(got - want).max()))
        norms = (got**2).sum(-1) ** 0.5 * (want**2).sum(-1) ** 0.5
        lowest_cosine = min(lowest_cosine, float(((got * want).sum(-1) / norms).min()))
    return f"{worst:.2g} / {lowest_cosine:.5f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--configs", nargs="+", default=["small", "original"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--sentences", type=int, default=256, help="sentences per run at batch > 1")
    parser.add_argument("--batch1-sentences", type=int, default=32, help="sentences per run at batch 1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--precisions",
        nargs="*",
        default=None,
        help="precisions to time beside fp32 (default: bf16 int8 auto on the CPU, bf16 auto on a GPU)",
    )
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS child processes")
    parser.add_argument("--device", default="cpu", help="torch device of both sides: cpu, cuda, cuda:1 ...")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch sees no CUDA GPU here; leave it out to run on the CPU")
    on_cpu = device.type == "cpu"
    if args.precisions is None:
        args.precisions = ["bf16", "int8", "auto"] if on_cpu else ["bf16", "auto"]
    if not on_cpu and "int8" in args.precisions:
        parser.error("--precisions int8 runs on the CPU only: leave it out with --device cuda")
    fix_threads(args.threads)
    elmo_module = import_allennlp_elmo()
    if elmo_module is None:
        print("AllenNLP is not importable: timing our BiLM alone (docs/speed.md says how to install it).")
    gpu = "" if on_cpu else f"; device {device} = {torch.cuda.get_device_name(device)}"
    print(f"{machine_line(args.threads)}{gpu}; EWT dev text, real tokens/s (max / median)")
    if on_cpu:
        limits = measure_limits()
        rates = ", ".join(f"{mode} {rate:,.0f}" for mode, rate in limits.peaks.items())
        print(
            f"Limits at the start: product peak GFLOP/s (1024 x 2048 @ 2048 x 2048) {rates}; "
            f"one-row bound {limits.bandwidth:.1f} GB/s (best of x @ w over a {CACHED_MEGABYTES} MB matrix a "
            f"cache keeps, and x @ w, mv or a plain read over {STEP_MEGABYTES} MB)"
        )
    print()
    reduced_columns = "".join(
        f" | ours {mode} | {mode} / bound | {mode} / exact | {mode} max abs diff / min cosine"
        for mode in args.precisions
    )
    print(
        "| config | batch | limit | bound (fp32) | ours exact | exact / bound | AllenNLP 2.10.1 "
        f"| exact / AllenNLP{reduced_columns} | peak RSS MB ours / AllenNLP |"
    )
    print("|---" * (9 + 4 * len(args.precisions)) + "|")
    plans: dict[str, list[str]] = {}
    for name in args.configs:
        config = BiLMConfig.preset(name)
        with tempfile.TemporaryDirectory() as directory:
            options, weights = Path(directory) / "options.json", Path(directory) / "weights.hdf5"
            BiLM(config).to_allennlp(options, weights)
            bilm = BiLM.from_allennlp(options, weights).to(device)
            reduced = {
                precision: BiLM.from_allennlp(options, weights).to(device).set_precision(precision)
                for precision in args.precisions
            }
            if "auto" in reduced:
                plans[name] = reduced["auto"].precision_plan.lines()
            for batch_size in args.batch_sizes:
                limit = args.batch1_sentences if batch_size == 1 else args.sentences
                sentences = read_conllu_sentences(EWT_DEV, limit)
                n_tokens = sum(len(sentence) for sentence in sentences)
                positions_per_token = (n_tokens + 2 * len(sentences)) / n_tokens
                runners = {"ours": ours_runner(bilm, sentences, batch_size)}
                for precision, model in reduced.items():
                    runners[precision] = ours_runner(model, sentences, batch_size)
                if elmo_module is not None:
                    runners["allennlp"] = allennlp_runner(
                        elmo_module, options, weights, sentences, batch_size, device
                    )
                models = {"ours": bilm, **reduced}
                needed = {
                    mode for model in models.values() for mode in cell_modes(model, batch_size).values()
                }
                seconds, measured = time_runs(
                    runners,
                    args.repeats,
                    device,
                    functools.partial(measure_limits, batch_size, needed) if on_cpu else Limits,
                )
                speed = {side: [n_tokens / s for s in runs] for side, runs in seconds.items()}
                median = {side: statistics.median(values) for side, values in speed.items()}
                fractions = {
                    side: [
                        n_tokens / own / cell_bound(model, batch_size, limit, positions_per_token)
                        for own, limit in zip(seconds[side], measured)
                    ]
                    for side, model in models.items()
                }
                cell = functools.partial(speed_cell, speed, median)
                rss = "-"
                if on_cpu and not args.no_rss:
                    sides = ["ours"] + (["allennlp"] if elmo_module is not None else [])
                    rss = " / ".join(
                        f"{peak_rss_mb(side, options, weights, sentences, batch_size, args.threads):,.0f}"
                        for side in sides
                    )
                share = functools.partial(fraction_of_bound, fractions)
                reduced_cells = "".join(
                    f" | {cell(precision)} | {share(precision)} "
                    f"| {paired_ratio(seconds, precision, 'ours')} | {deviation(bilm, model, sentences[:32])}"
                    for precision, model in reduced.items()
                )
                allennlp_ratio = paired_ratio(seconds, "ours", "allennlp") if "allennlp" in seconds else "-"
                limit_cell, fp32_bound = "-", "-"
                if on_cpu:
                    limit_cell = limits_summary(measured, batch_size)
                    bound = statistics.median(
                        cell_bound(bilm, batch_size, limit, positions_per_token) for limit in measured
                    )
                    fp32_bound = f"{bound:,.0f}"
                print(
                    f"| {name} | {batch_size} | {limit_cell} | {fp32_bound} | {cell('ours')} "
                    f"| {share('ours')} | {cell('allennlp')} | {allennlp_ratio}{reduced_cells} | {rss} |",
                    flush=True,
                )
    if on_cpu:
        print(
            "\nlimit: the median (lowest-highest) over repetitions of the limit measured at each "
            "repetition's start (batch 1: the one-row bound in GB/s; batch > 1: fp32 product GFLOP/s). "
            "bound: real tokens/s if, at batch > 1, every product (char CNN over all windows, highway, "
            "projection, LSTM; no type cache) ran at its precision's peak, or, at batch 1, each LSTM "
            "step only read the recurrent and projection weights at the one-row bound; a sentence of n "
            "tokens is n + 2 positions. Fractions of the bound and ratios are medians over repetitions "
            "of each repetition's own; each reduced column is against the bound of its own precisions."
        )
    print("Every repetition starts with an empty type cache.")
    for name, lines in plans.items():
        print(f"\nprecision 'auto' for {name} (product, mode, best time per call against fp32's):")
        print("\n".join(f"  {line}" for line in lines))


if __name__ == "__main__":
    main()
