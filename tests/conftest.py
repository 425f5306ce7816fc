"""Test settings: offline, CI mode, no GPU assumptions."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LLM_COURSE_OFFLINE", "1")
os.environ.setdefault("LLM_COURSE_CI", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")
