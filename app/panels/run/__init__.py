"""The Run panel: model, method, parameters, prompt, and the step/run controls."""
