"""Weight files: our model directory (`model_dir`), AllenNLP's HDF5 layout (`allennlp`), and the
state-dict shapes both are checked against (`state_dict`)."""
