"""spaCy and Thinc integration: the `elmo` component, its listeners, loaders and extensions.

Imported by spaCy through the `spacy_factories` entry point in every process that builds a
pipeline, so everything imported here must be light and must not fail.
"""

from ..doc_data import ElmoDocData
from . import architectures, loaders
from .component import Elmo, make_elmo
from .errors import ElmoPipelineError
from .listener import ElmoListener

__all__ = [
    "Elmo",
    "ElmoDocData",
    "ElmoListener",
    "ElmoPipelineError",
    "architectures",
    "loaders",
    "make_elmo",
]
