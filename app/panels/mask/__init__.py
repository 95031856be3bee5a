"""The tree attention mask panel."""
