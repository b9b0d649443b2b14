"""The commit this copy of the code was exported from.

``git archive`` replaces the placeholder below with the full commit hash (``.gitattributes``:
``export-subst``), so a run from an export (``git archive <commit> | tar -x``, no ``.git``) still knows its
code. In a checkout the placeholder stays, and ``bench.results.provenance`` asks git instead.
"""

ARCHIVED_COMMIT = "$Format:%H$"
