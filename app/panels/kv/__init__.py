"""The KV cache panel."""
