"""The one rule that turns a string into a biLM: the bundled model, a published name, or a path.

`hub.loading.locate_bilm` (which every command and the pipeline's loaders load through) and
`init-config` ask `resolve_name`, so a string means the same everywhere:

1. A `Path` object, or a string that looks like a path (it holds a `/` or the platform's
   separator, starts with `.` or `~`, or is absolute), is a path.
2. Otherwise `en_elmo_cpu` is the bundled English biLM and a catalogue name
   (`spacy-elmo download --list`) is that published biLM, as `spacy.load` takes a package name
   before a folder of the same name. Where a file or folder of that name also exists in the
   working directory, an `AmbiguousNameWarning` says which one was used and that `./NAME` asks
   for the folder.
3. Anything else is a path.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..bundled import BUNDLED_NAME
from .catalog import PublishedModel, find_published_model, is_published_name

NameKind = Literal["bundled", "published", "path"]


class AmbiguousNameWarning(UserWarning):
    """A bare name that is both a biLM's name and a file or folder in the working directory."""


@dataclass(frozen=True)
class ResolvedName:
    """What a string names: `kind` "bundled", "published" (with its catalogue entry) or "path"."""

    text: str
    kind: NameKind
    published: PublishedModel | None = None

    @property
    def spacy_lang(self) -> str | None:
        """The spaCy language the biLM goes with, where the name tells it (None for a path)."""
        if self.kind == "bundled":
            return "en"
        return self.published.spacy_lang if self.published is not None else None


def looks_like_path(text: str) -> bool:
    """Whether a string is written as a path: a separator, a leading `.` or `~`, or absolute."""
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return any(separator in text for separator in separators) or text.startswith((".", "~"))


def resolve_name(spec: str | Path) -> ResolvedName:
    """What `spec` names, by the module's rule; nothing is downloaded. Warns on an ambiguous name."""
    text = str(spec)
    if isinstance(spec, Path) or looks_like_path(text):
        return ResolvedName(text, "path")
    if text == BUNDLED_NAME:
        resolved = ResolvedName(text, "bundled")
        described = f"the bundled biLM {BUNDLED_NAME}"
    elif is_published_name(text):
        resolved = ResolvedName(text, "published", find_published_model(text))
        described = f"the published biLM {text!r} (spacy-elmo download --list)"
    else:
        return ResolvedName(text, "path")
    if Path(text).exists():
        warnings.warn(
            f"{text!r} names both {described} and {Path(text).resolve()}: using the {resolved.kind} "
            f"biLM, as a bare name always does. Write ./{text} to use the file or folder instead.",
            AmbiguousNameWarning,
            stacklevel=2,
        )
    return resolved
