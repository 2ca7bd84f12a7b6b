"""The Ray engine of a corpus job (`run_corpus(..., engine="ray")`): Ray Data's read tasks read
and check the input, `PartWriter` actors embed or annotate it into output parts in a run folder
beside the output, the completeness check proves every input row is there exactly once, and
only then do the parts become the output. `ElmoMapper` (`spacy_elmo.ray_data`) is its public
face for a Dataset of one's own. Needs `pip install "spacy-elmo[ray]"`.

Nothing is imported here: the read tasks and the completeness check import `blocks` and `layout`
alone, in processes that must not pay for torch and spaCy."""
