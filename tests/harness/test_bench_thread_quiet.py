"""``quiet_in_this_thread``: a thread's own output is dropped inside the block, other threads' output is not, and
overlapping blocks in several threads (the bench's workers running DSPy's KNNFewShot) leave the process printing."""

import sys
import threading

from knapsack_dspy.bench.programs.thread_quiet import quiet_in_this_thread


def test_overlapping_quiet_blocks_hide_only_their_own_threads_output(capsys):
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with quiet_in_this_thread():
            print("first thread, hidden")
            first_in.set()
            second_in.wait(5)
        first_out.set()  # leaves its block while the second thread is still inside its own

    def second():
        first_in.wait(5)
        with quiet_in_this_thread():
            print("second thread, hidden", file=sys.stderr)
            second_in.set()
            first_out.wait(5)
            print("second thread, still hidden")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    first_in.wait(5)
    print("main thread, shown while the others are quiet")
    for thread in threads:
        thread.join(5)
    print("main thread, shown after")
    out, err = capsys.readouterr()
    assert out == "main thread, shown while the others are quiet\nmain thread, shown after\n"
    assert err == ""


def test_a_quiet_block_nests_and_ends(capsys):
    with quiet_in_this_thread():
        with quiet_in_this_thread():
            print("hidden")
        print("hidden too")
    print("shown")
    assert capsys.readouterr().out == "shown\n"
