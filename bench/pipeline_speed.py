"""`nlp.pipe` words/s of an ELMo pipeline next to spaCy's default CNN tok2vec, in the same run,
and the peak memory of one 10,000-token doc.

    python bench/pipeline_speed.py ../shared/data/ud_en_ewt/en_ewt-ud-dev.conllu --preset small

Both pipelines are initialized with random weights (speed does not depend on the values): the
CNN pipeline is `tok2vec + ner` (spaCy's defaults), the ELMo one `elmo + ner` with a listener.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from spacy_elmo.bilm import BiLM, BiLMConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import fix_threads  # noqa: E402
from workload import ud_texts  # noqa: E402

NER_MODEL = {
    "@architectures": "spacy.TransitionBasedParser.v2",
    "state_type": "ner",
    "extra_state_tokens": False,
    "hidden_width": 64,
    "maxout_pieces": 2,
    "use_upper": True,
    "nO": None,
}


def cnn_pipeline() -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec")
    listener = {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "tok2vec"}
    nlp.add_pipe("ner", config={"model": {**NER_MODEL, "tok2vec": listener}})
    return nlp


def elmo_pipeline(bilm_dir: Path) -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    listener = {"@architectures": "spacy-elmo.ElmoListener.v1", "width": None, "upstream": "elmo"}
    nlp.add_pipe("ner", config={"model": {**NER_MODEL, "tok2vec": listener}})
    nlp.config["initialize"]["components"]["elmo"] = {
        "loader": {"@misc": "spacy-elmo.ModelDir.v1", "path": str(bilm_dir)}
    }
    return nlp


def initialized(nlp: Language, texts: list[str]) -> Language:
    from spacy.training import Example

    examples = [Example.from_dict(nlp.make_doc(text), {"entities": []}) for text in texts[:20]]
    nlp.get_pipe("ner").add_label("PER")
    nlp.initialize(lambda: examples)
    return nlp


def words_per_second(nlp: Language, texts: list[str], batch_size: int) -> tuple[float, int]:
    start = time.perf_counter()
    n_words = sum(len(doc) for doc in nlp.pipe(texts, batch_size=batch_size))
    return n_words / (time.perf_counter() - start), n_words


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conllu", type=Path, help="a UD .conllu file (its '# text' lines are the input)")
    parser.add_argument("--preset", default="small", help="biLM size: small, medium, original")
    parser.add_argument("--n-sentences", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fix_threads(args.threads)
    texts = ud_texts(args.conllu, args.n_sentences)
    with tempfile.TemporaryDirectory() as bilm_dir:
        BiLM(BiLMConfig.preset(args.preset)).save(bilm_dir)
        pipelines = {"cnn tok2vec + ner": initialized(cnn_pipeline(), texts)}
        pipelines[f"elmo ({args.preset}) + ner"] = initialized(elmo_pipeline(Path(bilm_dir)), texts)
    for nlp in pipelines.values():  # warm-up: tokenizer caches, lazy allocations (peak RSS is
        # measured for the long doc right after, before the speed runs raise it)
        words_per_second(nlp, texts[:20], args.batch_size)
    elmo = pipelines[f"elmo ({args.preset}) + ner"]
    words = [word for text in texts for word in text.split()]
    long_doc = Doc(elmo.vocab, words=(words * (10_000 // len(words) + 1))[:10_000])
    before = peak_rss_mb()
    start = time.perf_counter()
    elmo(long_doc)
    print(
        f"one 10,000-token doc (no sentence boundaries, windows of 256): "
        f"{time.perf_counter() - start:.1f} s, peak RSS {peak_rss_mb():,.0f} MB "
        f"(was {before:,.0f} MB before this doc)"
    )
    results = {name: [] for name in pipelines}
    for _ in range(args.repeats):  # interleaved, so machine noise hits both alike
        for name, nlp in pipelines.items():
            speed, n_words = words_per_second(nlp, texts, args.batch_size)
            results[name].append(speed)
    print(f"{len(texts)} sentences, {n_words} words, batch {args.batch_size}, {args.threads} threads")
    baseline = statistics.median(results["cnn tok2vec + ner"])
    for name, speeds in results.items():
        median = statistics.median(speeds)
        print(
            f"{name:28s} {median:10,.0f} words/s (median of {args.repeats})   {median / baseline:6.3f}x cnn"
        )


if __name__ == "__main__":
    main()
