"""Train and evaluate every (task, system, training fraction, seed) of the comparison, one by one.

Each run trains with `spacy train` on `corpus/train-{fraction}.spacy`, evaluates `model-best` on
the EWT test split into `metrics/{task}__{system}__{fraction}__seed{seed}.json` (the names
`report.py` reads) and writes beside it what produced it (`....run.json`: the training command,
the biLM and `spacy pretrain` weights with their sha256, the package versions, its CPU and
threads, its training minutes) and, for ELMo systems, the learned scalar-mix weights
(`....mix.json`), and with `--ood-test TASK=PATH` its scores on an out-of-domain test set
(`....ood.json`). A run whose metrics files exist is skipped, so an interrupted grid resumes (a
run with only its out-of-domain scores missing is scored, not retrained). With
`--jobs N`, N runs train side by side, each with `--threads-per-run` CPU threads (default: the CPUs
shared out), its output in `{training-dir}/{run}.log`. ELMo runs read `--bilm`, or the bundled
biLM without it; `--bilm-for TASK:SYSTEM=PATH` gives one task's runs of one system another.

    python scripts/grid.py --tasks ner parser --systems cnn elmo elmo_hash --fractions 1.0 --seeds 0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # spaCy and Thinc load only in the functions that train or score
    from thinc.api import Model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@dataclass(frozen=True)
class System:
    """How one system of the comparison is trained: a config per task and its overrides."""

    label: str
    configs: dict[str, Path]
    overrides: tuple[str, ...] = ()
    uses_elmo: bool = False
    uses_pretrained_tok2vec: bool = False


CNN_CONFIGS = {"ner": CONFIGS / "ner_cnn.cfg", "parser": CONFIGS / "parser_cnn.cfg"}
ELMO_CONFIGS = {"ner": CONFIGS / "ner_elmo.cfg", "parser": CONFIGS / "parser_elmo.cfg"}
SYSTEMS = {
    "cnn": System("(a) CNN tok2vec", CNN_CONFIGS),
    # (b): the CNN configs filled with a [pretraining] section by the project's pretrain-cnn step;
    # spaCy loads `init_tok2vec` into the component it names (the shared `tok2vec`).
    "cnn_pretrain": System(
        "(b) CNN + spacy pretrain",
        {task: Path("models") / f"{task}_cnn_pretraining.cfg" for task in CNN_CONFIGS},
        uses_pretrained_tok2vec=True,
    ),
    # (c): the CNN tok2vec's embedding layer without the hash embeddings: it reads ELMo alone.
    "elmo": System(
        "(c) ELMo, frozen biLM",
        ELMO_CONFIGS,
        overrides=("--components.{component}.model.tok2vec.embed.embed", "null"),
        uses_elmo=True,
    ),
    "elmo_hash": System("(d) ELMo + hash embeddings", ELMO_CONFIGS, uses_elmo=True),
    "elmo_joint": System(
        "joint NER+parser, one ELMo", {"joint": CONFIGS / "ner_parser_elmo.cfg"}, uses_elmo=True
    ),
}
# What `spacy evaluate` reports for each task, and the component that does the task.
TASK_COMPONENTS = {"ner": "ner", "parser": "parser"}
# The tasks a grid runs: each component's alone, and both in one pipeline.
TASKS = (*TASK_COMPONENTS, "joint")
# Minutes per run with all the data, one thread, two side by side on the 2-vCPU development
# machine (the `seeds` runs' means): the order in which `--jobs` starts them.
TASK_MINUTES = {"ner": 4.7, "parser": 10.5, "joint": 14.0}
# The thread counts of torch (OpenMP) and of the BLAS libraries numpy and thinc may use.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS")
# The packages whose versions a run's record holds.
RECORDED_PACKAGES = ("spacy-elmo", "spacy", "thinc", "torch", "numpy")
# spaCy pipelines are loaded in this process to read their mixes: one at a time.
_LOADING = threading.Lock()


def run_name(task: str, system: str, fraction: float, seed: int) -> str:
    return f"{task}__{system}__{fraction}__seed{seed}"


def train_command(
    args: argparse.Namespace, task: str, system_key: str, fraction: float, seed: int
) -> list[str]:
    system = SYSTEMS[system_key]
    config = system.configs[task]
    output = args.training_dir / run_name(task, system_key, fraction, seed)
    command = [sys.executable, "-m", "spacy", "train", str(config), "--output", str(output)]
    command += ["--paths.train", str(args.corpus_dir / f"train-{fraction}.spacy")]
    command += ["--paths.dev", str(args.corpus_dir / "dev.spacy"), "--system.seed", str(seed)]
    command += [
        "--training.max_steps",
        str(args.max_steps),
        "--training.eval_frequency",
        str(args.eval_frequency),
    ]
    bilm, _ = bilm_of(args, task, system_key)
    if system.uses_elmo and bilm:
        command += ["--paths.elmo", bilm]
    if system.uses_pretrained_tok2vec:
        if not args.pretrained_tok2vec:
            raise SystemExit(f"{system.label} needs --pretrained-tok2vec (the weights of `spacy pretrain`).")
        command += ["--initialize.init_tok2vec", args.pretrained_tok2vec.format(task=task)]
    component = TASK_COMPONENTS.get(task, task)
    command += [part.format(component=component) for part in system.overrides]
    return command


def bilm_of(args: argparse.Namespace, task: str, system_key: str) -> tuple[str, str]:
    """The biLM directory one run reads ('' for the bundled one) and the option that named it:
    its `--bilm-for TASK:SYSTEM=PATH` where given, else `--bilm`."""
    if (task, system_key) in args.bilm_for:
        return args.bilm_for[(task, system_key)], f"--bilm-for {task}:{system_key}"
    return args.bilm, "--bilm"


def parse_bilm_for(text: str) -> tuple[tuple[str, str], str]:
    """`TASK:SYSTEM=PATH` -> ((task, system), path), PATH `bundled` -> '' (the bundled biLM)."""
    run, equals, path = text.partition("=")
    task, colon, system_key = run.partition(":")
    if not (equals and colon and path and task in TASKS and system_key in SYSTEMS):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not TASK:SYSTEM=PATH with TASK one of {', '.join(TASKS)}, SYSTEM one of "
            f"{', '.join(SYSTEMS)} and PATH a biLM directory or 'bundled', e.g. ner:elmo_hash=bundled"
        )
    return (task, system_key), bilm_path(path)


def parse_ood_test(text: str) -> tuple[str, Path]:
    """`TASK=PATH` -> (task, the .spacy test set), for `--ood-test`."""
    task, equals, path = text.partition("=")
    if not (equals and path and task in TASK_COMPONENTS):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not TASK=PATH with TASK one of {', '.join(TASK_COMPONENTS)}, e.g. "
            "ner=corpus/pud-ner.spacy"
        )
    return task, Path(path)


def bilm_path(text: str) -> str:
    """A biLM option's value as a run reads it: a model directory, or '' for `bundled`."""
    return "" if text == "bundled" else text


def weights_sha256(path: Path, option: str) -> str:
    """The sha256 of a weights file, or of a biLM model directory's `model.safetensors`; a
    `RunFailed` naming `option` (where the path came from) when there is no such file."""
    weights = path / "model.safetensors" if path.is_dir() else path
    if not weights.is_file():
        raise RunFailed(f"{option} {path}: there is no {weights}")
    with weights.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def run_record(
    args: argparse.Namespace, task: str, system_key: str, fraction: float, seed: int
) -> dict[str, object]:
    """What one run starts from, taken before it trains: its training command, its weights, the
    package versions, and the CPU and threads it trains with (CPUs differ in their float kernels,
    which moves the scores like another seed would)."""
    system = SYSTEMS[system_key]
    command = train_command(args, task, system_key, fraction, seed)
    record: dict[str, object] = {
        "command": " ".join(["python", *command[1:]]),
        "max_steps": args.max_steps,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "versions": {
            "python": platform.python_version(),
            **{name: version(name) for name in RECORDED_PACKAGES},
        },
        "cpu": cpu_model(),
        "jobs": args.jobs,
        "threads_per_run": args.threads_per_run or "inherited",
    }
    if system.uses_elmo:
        path, option = bilm_of(args, task, system_key)
        if path:
            bilm, name = Path(path), path
        else:
            from spacy_elmo.bundled import BUNDLED_PATH, bundled_card

            card = bundled_card()
            bilm, name = BUNDLED_PATH, f"bundled {card['name']} {card['version']}"
        record["bilm"] = {"path": name, "sha256": weights_sha256(bilm, option)}
    if system.uses_pretrained_tok2vec:
        tok2vec = args.pretrained_tok2vec.format(task=task)
        sha256 = weights_sha256(Path(tok2vec), "--pretrained-tok2vec (`spacy pretrain` weights)")
        record["pretrained_tok2vec"] = {"path": tok2vec, "sha256": sha256}
    return record


def mix_summary(mix: Model) -> dict[str, list[float] | float]:
    """{"weights": softmax-normalised layer weights, "gamma": scale} of an `elmo_mix` layer."""
    from spacy_elmo.pipeline.mix import mix_weights, scalar_mix

    gamma = scalar_mix(mix).gamma.detach()  # a parameter: detached, it converts without a warning
    return {"weights": [float(weight) for weight in mix_weights(mix)], "gamma": float(gamma)}


def write_mix_weights(model_dir: Path, component_name: str, output: Path) -> None:
    """The softmax-normalised scalar-mix weights and gamma of a component's ELMo listeners."""
    import spacy

    with _LOADING:
        nlp = spacy.load(model_dir)
    mixes = {}
    for node in nlp.get_pipe(component_name).model.walk():
        if node.name == "elmo_mix":
            mixes[component_name] = mix_summary(node)
    output.write_text(json.dumps(mixes, indent=2) + "\n")


def run_one(args: argparse.Namespace, task: str, system_key: str, fraction: float, seed: int) -> None:
    """Train one model, evaluate it on test (both tasks for the joint pipeline), record its mixes.

    With `args.jobs` > 1 the commands' output goes to the run's log file, not to the console."""
    system = SYSTEMS[system_key]
    tasks = list(TASK_COMPONENTS) if task == "joint" else [task]
    outputs = score_files(args, task, system_key, fraction, seed)
    started = time.time()
    record = run_record(args, task, system_key, fraction, seed)
    model_best = args.training_dir / run_name(task, system_key, fraction, seed) / "model-best"
    evaluate = [sys.executable, "-m", "spacy", "evaluate", str(model_best), str(args.test)]
    with RunOutput(args, run_name(task, system_key, fraction, seed)) as run:
        run.command(train_command(args, task, system_key, fraction, seed))
        record["minutes"] = round((time.time() - started) / 60, 1)
        # The scores file comes last: it is what marks the run as done.
        for t in tasks:
            stem = run_name(t, system_key, fraction, seed)
            (args.metrics_dir / f"{stem}.run.json").write_text(json.dumps(record, indent=2) + "\n")
            if system.uses_elmo:
                write_mix_weights(model_best, TASK_COMPONENTS[t], args.metrics_dir / f"{stem}.mix.json")
        evaluate_out_of_domain(args, run, task, system_key, fraction, seed)
        run.command([*evaluate, "--output", str(outputs[0])])
    for path in outputs[1:]:  # the joint pipeline's one evaluation has the scores of both tasks
        shutil.copyfile(outputs[0], path)
    say(f"  done in {(time.time() - started) / 60:.1f} min: {run_name(task, system_key, fraction, seed)}")


def evaluate_out_of_domain(
    args: argparse.Namespace, run: RunOutput, task: str, system_key: str, fraction: float, seed: int
) -> None:
    """Score `model-best` on each out-of-domain test set of the run's tasks whose scores are not
    there yet (`{run}.ood.json`)."""
    model_best = args.training_dir / run_name(task, system_key, fraction, seed) / "model-best"
    for test_set, output in ood_score_files(args, task, system_key, fraction, seed):
        if not output.exists() or args.force:
            run.command(
                [
                    sys.executable,
                    "-m",
                    "spacy",
                    "evaluate",
                    str(model_best),
                    str(test_set),
                    "--output",
                    str(output),
                ]
            )


def score_out_of_domain(
    args: argparse.Namespace, task: str, system_key: str, fraction: float, seed: int
) -> None:
    """A trained run's missing out-of-domain scores only (a grid resumed after the test sets came)."""
    name = run_name(task, system_key, fraction, seed)
    if not (args.training_dir / name / "model-best").is_dir():
        raise RunFailed(
            f"its out-of-domain scores are missing and {args.training_dir / name}/model-best is "
            "gone: rerun it with --force"
        )
    with RunOutput(args, name) as run:
        evaluate_out_of_domain(args, run, task, system_key, fraction, seed)


def ood_score_files(
    args: argparse.Namespace, task: str, system_key: str, fraction: float, seed: int
) -> list[tuple[Path, Path]]:
    """(out-of-domain test set, its scores file) for each of the run's tasks given one."""
    tasks = list(TASK_COMPONENTS) if task == "joint" else [task]
    return [
        (args.ood_test[t], args.metrics_dir / f"{run_name(t, system_key, fraction, seed)}.ood.json")
        for t in tasks
        if t in args.ood_test
    ]


def score_files(
    args: argparse.Namespace, task: str, system_key: str, fraction: float, seed: int
) -> list[Path]:
    """The test scores one run writes: one file per task (the joint pipeline's run writes two)."""
    tasks = list(TASK_COMPONENTS) if task == "joint" else [task]
    return [args.metrics_dir / f"{run_name(t, system_key, fraction, seed)}.json" for t in tasks]


def say(line: str) -> None:
    """One line on the console in one write, so that runs side by side never interleave theirs
    (`print` writes the text and its newline separately)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def cpu_model() -> str:
    """The CPU's model, from /proc/cpuinfo where there is one, else what `platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    described = describe_cpu(cpuinfo.read_text()) if cpuinfo.exists() else None
    return described or platform.processor() or platform.machine()


def describe_cpu(cpuinfo: str) -> str | None:
    """The first processor's model name, with its family, model and stepping numbers where the
    kernel gives them: cloud CPUs may name themselves only "AMD EPYC", while their models' float
    kernels differ and move scores like a change of seed."""
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    if "model name" not in fields:
        return None
    numbers = [f"{name} {fields[name]}" for name in ("cpu family", "model", "stepping") if fields.get(name)]
    return fields["model name"] + (f" ({', '.join(numbers)})" if numbers else "")


def available_cpus() -> int:
    """The CPUs this process may run on (a container's share, where the OS says), else all."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class RunOutput:
    """Where one run's commands write: the console, or with `--jobs` > 1 its own log file; and the
    environment that gives each command its share of the CPU threads."""

    def __init__(self, args: argparse.Namespace, name: str) -> None:
        self.log_path = args.training_dir / f"{name}.log" if args.jobs > 1 else None
        self.log: TextIO | None = None
        self.environment: dict[str, str] | None = None
        if args.threads_per_run:
            threads = str(args.threads_per_run)
            self.environment = {**os.environ, **{variable: threads for variable in THREAD_VARIABLES}}

    def __enter__(self) -> RunOutput:
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log = self.log_path.open("w", encoding="utf8")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.log:
            self.log.close()

    def command(self, command: list[str]) -> None:
        stderr = subprocess.STDOUT if self.log else None
        try:
            subprocess.run(command, check=True, env=self.environment, stdout=self.log, stderr=stderr)
        except subprocess.CalledProcessError as error:
            where = f": see {self.log_path}" if self.log_path else ""
            raise RunFailed(f"`{' '.join(command[2:4])}` exited with {error.returncode}{where}") from error


class RunFailed(Exception):
    """A run's training or evaluation command failed."""


def run_grid(args: argparse.Namespace, runs: list[tuple[str, str, float, int]]) -> None:
    """Every run, one at a time (stopping at the first failure) or `args.jobs` side by side
    (finishing the others, then naming every failed run)."""
    headers = [
        f"[{index}/{len(runs)}] {task}: {SYSTEMS[system_key].label}, {fraction:.0%} of train, seed {seed}"
        for index, (task, system_key, fraction, seed) in enumerate(runs, start=1)
    ]
    pending = []
    for header, run in zip(headers, runs):
        if args.force or not all(path.exists() for path in score_files(args, *run)):
            pending.append((header, run, run_one))
        elif not all(output.exists() for _, output in ood_score_files(args, *run)):
            pending.append((f"{header}: out-of-domain scores only", run, score_out_of_domain))
        else:
            say(f"{header}: its scores exist, skipped")
    if args.jobs == 1:
        for header, run, work in pending:
            say(header)
            try:
                work(args, *run)
            except RunFailed as error:
                raise SystemExit(f"{header}: {error}") from error
        return

    def start(header: str, run: tuple[str, str, float, int], work: Callable[..., None]) -> None:
        say(f"{header}: started")
        work(args, *run)

    # Longest runs first, so that the last ones to finish are short.
    order = sorted(pending, key=lambda item: TASK_MINUTES[item[1][0]], reverse=True)
    failed = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(start, header, run, work): header for header, run, work in order}
        for future in as_completed(futures):
            try:
                future.result()
            except RunFailed as error:
                say(f"{futures[future]}: FAILED, {error}")
                failed.append(f"{futures[future]}: {error}")
            except Exception as error:  # a bug, not a failed command: the traceback, then go on
                say(f"{futures[future]}: FAILED\n{traceback.format_exc().rstrip()}")
                failed.append(f"{futures[future]}: {type(error).__name__}: {error} (traceback above)")
    if failed:
        raise SystemExit(f"{len(failed)} of {len(runs)} runs failed:\n" + "\n".join(failed))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", choices=TASKS, required=True)
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), required=True)
    parser.add_argument("--fractions", nargs="+", type=float, default=[1.0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--eval-frequency", type=int, required=True)
    parser.add_argument(
        "--bilm", type=bilm_path, default="", help="biLM model directory, or 'bundled' (the default)"
    )
    parser.add_argument(
        "--bilm-for",
        type=parse_bilm_for,
        action="append",
        default=[],
        metavar="TASK:SYSTEM=PATH",
        help="another biLM for one task's runs of one system ('bundled': the bundled one); repeatable",
    )
    parser.add_argument(
        "--pretrained-tok2vec", default="", help="`spacy pretrain` weights for (b); {task} is filled in"
    )
    parser.add_argument("--corpus-dir", type=Path, default=Path("corpus"))
    parser.add_argument("--test", type=Path, default=Path("corpus/test.spacy"))
    parser.add_argument(
        "--ood-test",
        type=parse_ood_test,
        action="append",
        default=[],
        metavar="TASK=PATH",
        help="an out-of-domain test set of one task, scored into {run}.ood.json; repeatable",
    )
    parser.add_argument("--training-dir", type=Path, default=Path("training"))
    parser.add_argument("--metrics-dir", type=Path, default=Path("metrics"))
    parser.add_argument("--force", action="store_true", help="rerun runs whose metrics exist")
    parser.add_argument("--jobs", type=int, default=1, help="runs that train side by side")
    parser.add_argument(
        "--threads-per-run",
        type=int,
        default=0,
        help="CPU threads per run (torch, BLAS); default: inherited with --jobs 1, else CPUs / jobs",
    )
    args = parser.parse_args()
    args.bilm_for = dict(args.bilm_for)
    args.ood_test = dict(args.ood_test)
    missing = [str(path) for path in args.ood_test.values() if not path.is_file()]
    if missing:
        parser.error(f"--ood-test: {', '.join(missing)} does not exist (the project's corpus step writes it)")
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    if args.jobs > 1 and not args.threads_per_run:
        args.threads_per_run = max(1, available_cpus() // args.jobs)
    args.metrics_dir.mkdir(parents=True, exist_ok=True)
    runs = [
        (task, system_key, fraction, seed)
        for task in args.tasks
        for system_key in args.systems
        if task in SYSTEMS[system_key].configs
        for fraction in args.fractions
        for seed in args.seeds
    ]
    run_grid(args, runs)


if __name__ == "__main__":
    main()
