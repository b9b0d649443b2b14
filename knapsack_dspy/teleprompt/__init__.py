"""DSPy teleprompters that compile exemplar selection (above ``modules/``)."""
