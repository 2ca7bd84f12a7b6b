"""Weight files: our own format (config.json + safetensors) and AllenNLP's HDF5 layout."""
