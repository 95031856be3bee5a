"""Training a draft head for the target on this machine: the shipped text and the training loop."""
