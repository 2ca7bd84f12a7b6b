"""Import AllenNLP 2.10.1's `allennlp.modules.elmo` without running allennlp's package `__init__`s.

Those pull in transformers, fairscale and torchvision. We register every allennlp package folder
as a bare module (with the right `__path__`) so only the ELMo submodules and what they import
load, then fill in the few package-level names `elmo.py` imports. Nothing in site-packages changes.
Install AllenNLP beside the project as docs/speed.md describes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

PACKAGE_LEVEL_NAMES = {
    "allennlp.common": {
        "FromParams": "allennlp.common.from_params",
        "Params": "allennlp.common.params",
        "Registrable": "allennlp.common.registrable",
        "Lazy": "allennlp.common.lazy",
    },
    "allennlp.data.tokenizers": {"Token": "allennlp.data.tokenizers.token_class"},
    "allennlp.data.fields": {"TextField": "allennlp.data.fields.text_field"},
}


def import_allennlp_elmo() -> Any | None:
    """The `allennlp.modules.elmo` module, or None when AllenNLP is not installed."""
    if "allennlp.modules.elmo" in sys.modules:
        return sys.modules["allennlp.modules.elmo"]
    spec = importlib.util.find_spec("allennlp")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    for init_file in sorted(root.rglob("__init__.py")):
        package = ".".join(init_file.parent.relative_to(root.parent).parts)
        module = types.ModuleType(package)
        module.__path__ = [str(init_file.parent)]
        module.__package__ = package
        sys.modules.setdefault(package, module)
        if "." in package:
            parent, child = package.rsplit(".", 1)
            setattr(sys.modules[parent], child, sys.modules[package])
    for package, names in PACKAGE_LEVEL_NAMES.items():
        for name, source in names.items():
            setattr(sys.modules[package], name, getattr(importlib.import_module(source), name))
    return importlib.import_module("allennlp.modules.elmo")
