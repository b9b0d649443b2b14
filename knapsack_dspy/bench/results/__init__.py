"""Results directories: the declared row schema, the crash-safe store and its lock, each row's provenance,
prompt record and the facts a row does not hold. The bottom of ``bench``: imports nothing else of it.
"""
