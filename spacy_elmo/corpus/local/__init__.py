"""The local engine of a corpus job (`run_corpus(..., engine="local")`): this process reads the
input once, in order, and writes one output file: AllenNLP's HDF5 layout (`hdf5`), or one row
per input row as JSON lines or Parquet (`tables`). It needs no Ray."""
