"""Put UD/UNER English-EWT, and the out-of-domain test sets UD/UNER English-PUD, into `assets/`,
each file checked against its sha256.

Taken from `../shared/data/` when it holds them (no network), otherwise downloaded from the
pinned public sources. Also writes each split's raw sentence text (one per line, labels dropped)
for fine-tuning a biLM on the task domain.

    python scripts/ewt_assets.py ../../shared/data assets
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import urllib.request
from pathlib import Path

UD = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/"
UNER = "https://raw.githubusercontent.com/UniversalNER/UNER_English-EWT/"
UD_PUD = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-PUD/f16eba4ae7f3d161870ed320676c5088b8fa476c/"
UNER_PUD = "https://raw.githubusercontent.com/UniversalNER/UNER_English-PUD/07ea0553144e3fcf3d6633efe2a075b725a0d262/"
FILES = {  # asset path: (url, sha256), sha256 of the files at the pinned commits
    "ud_en_ewt/en_ewt-ud-train.conllu": (
        UD + "en_ewt-ud-train.conllu",
        "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
    ),
    "ud_en_ewt/en_ewt-ud-dev.conllu": (
        UD + "en_ewt-ud-dev.conllu",
        "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
    ),
    "ud_en_ewt/en_ewt-ud-test.conllu": (
        UD + "en_ewt-ud-test.conllu",
        "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
    ),
    "uner_en_ewt/en_ewt-ud-train.0c7ce0d.iob2": (
        UNER + "0c7ce0debb13a7d304da656f16309397e8ff36ef/en_ewt-ud-train.iob2",
        "2d986b063bb92df99540e37de34b1415eb2a22958b86de3e4698ec3be05e339f",
    ),
    "uner_en_ewt/en_ewt-ud-dev.iob2": (
        UNER + "2636eb1aff059e4300ca5249e2cc3004408b2748/en_ewt-ud-dev.iob2",
        "0cafd881cf31d39897b6d588420fab8fbbe4423d271725c59921ac9dd49c0713",
    ),
    "uner_en_ewt/en_ewt-ud-test.iob2": (
        UNER + "d516dd3322ae4fb5ae091ec1e691078ac8dd81ff/en_ewt-ud-test.iob2",
        "821ad826d5f503ac03b4edc3fbc2174f21fbb005ec25863caf2051c434616d6e",
    ),
    "ud_en_pud/en_pud-ud-test.conllu": (
        UD_PUD + "en_pud-ud-test.conllu",
        "c80584f2bc2b31d5bada78a1136f9feec7ac49e5e18898db02dea434b5b8f0aa",
    ),
    "uner_en_pud/en_pud-ud-test.iob2": (
        UNER_PUD + "en_pud-ud-test.iob2",
        "71fc0e18011e930f9a1a2fb68089d732eb2035a5840677d300626c8a1dedd2fb",
    ),
}


def sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def download(url: str, partial: Path, shared_copy: Path) -> None:
    print(f"Downloading {url}")
    try:
        urllib.request.urlretrieve(url, partial)
    except (OSError, ValueError) as error:  # URLError and HTTPError are OSErrors
        partial.unlink(missing_ok=True)
        raise SystemExit(
            f"Could not download {url} ({error}), and {shared_copy} does not exist. Put the UD/UNER "
            "files there (the folder is the project's `shared_data` var: `weasel run assets . "
            "--vars.shared_data DIR`) or run where the network reaches github.com."
        ) from None


def fetch(shared: Path, assets: Path) -> None:
    """Copy or download each file to a `.part` file, and move it into place once its sha256 matches."""
    for relative, (url, checksum) in FILES.items():
        target = assets / relative
        if target.exists() and sha256(target) == checksum:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        local = shared / relative
        if local.exists():
            shutil.copyfile(local, partial)
        else:
            download(url, partial, local)
        if sha256(partial) != checksum:
            partial.unlink()
            source = local if local.exists() else url
            raise SystemExit(
                f"{relative}: the sha256 of {source} differs from the pinned {checksum}; the "
                "source changed or the copy is damaged, so it was not used."
            )
        partial.replace(target)
        print(f"{relative}: ok")


def write_raw_text(assets: Path) -> None:
    """`ewt-{split}.txt`: each split's sentences, one per line, labels dropped."""
    for split in ("train", "dev", "test"):
        conllu = assets / "ud_en_ewt" / f"en_ewt-ud-{split}.conllu"
        lines = conllu.read_text(encoding="utf8").splitlines()
        texts = [line[len("# text = ") :] for line in lines if line.startswith("# text = ")]
        (assets / f"ewt-{split}.txt").write_text("\n".join(texts) + "\n", encoding="utf8")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("shared_data", type=Path)
    parser.add_argument("assets", type=Path)
    args = parser.parse_args()
    fetch(args.shared_data, args.assets)
    write_raw_text(args.assets)


if __name__ == "__main__":
    main()
