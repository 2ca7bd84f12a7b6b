"""Pretrain (or fine-tune) a biLM on raw text: the whole loop, readable top to bottom.

Single process, or data-parallel under `torchrun` (DistributedDataParallel; gloo on CPU, nccl on
GPU): every rank reads its own shard of the documents, rank 0 evaluates and writes everything.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from ..bilm.errors import WeightFileError
from ..bilm.io.atomic import atomic_write_text
from ..bilm.io.model_dir import TRAINING_CONFIG_FILE, VOCAB_FILE
from ..bilm.lm_head import LogUniformSampler, SoftmaxHead
from ..bilm.model import BiLM
from .checkpoint import (
    RankState,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from .config import PretrainConfig
from .corpus import (
    CharIdCache,
    DocumentReader,
    SentenceSplitter,
    SentenceStream,
    Vocabulary,
    WindowBatcher,
    corpus_files,
    count_tokens,
    read_sentences,
)
from .errors import CorpusError, DeviceError, OutputDirError
from .evaluate import load_softmax_head, perplexity
from .metrics import (
    METRICS_FILE,
    Counters,
    describe,
    metrics_record,
    paused,
    progress_fields,
    truncate_metrics,
)
from .objective import (
    LanguageModelObjective,
    LayerStates,
    batch_tensors,
    detach_states,
    reset_some_rows,
    stack_states,
    unstack_states,
    zero_states,
)
from .run_dir import prepare_output_dir, write_outputs
from .schedule import latest_learning_rate, learning_rate_at, set_learning_rate


@dataclass
class InitialModel:
    """Where fine-tuning starts: a biLM, and its head + vocabulary when it has them."""

    bilm: BiLM
    head: SoftmaxHead | None = None
    vocabulary: Vocabulary | None = None


@dataclass
class PretrainResult:
    """The trained biLM + softmax head of this rank, and the last metrics record (rank 0 only)."""

    objective: LanguageModelObjective
    metrics: dict[str, Any]


def pretrain(
    config: PretrainConfig,
    output_dir: Path,
    *,
    resume: bool = False,
    force: bool = False,
    gpu_id: int = -1,
    initial: InitialModel | None = None,
) -> PretrainResult:
    """Train until `max_steps`, `max_epochs` or `max_minutes`; every rank returns its trained model."""
    settings = config.training
    rank, world_size = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    distributed = world_size > 1
    device = _device(gpu_id, distributed)
    if distributed:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    is_main = rank == 0
    model_config = initial.bilm.config if initial else config.model
    try:
        if is_main:
            prepare_output_dir(output_dir, model_config, resume=resume, force=force)
        _barrier(distributed)
        checkpoint_folder = latest_checkpoint(output_dir) if resume else None

        # -- data ---------------------------------------------------------------------------
        if config.corpus.train is None:
            raise CorpusError("No training text: set [paths] train in the config or pass --paths.train PATH.")
        splitter = SentenceSplitter(config.corpus.lang)
        reader = DocumentReader(
            corpus_files(config.corpus.train, "training"),
            config.corpus.document_per,
            config.corpus.skip_undecodable,
        )
        first_document = config.corpus.dev_documents if config.corpus.dev is None else 0
        if is_main:  # the first files of a run are written once its text has been read successfully
            _vocabulary(config, output_dir, reader, splitter, first_document, initial)
            atomic_write_text(output_dir / TRAINING_CONFIG_FILE, config.text)
        _barrier(distributed)
        vocabulary = Vocabulary.load(output_dir / VOCAB_FILE)
        dev_sentences = _dev_sentences(config, splitter) if is_main else []
        train_sentences = (
            read_sentences(
                itertools.islice(reader, first_document, None), splitter, config.corpus.max_train_eval_tokens
            )
            if is_main and config.corpus.max_train_eval_tokens
            else []
        )
        stream = SentenceStream(
            reader, splitter, rank=rank, world_size=world_size, first_document=first_document
        )
        batcher = WindowBatcher(stream, settings.batch_size, settings.unroll_steps)
        char_cache = CharIdCache(model_config.max_characters_per_token)

        # -- model, optimizer, sampler ------------------------------------------------------
        torch.manual_seed(settings.seed)
        bilm = initial.bilm if initial else BiLM(model_config)
        head = (
            initial.head
            if initial and initial.head
            else SoftmaxHead(len(vocabulary), model_config.projection_dim)
        )
        objective = LanguageModelObjective(bilm, head).to(device)
        optimizer = _optimizer(objective, config)
        sampler = LogUniformSampler(len(vocabulary), seed=settings.seed * 1009 + rank + 1)
        sampled = settings.softmax == "sampled" and settings.n_negative_samples < len(vocabulary)
        log_expected = (sampler.log_probabilities + math.log(settings.n_negative_samples)).to(device)
        torch.manual_seed(settings.seed + rank)  # dropout differs per rank, as with separate GPUs
        states = zero_states(bilm, settings.batch_size)  # on the objective's device
        counters = Counters()
        if checkpoint_folder is not None:
            states, counters = _restore(
                checkpoint_folder, objective, optimizer, sampler, stream, batcher, rank
            )
            states = [(hidden.to(device), cell.to(device)) for hidden, cell in states]
            if is_main:
                truncate_metrics(output_dir / METRICS_FILE, counters.step)
        model: torch.nn.Module = objective
        if distributed:
            model = DistributedDataParallel(
                objective,
                broadcast_buffers=False,
                device_ids=[device.index] if device.type == "cuda" else None,
            )

        # -- the loop -----------------------------------------------------------------------
        progress = tqdm(
            total=settings.max_steps or None,
            initial=counters.step,
            disable=not is_main,
            unit="step",
            mininterval=1.0 if sys.stderr.isatty() else 60.0,
            dynamic_ncols=True,
        )

        @paused(progress)
        def evaluate() -> dict[str, Any]:
            counters.elapsed_s = elapsed()
            rate = latest_learning_rate(counters.step, settings)
            record = metrics_record(counters, stream.epoch, tokens_per_s(), sampled, rate)
            for name, sentences in (("train", train_sentences), ("dev", dev_sentences)):
                if sentences:
                    scores = perplexity(
                        objective,
                        sentences,
                        vocabulary,
                        batch_size=settings.eval_batch_size,
                        unroll_steps=settings.unroll_steps,
                    )
                    record[f"{name}_perplexity"] = scores["perplexity"]
                    record[f"{name}_forward_perplexity"] = scores["forward"]
                    record[f"{name}_backward_perplexity"] = scores["backward"]
                    record[f"{name}_tokens"] = scores["tokens"]
                    record[f"{name}_cold_forward_perplexity"] = scores["cold_forward"]
                    record[f"{name}_cold_backward_perplexity"] = scores["cold_backward"]
            counters.loss_sum, counters.loss_steps = 0.0, 0
            counters.history.append(record)
            with open(output_dir / METRICS_FILE, "a", encoding="utf8") as log:
                log.write(json.dumps(record) + "\n")
            progress.write(describe(record))
            return record

        @paused(progress)
        def checkpoint() -> None:
            rank_state = RankState(
                {"stream": stream.get_state(), "batcher": batcher.get_state()},
                {
                    **stack_states(states),
                    "torch_rng": torch.get_rng_state(),
                    "sampler_rng": sampler.get_state(),
                    **({"cuda_rng": torch.cuda.get_rng_state(device)} if device.type == "cuda" else {}),
                },
            )
            rank_state.tensors = {name: tensor.cpu() for name, tensor in rank_state.tensors.items()}
            ranks = [rank_state]
            if distributed:
                gathered: list[RankState | None] = [None] * world_size
                dist.all_gather_object(gathered, rank_state)
                ranks = [state for state in gathered if state is not None]
            if is_main:
                counters.elapsed_s = elapsed()
                info = {
                    "model": model_config.to_allennlp_options(),
                    "world_size": world_size,
                    "counters": dataclasses.asdict(counters),
                }
                save_checkpoint(output_dir, counters.step, objective.state_dict(), optimizer, ranks, info)

        started = time.monotonic()
        elapsed_before, tokens_before = counters.elapsed_s, counters.tokens
        last_checkpoint = started
        step_seconds = 0.0  # time in training steps (data included; evaluation and checkpoints not)

        def elapsed() -> float:
            return elapsed_before + time.monotonic() - started

        def tokens_per_s() -> float:
            return (counters.tokens - tokens_before) / max(step_seconds, 1e-9)

        if is_main and counters.step == 0:
            evaluate()  # the untrained model's dev perplexity: the baseline of the curve
        objective.train()
        while True:
            stop = (
                (settings.max_steps and counters.step >= settings.max_steps)
                or (settings.max_epochs and stream.epoch >= settings.max_epochs)
                or (settings.max_minutes and elapsed() >= 60 * settings.max_minutes)
            )
            timed = (
                settings.checkpoint_minutes
                and time.monotonic() - last_checkpoint >= 60 * settings.checkpoint_minutes
            )
            stop, timed = _agree(distributed, bool(stop), bool(timed), device)
            if stop:
                break
            if timed:
                checkpoint()
                last_checkpoint = time.monotonic()

            step_started = time.monotonic()
            windows = batcher.next_batch()
            assert windows is not None  # an endless stream always fills its rows
            char_ids, targets, mask = batch_tensors(
                windows, char_cache, vocabulary, settings.unroll_steps, device
            )
            sampled_ids = sampler.sample(settings.n_negative_samples).to(device) if sampled else None
            losses, states = model(
                char_ids,
                targets,
                mask,
                states,
                settings.dropout,
                sampled_ids,
                log_expected if sampled else None,
            )
            states = detach_states(states)  # backprop stops at the batch boundary; values carry on
            states = reset_some_rows(states, settings.state_reset_probability)
            loss = losses.sum() / (2 * windows.n_tokens)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if settings.grad_clip:
                torch.nn.utils.clip_grad_norm_(objective.parameters(), settings.grad_clip)
            set_learning_rate(optimizer, learning_rate_at(counters.step, settings))
            optimizer.step()
            step_seconds += time.monotonic() - step_started

            counters.step += 1
            counters.tokens += windows.n_tokens * world_size
            counters.loss_sum += loss.item()
            counters.loss_steps += 1
            progress.update(1)
            if counters.step % settings.log_every == 0:
                counters.elapsed_s = elapsed()
                progress.set_postfix(
                    progress_fields(loss.item(), sampled, tokens_per_s(), counters, settings),
                    refresh=False,  # drawn at the bar's interval: a line per logged step floods a log file
                )
            if is_main and settings.eval_every and counters.step % settings.eval_every == 0:
                evaluate()
            if settings.checkpoint_every and counters.step % settings.checkpoint_every == 0:
                checkpoint()
                last_checkpoint = time.monotonic()

        if is_main and (not counters.history or counters.history[-1]["step"] != counters.step):
            evaluate()
        checkpoint()
        progress.close()
        if is_main:
            write_outputs(output_dir, objective, vocabulary, counters.history)
        _barrier(distributed)
        return PretrainResult(objective, counters.history[-1] if counters.history else {})
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def _device(gpu_id: int, distributed: bool) -> torch.device:
    if gpu_id < 0:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceError(f"--gpu-id {gpu_id}: CUDA is not available here; use --gpu-id -1 for the CPU.")
    index = int(os.environ.get("LOCAL_RANK", 0)) if distributed else gpu_id
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def _barrier(distributed: bool) -> None:
    if distributed:
        dist.barrier()


def _agree(distributed: bool, stop: bool, timed: bool, device: torch.device) -> tuple[bool, bool]:
    """Every rank stops (or checkpoints) when any rank wants to: time limits differ across ranks."""
    if not distributed:
        return stop, timed
    flags = torch.tensor([stop, timed], dtype=torch.int32, device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    return bool(flags[0]), bool(flags[1])


def _vocabulary(
    config: PretrainConfig,
    output_dir: Path,
    reader: DocumentReader,
    splitter: SentenceSplitter,
    first_document: int,
    initial: InitialModel | None,
) -> None:
    """Write `vocab.txt` unless the run has one: the initial model's, or one built from counts."""
    path = output_dir / VOCAB_FILE
    if path.is_file():
        return
    if initial and initial.vocabulary:
        vocabulary = initial.vocabulary
    else:
        counts = count_tokens(reader, splitter, first_document)
        vocabulary = Vocabulary.from_counts(counts, config.corpus.vocab_size, config.corpus.min_count)
        if reader.n_skipped:
            print(
                f"Skipped {reader.n_skipped} document(s) with bytes that are not valid UTF-8 "
                "([corpus] skip_undecodable = true).",
                file=sys.stderr,
            )
    vocabulary.save(path)


def _dev_sentences(config: PretrainConfig, splitter: SentenceSplitter) -> list[list[str]]:
    corpus = config.corpus
    if corpus.dev is not None:
        reader = DocumentReader(corpus_files(corpus.dev, "dev"), corpus.document_per, corpus.skip_undecodable)
    elif corpus.dev_documents:
        reader = DocumentReader(
            corpus_files(corpus.train or "", "training"),
            corpus.document_per,
            corpus.skip_undecodable,
            max_documents=corpus.dev_documents,
        )
    else:
        return []
    sentences = read_sentences(reader, splitter, corpus.max_dev_tokens)
    if not sentences:
        raise CorpusError("The dev text has no tokens (it is empty or only whitespace): check [paths] dev.")
    return sentences


def _optimizer(objective: LanguageModelObjective, config: PretrainConfig) -> torch.optim.Optimizer:
    settings = config.training
    parameters = list(objective.parameters())
    if settings.optimizer == "adagrad":
        return torch.optim.Adagrad(
            parameters,
            lr=settings.learning_rate,
            initial_accumulator_value=settings.initial_accumulator_value,
        )
    if settings.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=settings.learning_rate)
    return torch.optim.SGD(parameters, lr=settings.learning_rate)


def _restore(
    folder: Path,
    objective: LanguageModelObjective,
    optimizer: torch.optim.Optimizer,
    sampler: LogUniformSampler,
    stream: SentenceStream,
    batcher: WindowBatcher,
    rank: int,
) -> tuple[LayerStates, Counters]:
    """Load a checkpoint into the objects of this rank; returns its LSTM states and counters."""
    loaded = load_checkpoint(folder, optimizer)
    if len(loaded.ranks) != int(os.environ.get("WORLD_SIZE", 1)):
        raise OutputDirError(
            f"The checkpoint {folder} was written by {len(loaded.ranks)} processes; resume it with the "
            "same number (torchrun --nproc_per_node)."
        )
    objective.load_state_dict(loaded.model_state)
    mine = loaded.ranks[rank]
    stream.set_state(mine.data["stream"])
    batcher.set_state(mine.data["batcher"])
    torch.set_rng_state(mine.tensors["torch_rng"])
    sampler.set_state(mine.tensors["sampler_rng"])
    if "cuda_rng" in mine.tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(mine.tensors["cuda_rng"])
    return unstack_states(mine.tensors["hidden"], mine.tensors["cell"]), Counters(**loaded.info["counters"])


def load_initial_model(model_dir: Path | None, options: Path | None, weights: Path | None) -> InitialModel:
    """A model directory (with its head and vocabulary when present) or an AllenNLP options + HDF5 pair."""
    if model_dir is not None:
        bilm = BiLM.load(model_dir)
        head_and_vocabulary = load_softmax_head(model_dir, bilm)
        return InitialModel(bilm, *head_and_vocabulary) if head_and_vocabulary else InitialModel(bilm)
    if options is None or weights is None:
        raise WeightFileError(
            "Fine-tuning needs a model directory, or both an AllenNLP options file and weights."
        )
    return InitialModel(BiLM.from_allennlp(options, weights))
