"""The names of the files of a model directory and of AllenNLP's pair, without torch or h5py:
the command line's help names them before any model is read."""

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
LEXICON_FILE = "lexicon.json"
HEAD_FILE = "lm_head.safetensors"
VOCAB_FILE = "vocab.txt"
TRAINING_CONFIG_FILE = "training.cfg"
ALLENNLP_OPTIONS_FILE = "options.json"
ALLENNLP_WEIGHTS_FILE = "weights.hdf5"
