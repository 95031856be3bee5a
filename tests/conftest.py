"""Shared fixtures: a tiny random Llama for most tests, the real default model where only it shows the behaviour."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def tiny():
    from helpers import tiny_llama

    return tiny_llama()


@pytest.fixture(scope="session")
def smol():
    from specviz_core.models import load_model

    return load_model(device="cpu")
