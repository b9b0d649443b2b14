"""The document-QA application: question answering over financial reports (tables + text) and tax statutes.

Built on the optimizer (``knapsack_dspy.selection``, ``.modules``, ``.teleprompt``), never imported by it: the
data sets (``data``; one task module each: ``tasks``), retrieval, the program sandbox, the official metrics, the
signatures, the solvers and the ready-made pipelines. DEVELOPERS.md, "Three wings".
"""
