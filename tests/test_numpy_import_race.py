"""The grader imports NumPy in a background thread while the learner's worker starts, and the
worker's first result may hold a NumPy array. Unpickling it must wait for that import: taking
numpy's submodules from a second thread mid-import gave a partly initialised module, an
ImportError that the check then reported as a crash of the learner's code."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np

from tests.helpers import COURSE_ROOT, course_pythonpath

# A fresh interpreter (numpy not yet imported) starts the grader's background import, waits
# DELAY seconds, then unpickles an array as the grader does its worker's events.
RACE = """
import sys, threading, time
from learning.grader import childproc
frame = sys.stdin.buffer.read()
threading.Thread(target=childproc.import_numpy, daemon=True).start()
time.sleep(float(sys.argv[1]))
print(childproc.load_event(frame)[0].sum())
"""


def test_an_array_unpickled_while_numpy_imports_in_another_thread_is_whole():
    frame = pickle.dumps((np.arange(10.0),), protocol=pickle.HIGHEST_PROTOCOL)
    env = dict(os.environ, PYTHONPATH=course_pythonpath())
    for delay in ("0", "0.001", "0.005", "0.01", "0.02", "0.05"):
        done = subprocess.run([sys.executable, "-c", RACE, delay], input=frame,
                              capture_output=True, cwd=COURSE_ROOT, env=env, timeout=120)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert done.stdout.decode().strip() == "45.0"
