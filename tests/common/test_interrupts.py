"""common/interrupts.py: Ctrl-C and SIGTERM held back around a call, then passed on."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from common.interrupts import interrupt_after_call, signals_held, stop_children


def test_a_sigterm_inside_the_call_arrives_after_it_and_stops_its_child():
    """The call's child (a stand-in for a build script) is stopped at once, the call returns,
    and the interrupt arrives only then, as the handler that was there before."""
    arrived = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: arrived.append(number))
    try:
        child = None
        with interrupt_after_call():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            started = time.monotonic()
            os.kill(os.getpid(), signal.SIGTERM)
            code = child.wait(timeout=20)
            assert arrived == []  # held while the call runs
        assert arrived == [signal.SIGTERM]
        assert code == -signal.SIGTERM and time.monotonic() - started < 10
    finally:
        signal.signal(signal.SIGTERM, previous)
        if child is not None and child.poll() is None:
            child.kill()


def test_stop_children_stops_only_this_process_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in stop_children()
        assert child.wait(timeout=20) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
    assert stop_children() == []


def test_signals_held_runs_on_first_once():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: None)
    try:
        with signals_held(on_first=lambda: calls.append(1)):
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert calls == [1]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_held_signal_becomes_a_keyboard_interrupt_where_the_handler_says_so(signum):
    def interrupt(number, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signum, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupt_after_call():
                os.kill(os.getpid(), signum)
                time.sleep(0.05)
    finally:
        signal.signal(signum, previous)
