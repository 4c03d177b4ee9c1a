"""Document bodies of a known shape, for tests and benchmarks."""

from __future__ import annotations


def plan_body(chunks: int, chunk_limit: int = 4096, tag: str = "") -> str:
    """A plan that cuts into exactly ``chunks`` messages of ``chunk_limit``, a paragraph each."""
    paragraphs = []
    for i in range(chunks):
        head = f"{tag}Part {i + 1} of {chunks}. "
        filler = ("Keep going, one small step at a time. " * 200)[
            : max(chunk_limit - len(head) - 10, 1)
        ]
        paragraphs.append((head + filler).strip())
    return "\n\n".join(paragraphs)
