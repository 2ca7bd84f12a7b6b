"""Pretraining at precision "bf16" against "fp32": tokens/s and dev perplexity after the same steps.

Both runs train the same config on the same text from the same seed. They alternate in chunks of
steps (each chunk resumes its run from the last checkpoint), so that machine noise hits both
alike; tokens/s counts training steps only (not evaluation, checkpoints or reading text).

    python bench/bench_train_precision.py --config pretrain_cpu --steps 300 --chunks 3

Without --text, the training and dev sentences of UD EWT (../shared/data) are used.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bilm import read_conllu_sentences  # noqa: E402
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.configs import shipped_config  # noqa: E402
from spacy_elmo.training import load_pretrain_config, pretrain  # noqa: E402

EWT = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud_en_ewt"
PRECISIONS = ("fp32", "bf16")


def write_sentences(conllu: Path, path: Path) -> Path:
    """One sentence per line, tokens joined by spaces."""
    sentences = read_conllu_sentences(conllu, limit=10**9)
    path.write_text("\n".join(" ".join(tokens) for tokens in sentences) + "\n", encoding="utf8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="pretrain_cpu", help="a shipped pretraining config or a path")
    parser.add_argument("--text", type=Path, default=None, help="training text, one document per line")
    parser.add_argument("--dev", type=Path, default=None, help="dev text, one document per line")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fix_threads(args.threads)
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        train = args.text or write_sentences(EWT / "en_ewt-ud-train.conllu", folder / "train.txt")
        dev = args.dev or write_sentences(EWT / "en_ewt-ud-dev.conllu", folder / "dev.txt")
        config_path = Path(args.config)
        if not config_path.exists():
            config_path = shipped_config(config_path.with_suffix(".cfg").name)
        seconds = dict.fromkeys(PRECISIONS, 0.0)
        tokens = dict.fromkeys(PRECISIONS, 0)
        final: dict[str, dict] = {}
        for chunk in range(1, args.chunks + 1):
            for precision in PRECISIONS:
                overrides = {
                    "paths.train": str(train),
                    "paths.dev": str(dev),
                    "training.precision": precision,
                    "training.max_steps": chunk * args.steps // args.chunks,
                    "training.max_minutes": 0,
                    "training.eval_every": 0,
                    "training.checkpoint_every": 0,
                    "training.threads": args.threads,
                }
                config = load_pretrain_config(config_path, overrides)
                record = pretrain(config, folder / precision, resume=chunk > 1).metrics
                chunk_tokens = record["tokens"] - tokens[precision]
                seconds[precision] += chunk_tokens / record["tokens_per_s"]
                tokens[precision] = record["tokens"]
                final[precision] = record
    print(f"\n{machine_line(args.threads)}; {config_path.name}, {args.steps} steps in {args.chunks} chunks\n")
    print("| precision | tokens | tokens/s | tokens/hour | dev perplexity |")
    print("|---|---|---|---|---|")
    for precision in PRECISIONS:
        rate = tokens[precision] / seconds[precision]
        print(
            f"| {precision} | {tokens[precision]:,} | {rate:,.0f} | {3600 * rate / 1e6:.1f} M "
            f"| {final[precision]['dev_perplexity']:.2f} |"
        )
    speedup = seconds["fp32"] / seconds["bf16"]
    change = final["bf16"]["dev_perplexity"] / final["fp32"]["dev_perplexity"] - 1
    print(f"\nbf16 / fp32 tokens/s: {speedup:.2f}x; dev perplexity change: {change:+.1%}")


if __name__ == "__main__":
    main()
