"""The token counts kept on disk (``knapsack_dspy.llm.count_store``): batches read and written at once, shared
across processes, bounded, and an unusable file only costing time."""

import hashlib
import logging
import multiprocessing

import pytest

from knapsack_dspy.llm.count_store import TokenCountStore


def key(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).digest()


def test_a_batch_reads_back_what_was_written_and_none_for_the_rest(tmp_path):
    store = TokenCountStore(tmp_path / "sub" / "counts.sqlite3")
    store.put_many((key(i), 10 * i) for i in range(1200))  # more keys than one SELECT takes
    wanted = [key(i) for i in range(1300)] + [key(5), key(5)]  # unknown ones and a repeated one
    assert store.get_many(wanted) == [10 * i for i in range(1200)] + [None] * 100 + [50, 50]
    store.put(key(5), 7)  # a count written again replaces the old one
    assert store.get(key(5)) == 7 and len(store) == 1200


def test_another_store_on_the_same_file_sees_the_counts(tmp_path):
    TokenCountStore(tmp_path / "c.sqlite3").put_many([(key(1), 3), (key(2), 4)])
    assert TokenCountStore(tmp_path / "c.sqlite3").get_many([key(2), key(1)]) == [4, 3]


def _write(path, start):
    TokenCountStore(path).put_many((key(i), i) for i in range(start, start + 2000))


def test_processes_writing_at_once_lose_no_count(tmp_path):
    path = tmp_path / "c.sqlite3"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write, args=(path, 2000 * k)) for k in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert TokenCountStore(path).get_many([key(i) for i in range(6000)]) == list(range(6000))


def test_the_oldest_counts_go_past_max_rows(tmp_path):
    store = TokenCountStore(tmp_path / "c.sqlite3", max_rows=100)
    store.put_many((key(i), i) for i in range(80))
    store.put_many((key(i), i) for i in range(80, 150))
    assert len(store) == 100
    assert store.get_many([key(i) for i in range(150)]) == [None] * 50 + list(range(50, 150))
    with pytest.raises(ValueError, match="max_rows"):
        TokenCountStore(tmp_path / "d.sqlite3", max_rows=0)


def test_an_unusable_file_warns_once_and_forgets(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = TokenCountStore(blocker / "counts.sqlite3")  # its folder cannot be made
    with caplog.at_level(logging.WARNING, logger="knapsack_dspy.llm.count_store"):
        store.put(key(1), 3)
        assert store.get_many([key(1), key(2)]) == [None, None]
    assert len([r for r in caplog.records if "unavailable" in r.getMessage()]) == 1


def test_a_corrupt_file_is_read_as_empty_with_a_warning(tmp_path, caplog):
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING, logger="knapsack_dspy.llm.count_store"):
        assert TokenCountStore(path).get_many([key(1)]) == [None]
    assert any("unavailable" in r.getMessage() for r in caplog.records)


def _count_in_child(store, queue):
    inherited = store._local.conn  # the parent's, copied by the fork
    fresh = store._connection()
    store.put(key(7), 70)
    queue.put((fresh is not inherited, store.get_many([key(1), key(7)])))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_a_forked_child_opens_its_own_connection(tmp_path):
    store = TokenCountStore(tmp_path / "c.sqlite3")
    store.put(key(1), 10)
    parent_connection = store._connection()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_count_in_child, args=(store, queue))
    child.start()
    assert queue.get(timeout=60) == (True, [10, 70])  # a connection of its own
    child.join(60)
    assert child.exitcode == 0
    assert store._connection() is parent_connection and store.get_many([key(1), key(7)]) == [10, 70]
