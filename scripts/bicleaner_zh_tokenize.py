#!/usr/bin/env python3
"""Chinese word segmentation for Bicleaner (jieba): one line in, one space-joined line out.

Bicleaner runs this as its external tokenizer command, either as a pipe (one line at a time,
so every line is flushed) or over a whole block; both work. Run with the .venv-bicleaner python.
"""
import logging
import sys

import jieba

jieba.setLogLevel(logging.WARNING)
jieba.initialize()


def segment(line: str) -> str:
    return " ".join(t for t in jieba.lcut(line.rstrip("\n")) if t.strip())


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        out.write(segment(line) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
