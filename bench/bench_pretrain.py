"""Pretraining tokens/s: our `pretrain` loop against a plain PyTorch loop over the same model.

Both train the same `LanguageModelObjective` (biLM + sampled softmax) with the same config in
the same process, alternately, on the same text. The plain loop gets its batches ready-made as
tensors, so the difference is the cost of our loop: streaming spaCy tokenisation, packing,
char ids, vocabulary lookups, progress bar and metrics. Warm-up steps are excluded from both.

A third run is the plain loop over the LSTM as it was up to commit fbc60f8: each step's block of the
input-to-gate products taken by a slice, whose backward zero-fills a gradient the size of all
steps' blocks, T times per layer (`ProjectedLSTMLayer._blocks_by_step` splits them instead).

    python bench/bench_pretrain.py [--config configs/pretrain_small.cfg] [--text FILE] [--steps 12]

Without --text, the sentences of UD EWT's training file (../shared/data) are used.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from spacy_elmo.bilm import BiLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import fix_threads  # noqa: E402

from spacy_elmo.bilm.lm_head import LogUniformSampler, SoftmaxHead
from spacy_elmo.bilm.lstm import ProjectedLSTMLayer
from spacy_elmo.training import load_pretrain_config, pretrain
from spacy_elmo.training.config import PretrainConfig
from spacy_elmo.training.corpus import (
    CharIdCache,
    DocumentReader,
    ListSentences,
    SentenceSplitter,
    Vocabulary,
    WindowBatcher,
    count_tokens,
)
from spacy_elmo.training.objective import LanguageModelObjective, batch_tensors, detach_states, zero_states

REPO_ROOT = Path(__file__).resolve().parent.parent
EWT_TRAIN = REPO_ROOT.parent / "shared" / "data" / "ud_en_ewt" / "en_ewt-ud-train.conllu"


def ewt_text(path: Path, destination: Path) -> Path:
    """The `# text = ...` lines of a CoNLL-U file, one sentence per line."""
    prefix = "# text = "
    lines = [
        line[len(prefix) :]
        for line in path.read_text(encoding="utf8").splitlines()
        if line.startswith(prefix)
    ]
    destination.write_text("\n".join(lines) + "\n", encoding="utf8")
    return destination


def our_loop(config: PretrainConfig, warmup: int) -> float:
    """Tokens/s of `pretrain` over the steps after `warmup`, from its own metrics log."""
    with tempfile.TemporaryDirectory() as output:
        pretrain(config, Path(output))
        records = [json.loads(line) for line in (Path(output) / "metrics.jsonl").read_text().splitlines()]
    warm = next(record for record in records if record["step"] == warmup)
    (warm_tokens, warm_rate), (tokens, rate) = ((r["tokens"], r["tokens_per_s"]) for r in (warm, records[-1]))
    return (tokens - warm_tokens) / (tokens / rate - warm_tokens / warm_rate)


class SlicedStepsLayer(ProjectedLSTMLayer):
    """The baseline: one slice per step (same values and gradients, slower backward)."""

    @staticmethod
    def _blocks_by_step(gate_inputs: torch.Tensor, batch_sizes: list[int]) -> Sequence[torch.Tensor]:
        starts = [0, *itertools.accumulate(batch_sizes)]
        return [gate_inputs[:, start:end] for start, end in itertools.pairwise(starts)]


def plain_loop(
    config: PretrainConfig,
    sentences: list[list[str]],
    vocabulary: Vocabulary,
    warmup: int,
    sliced_steps: bool = False,
) -> float:
    """The textbook loop: batches prepared in advance, then forward, backward, clip, step."""
    settings = config.training
    torch.manual_seed(settings.seed)
    objective = LanguageModelObjective(
        BiLM(config.model), SoftmaxHead(len(vocabulary), config.model.projection_dim)
    )
    if sliced_steps:
        for layer in objective.bilm.lstm.layers:
            layer.__class__ = SlicedStepsLayer
    optimizer = torch.optim.Adagrad(
        objective.parameters(),
        lr=settings.learning_rate,
        initial_accumulator_value=settings.initial_accumulator_value,
    )
    sampler = LogUniformSampler(len(vocabulary), seed=1)
    log_expected = sampler.log_probabilities + math.log(settings.n_negative_samples)
    batcher = WindowBatcher(ListSentences(sentences), settings.batch_size, settings.unroll_steps)
    char_cache = CharIdCache(config.model.max_characters_per_token)
    batches = [
        batch_tensors(
            batcher.next_batch(), char_cache, vocabulary, settings.unroll_steps, torch.device("cpu")
        )
        for _ in range(settings.max_steps)
    ]
    states = zero_states(objective.bilm, settings.batch_size)
    objective.train()
    for step, (char_ids, targets, mask) in enumerate(batches):
        if step == warmup:
            started = time.perf_counter()
        sampled_ids = sampler.sample(settings.n_negative_samples)
        losses, states = objective(
            char_ids, targets, mask, states, settings.dropout, sampled_ids, log_expected
        )
        states = detach_states(states)
        loss = losses.sum() / (2 * mask[0].sum())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(objective.parameters(), settings.grad_clip)
        optimizer.step()
    n_tokens = int(sum(mask[0].sum() for _, _, mask in batches[warmup:]))
    return n_tokens / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=REPO_ROOT / "configs" / "pretrain_small.cfg")
    parser.add_argument("--text", type=Path, default=None, help="training text, one document per line")
    parser.add_argument(
        "--steps", type=int, default=12, help="measured steps per run (after 2 warm-up steps)"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--repeats", type=int, default=2, help="alternating runs of each loop; the best counts"
    )
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    fix_threads(args.threads)
    warmup = 2
    with tempfile.TemporaryDirectory() as scratch:
        text = args.text or ewt_text(EWT_TRAIN, Path(scratch) / "ewt.txt")
        overrides = {
            "paths.train": str(text),
            "training.max_steps": warmup + args.steps,
            "training.batch_size": args.batch_size,
            "training.eval_every": warmup,
            "training.checkpoint_every": 0,
            "training.checkpoint_minutes": 0,
            "training.max_minutes": 0,
            "training.max_epochs": 0,
            "training.threads": args.threads,
        }
        config = load_pretrain_config(args.config, overrides)
        # The plain loop needs the same sentences in the same order and the same vocabulary.
        splitter = SentenceSplitter(config.corpus.lang)
        sentences: list[list[str]] = []
        needed = (warmup + args.steps + 1) * args.batch_size * (config.training.unroll_steps + 1)
        with open(text, encoding="utf8") as lines:
            for line in lines:
                sentences.extend(splitter(line))
                if sum(len(sentence) + 2 for sentence in sentences) > needed:
                    break
        counts = count_tokens(DocumentReader([Path(text)]), splitter, first_document=0)
        vocabulary = Vocabulary.from_counts(counts, config.corpus.vocab_size, config.corpus.min_count)
        ours, plain, sliced = [], [], []
        for _ in range(args.repeats):
            ours.append(our_loop(config, warmup))
            plain.append(plain_loop(config, sentences, vocabulary, warmup))
            sliced.append(plain_loop(config, sentences, vocabulary, warmup, sliced_steps=True))
    best_ours, best_plain, best_sliced = max(ours), max(plain), max(sliced)
    print(
        f"config {args.config.name}, batch {args.batch_size} x {config.training.unroll_steps}, "
        f"{args.threads} thread(s)"
    )
    print(
        f"  plain PyTorch loop : {best_plain:8.0f} tokens/s  (runs: {', '.join(f'{v:.0f}' for v in plain)})"
    )
    print(f"  spacy-elmo pretrain: {best_ours:8.0f} tokens/s  (runs: {', '.join(f'{v:.0f}' for v in ours)})")
    print(
        f"  plain loop, sliced steps (up to fbc60f8): {best_sliced:8.0f} tokens/s  "
        f"(runs: {', '.join(f'{v:.0f}' for v in sliced)})"
    )
    print(f"  overhead of our loop: {100 * (best_plain / best_ours - 1):+.1f}%")
    print(f"  split / sliced steps: {best_plain / best_sliced:.2f}x")
    print(f"  = {best_ours * 3600 / 1e6:.2f} M tokens per hour")


if __name__ == "__main__":
    main()
