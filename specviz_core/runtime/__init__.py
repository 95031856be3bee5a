"""The model runtime: loading models, devices and dtypes, attention patterns, KV surgery, token text, the models on this machine."""
