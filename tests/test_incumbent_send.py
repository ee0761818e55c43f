"""A solving child's sender (``mallocgame.runtime.incumbents``): the quiet time between two answers is the last send's
CPU cost over ``SEND_SHARE``, so a send that only waited for a busy parent to read (a big input's first answer
while the parent builds the bound) does not hold back the solver's next answer."""

from __future__ import annotations

import threading
import time

import numpy as np

from mallocgame.problem.model import Buffer, Problem
from mallocgame.runtime import incumbents


def test_a_send_that_waited_for_the_parent_does_not_hold_back_the_next_answer():
    problem = Problem("t", (Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3)), mode="map", capacity=8)
    sent: list[tuple[float, object]] = []

    class SlowReader:  # the parent reads the first message half a second late; the sender only waits
        def send(self, message):
            if not sent:
                time.sleep(0.5)
            sent.append((time.monotonic(), message))

    incumbents.open_channel(SlowReader(), threading.Lock(), problem, source="t")
    try:
        incumbents.offer(value=1.0, offsets=np.array([0, -1]), problem=problem)
        until = time.monotonic() + 10
        while not sent and time.monotonic() < until:
            time.sleep(0.01)
        incumbents.offer(value=2.0, offsets=np.array([0, 4]), problem=problem)
        while time.monotonic() < until and not any(
                m[1][1] is not None and m[1][1].offsets is not None and m[1][1].offsets.tolist() == [0, 4]
                for _, m in sent):
            time.sleep(0.01)
    finally:
        incumbents.close_channel()
    first_at = sent[0][0]
    second = [t for t, m in sent if m[1][1] is not None and m[1][1].offsets.tolist() == [0, 4]]
    assert second, "the second answer was never sent"
    # before, the wait counted as the send's cost: 0.5 s / SEND_SHARE = 5 s of quiet time
    assert second[0] - first_at < 2.0
