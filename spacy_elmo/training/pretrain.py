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
from ..bilm.precision import native_bf16
from .checkpoint import (
    RankState,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from .config import PretrainConfig, TrainingSettings
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
    progress_bar,
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


@dataclass
class Run:
    """What one rank of a pretraining run holds while it trains: data, model, optimizer, counters.

    Built by `start_run`; `train_step`, `evaluate` and `checkpoint` read and advance it.
    """

    config: PretrainConfig
    output_dir: Path
    rank: int
    world_size: int
    device: torch.device
    vocabulary: Vocabulary
    stream: SentenceStream
    batcher: WindowBatcher
    char_cache: CharIdCache
    dev_sentences: list[list[str]]
    train_sentences: list[list[str]]
    objective: LanguageModelObjective
    model: torch.nn.Module  # the objective, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    sampler: LogUniformSampler
    log_expected: torch.Tensor | None  # log of each word's expected count in a sample; None: full softmax
    states: LayerStates
    counters: Counters
    progress: tqdm
    started: float = dataclasses.field(default_factory=time.monotonic)
    last_checkpoint: float = dataclasses.field(default_factory=time.monotonic)
    step_seconds: float = 0.0  # time in training steps (data included; evaluation and checkpoints not)
    elapsed_before: float = 0.0  # of the runs this one resumes
    tokens_before: int = 0
    steps_before: int = 0
    last_loss: float | None = None  # of the latest training step, for the progress bar

    @property
    def settings(self) -> TrainingSettings:
        return self.config.training

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def sampled(self) -> bool:
        return self.log_expected is not None

    def elapsed(self) -> float:
        """Seconds of training over the whole run, resumed parts included."""
        return self.elapsed_before + time.monotonic() - self.started

    def tokens_per_s(self) -> float:
        return (self.counters.tokens - self.tokens_before) / max(self.step_seconds, 1e-9)

    def seconds_per_step(self) -> float:
        """The mean time of this run's training steps so far (evaluations and checkpoints not counted)."""
        return self.step_seconds / max(self.counters.step - self.steps_before, 1)


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
    rank, world_size = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = _device(gpu_id, world_size > 1)
    if world_size > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if config.training.threads:
        torch.set_num_threads(config.training.threads)
    check_training_precision(config.training.precision, device)
    try:
        run = start_run(
            config, output_dir, rank, world_size, device, resume=resume, force=force, initial=initial
        )
        train(run)
        finish(run)
        return PretrainResult(run.objective, run.counters.history[-1] if run.counters.history else {})
    finally:
        if world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()


def start_run(
    config: PretrainConfig,
    output_dir: Path,
    rank: int,
    world_size: int,
    device: torch.device,
    *,
    resume: bool,
    force: bool,
    initial: InitialModel | None,
) -> Run:
    """Check the output directory, read the text, build (or restore) the model: a run at its step."""
    settings = config.training
    model_config = initial.bilm.config if initial else config.model
    if rank == 0:
        prepare_output_dir(output_dir, model_config, resume=resume, force=force)
    _barrier(world_size > 1)
    checkpoint_folder = latest_checkpoint(output_dir) if resume else None
    data = _read_text(config, output_dir, rank, world_size, initial)

    torch.manual_seed(settings.seed)
    bilm = initial.bilm if initial else BiLM(model_config)
    vocabulary = data["vocabulary"]
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
            checkpoint_folder, objective, optimizer, sampler, data["stream"], data["batcher"], rank
        )
        states = [(hidden.to(device), cell.to(device)) for hidden, cell in states]
        if rank == 0:
            truncate_metrics(output_dir / METRICS_FILE, counters.step)
    model: torch.nn.Module = objective
    if world_size > 1:
        device_ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(objective, broadcast_buffers=False, device_ids=device_ids)
    progress = progress_bar(
        settings.max_steps or None, counters.step, disable=rank != 0, interactive=sys.stderr.isatty()
    )
    return Run(
        config=config,
        output_dir=output_dir,
        rank=rank,
        world_size=world_size,
        device=device,
        objective=objective,
        model=model,
        optimizer=optimizer,
        sampler=sampler,
        log_expected=log_expected if sampled else None,
        states=states,
        counters=counters,
        progress=progress,
        elapsed_before=counters.elapsed_s,
        tokens_before=counters.tokens,
        steps_before=counters.step,
        **data,
    )


def _read_text(
    config: PretrainConfig, output_dir: Path, rank: int, world_size: int, initial: InitialModel | None
) -> dict[str, Any]:
    """The run's vocabulary (written by rank 0 on the first start), held-out sentences, and the
    endless stream of training windows of this rank's shard."""
    corpus, settings = config.corpus, config.training
    if corpus.train is None:
        raise CorpusError("No training text: set [paths] train in the config or pass --paths.train PATH.")
    splitter = SentenceSplitter(corpus.lang)
    files = corpus_files(corpus.train, "training")
    reader = DocumentReader(files, corpus.document_per, corpus.skip_undecodable)
    first_document = corpus.dev_documents if corpus.dev is None else 0
    if rank == 0:  # the first files of a run are written once its text has been read successfully
        _vocabulary(config, output_dir, reader, splitter, first_document, initial)
        atomic_write_text(output_dir / TRAINING_CONFIG_FILE, config.text)
    _barrier(world_size > 1)
    vocabulary = Vocabulary.load(output_dir / VOCAB_FILE)
    dev_sentences = _dev_sentences(config, splitter) if rank == 0 else []
    train_sentences = []
    if rank == 0 and corpus.max_train_eval_tokens:
        training_text = itertools.islice(reader, first_document, None)
        train_sentences = read_sentences(training_text, splitter, corpus.max_train_eval_tokens)
    stream = SentenceStream(reader, splitter, rank=rank, world_size=world_size, first_document=first_document)
    max_characters = (initial.bilm.config if initial else config.model).max_characters_per_token
    return {
        "vocabulary": vocabulary,
        "dev_sentences": dev_sentences,
        "train_sentences": train_sentences,
        "stream": stream,
        "batcher": WindowBatcher(stream, settings.batch_size, settings.unroll_steps),
        "char_cache": CharIdCache(max_characters),
    }


def train(run: Run) -> None:
    """Steps until a limit; evaluations and checkpoints at their intervals. Those due at the last
    step are left to `finish`, which does them once the progress bar has drawn its last line."""
    settings, counters = run.settings, run.counters
    if run.is_main and counters.step == 0:
        evaluate(run)  # the untrained model's dev perplexity: the baseline of the curve
    run.objective.train()
    while True:
        stop = (
            (settings.max_steps and counters.step >= settings.max_steps)
            or (settings.max_epochs and run.stream.epoch >= settings.max_epochs)
            or (settings.max_minutes and run.elapsed() >= 60 * settings.max_minutes)
        )
        timed = (
            settings.checkpoint_minutes
            and time.monotonic() - run.last_checkpoint >= 60 * settings.checkpoint_minutes
        )
        stop, timed = _agree(run.distributed, bool(stop), bool(timed), run.device)
        if stop:
            break
        due = counters.step > run.steps_before  # the step just taken (not the one resumed at)
        if due and run.is_main and settings.eval_every and counters.step % settings.eval_every == 0:
            evaluate(run)
        if timed or (due and settings.checkpoint_every and counters.step % settings.checkpoint_every == 0):
            checkpoint(run)
        train_step(run)
        run.progress.update(1)
        if counters.step % settings.log_every == 0:
            show_progress(run)


def show_progress(run: Run) -> None:
    """Set the bar's fields as of now; they are drawn at the bar's interval (a line per logged
    step would flood a log file), before a message, and when the bar closes."""
    if run.last_loss is None:
        return
    run.counters.elapsed_s = run.elapsed()
    fields = progress_fields(
        run.last_loss, run.sampled, run.tokens_per_s(), run.seconds_per_step(), run.counters, run.settings
    )
    run.progress.set_postfix(fields, refresh=False)


def train_step(run: Run) -> None:
    """One optimizer step on the next batch of windows; its loss goes to `run.last_loss`."""
    settings, counters = run.settings, run.counters
    step_started = time.monotonic()
    windows = run.batcher.next_batch()
    assert windows is not None  # an endless stream always fills its rows
    char_ids, targets, mask = batch_tensors(
        windows, run.char_cache, run.vocabulary, settings.unroll_steps, run.device
    )
    sampled_ids = run.sampler.sample(settings.n_negative_samples).to(run.device) if run.sampled else None
    with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=settings.precision == "bf16"):
        losses, states = run.model(
            char_ids, targets, mask, run.states, settings.dropout, sampled_ids, run.log_expected
        )
    states = detach_states(states)  # backprop stops at the batch boundary; values carry on
    run.states = reset_some_rows(states, settings.state_reset_probability)
    loss = losses.sum() / (2 * windows.n_tokens)
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if settings.grad_clip:
        torch.nn.utils.clip_grad_norm_(run.objective.parameters(), settings.grad_clip)
    set_learning_rate(run.optimizer, learning_rate_at(counters.step, settings))
    run.optimizer.step()
    run.step_seconds += time.monotonic() - step_started
    counters.step += 1
    counters.tokens += windows.n_tokens * run.world_size
    counters.loss_sum += loss.item()
    counters.loss_steps += 1
    run.last_loss = loss.item()


def evaluate(run: Run, *, announce: bool = True) -> dict[str, Any]:
    """Perplexity of the held-out and training samples: a metrics record, written, shown in the
    bar's fields, and logged as a line if `announce`."""
    counters, settings = run.counters, run.settings
    counters.elapsed_s = run.elapsed()
    rate = latest_learning_rate(counters.step, settings)
    record = metrics_record(counters, run.stream.epoch, run.tokens_per_s(), run.sampled, rate)
    for name, sentences in (("train", run.train_sentences), ("dev", run.dev_sentences)):
        if sentences:
            scores = perplexity(
                run.objective,
                sentences,
                run.vocabulary,
                batch_size=settings.eval_batch_size,
                unroll_steps=settings.unroll_steps,
            )
            record[f"{name}_perplexity"] = scores["perplexity"]
            for key in ("forward", "backward", "tokens", "cold_forward", "cold_backward"):
                suffix = "tokens" if key == "tokens" else f"{key}_perplexity"
                record[f"{name}_{suffix}"] = scores[key]
    counters.loss_sum, counters.loss_steps = 0.0, 0
    counters.history.append(record)
    with open(run.output_dir / METRICS_FILE, "a", encoding="utf8") as log:
        log.write(json.dumps(record) + "\n")
    show_progress(run)
    if announce:
        run.progress.write(describe(record))
    return record


def checkpoint(run: Run) -> None:
    """Every rank's data position, LSTM states and random generators; rank 0 writes them with
    the model and optimizer."""
    tensors = {
        **stack_states(run.states),
        "torch_rng": torch.get_rng_state(),
        "sampler_rng": run.sampler.get_state(),
        **({"cuda_rng": torch.cuda.get_rng_state(run.device)} if run.device.type == "cuda" else {}),
    }
    rank_state = RankState(
        {"stream": run.stream.get_state(), "batcher": run.batcher.get_state()},
        {name: tensor.cpu() for name, tensor in tensors.items()},
    )
    ranks = [rank_state]
    if run.distributed:
        gathered: list[RankState | None] = [None] * run.world_size
        dist.all_gather_object(gathered, rank_state)
        ranks = [state for state in gathered if state is not None]
    if run.is_main:
        run.counters.elapsed_s = run.elapsed()
        info = {
            "model": run.objective.bilm.config.to_allennlp_options(),
            "world_size": run.world_size,
            "counters": dataclasses.asdict(run.counters),
        }
        state = run.objective.state_dict()
        save_checkpoint(run.output_dir, run.counters.step, state, run.optimizer, ranks, info)
    run.last_checkpoint = time.monotonic()


def finish(run: Run) -> None:
    """The last evaluation, the bar's last line (with its perplexity), the evaluation's line, the
    last checkpoint, then the model directory (rank 0)."""
    history = run.counters.history
    record = None
    if run.is_main and (not history or history[-1]["step"] != run.counters.step):
        record = evaluate(run, announce=False)
    run.progress.close()
    if record is not None:
        tqdm.write(describe(record))
    checkpoint(run)
    if run.is_main:
        write_outputs(run.output_dir, run.objective, run.vocabulary, history)
    _barrier(run.distributed)


def check_training_precision(precision: str, device: torch.device) -> None:
    """bf16 training needs bf16 instructions: emulated (on a CPU without them, even one whose
    oneDNN accepts bf16), it is slower than float32 and gains nothing."""
    if precision == "bf16" and not native_bf16(device):
        raise DeviceError(
            f'[training] precision = "bf16" needs a CUDA GPU with bf16 or a CPU with bf16 instructions '
            f'(AVX-512 bf16 or AMX), and this {device.type.upper()} has none: use precision = "fp32".'
        )


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


def load_initial_model(bilm: BiLM, model_dir: Path | None) -> InitialModel:
    """The biLM to fine-tune, with the softmax head and vocabulary its model directory holds, if any
    (AllenNLP imports have no directory, so no head)."""
    if bilm.config.uses_lexicon:
        raise WeightFileError(
            f"{model_dir or 'The biLM'} reads a character lexicon (an ELMoForManyLangs model); pretraining "
            "and fine-tuning read text as UTF-8 bytes, so it cannot be fine-tuned here. Use it as it is "
            "(the elmo component trains its scalar mix, or the whole biLM with frozen = false)."
        )
    head_and_vocabulary = None if model_dir is None else load_softmax_head(model_dir, bilm)
    return InitialModel(bilm, *head_and_vocabulary) if head_and_vocabulary else InitialModel(bilm)
