"""The ready-made pipelines (``DocumentQA``, ``StatuteQA``), their retrievers and router, and what their pools are
labelled with."""
