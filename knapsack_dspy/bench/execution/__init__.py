"""Running a suite: the driver (``runner.run_suite``), a run's job, answering one example, and the workers
(inline, threads, Ray) that do the work.
"""
