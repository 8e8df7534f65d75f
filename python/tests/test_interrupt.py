"""Ctrl-C (SIGINT) interrupts a blocking call on the main thread: KeyboardInterrupt within a second
or two, for a rendezvous waiting on the store, a recv waiting on a peer, a message queue's dequeue
waiting for its writer, a writer telling its readers that its object cannot be pickled while the
ring is full, and (when asked for) an all_reduce waiting on a peer. Runs child processes with their own tcp:// world, so only in the
world-size-1 run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from gc_testing import requires_numpy_flavour, requires_world_size

# The children run their own CPU (gloo) world whatever the flavour: once, in the numpy run.
pytestmark = [requires_world_size(1), requires_numpy_flavour]

# Each child installs Python's default SIGINT handler explicitly: a child of a background job
# may inherit SIGINT as ignored, and then Python installs none.
PRELUDE = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import groupcoord as gc
"""

STORE_WAIT = PRELUDE + """
print("ready", flush=True)
try:
    # Rank 0 hosts the store and waits there for rank 1, which never comes.
    gc.init_distributed_environment(world_size=2, rank=0, distributed_init_method=sys.argv[1],
                                     local_rank=0, timeout=60, backend="gloo")
except KeyboardInterrupt:
    print("interrupted", flush=True)
    raise
"""

# argv: init method, rank, what rank 1 blocks in ("recv" or "all_reduce").
PEER_WAIT = PRELUDE + """
rank, what = int(sys.argv[2]), sys.argv[3]
gc.init_distributed_environment(world_size=2, rank=rank, distributed_init_method=sys.argv[1],
                                local_rank=rank, timeout=60, backend="gloo")
gc.initialize_model_parallel(tensor_model_parallel_size=2, backend="gloo")
gc.set_interruptible(True, collectives=(what == "all_reduce"))
if rank == 1:
    print("ready", flush=True)
    try:
        if what == "recv":
            gc.get_tp_group().recv((4,), np.float32, src=0)
        else:
            gc.get_tp_group().all_reduce(np.ones(4, dtype=np.float32))
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        raise
else:
    time.sleep(60)
"""


# A reader of a queue whose writer (in the same process) never writes: the dequeue sleeps on the
# segment's futex and must still run the signal handlers.
QUEUE_WAIT = PRELUDE + """
writer = gc.MessageQueue(1, 1, max_chunk_bytes=1024, max_chunks=4, timeout=60)
reader = gc.MessageQueue.create_from_handle(writer.export_handle(), 0, timeout=60)
print("ready", flush=True)
try:
    reader.dequeue()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    raise
"""


# A writer whose object cannot be pickled tells its readers (enqueue_error), which waits for a free
# chunk; the ring is full and its reader never reads. Ctrl-C must end that wait with
# KeyboardInterrupt, not be swallowed into the pickling error.
TELL_WAIT = PRELUDE + """
class Unpicklable:
    def __reduce__(self):
        raise TypeError("refuses to be pickled")

writer = gc.MessageQueue(1, 1, max_chunk_bytes=1024, max_chunks=1, timeout=60)
reader = gc.MessageQueue.create_from_handle(writer.export_handle(), 0, timeout=60)
writer.enqueue("fills the ring")
print("ready", flush=True)
try:
    writer.enqueue(Unpicklable())
except KeyboardInterrupt:
    print("interrupted", flush=True)
    raise
except TypeError:
    print("the pickling error, not the interrupt", flush=True)
    raise
"""

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "SLURM_")
LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def spawn(code: str, *args: str) -> subprocess.Popen:
    """A child with its own world: none of this (mpirun) process's launcher variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def interrupt_when_blocked(child: subprocess.Popen) -> float:
    """Waits for the child's "ready", lets it block, sends SIGINT; returns the seconds it took
    to exit after the signal."""
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # inside the blocking call by now
    start = time.monotonic()
    child.send_signal(signal.SIGINT)
    child.wait(timeout=30)
    return time.monotonic() - start


def check_interrupted(child: subprocess.Popen, elapsed: float) -> None:
    out, err = child.communicate()
    assert "interrupted" in out, err
    assert "KeyboardInterrupt" in err
    assert child.returncode != 0
    assert elapsed < 2.5, f"took {elapsed:.2f} s"


def test_sigint_interrupts_store_wait() -> None:
    child = spawn(STORE_WAIT, f"tcp://127.0.0.1:{free_port()}")
    try:
        check_interrupted(child, interrupt_when_blocked(child))
    finally:
        child.kill()


def test_sigint_interrupts_queue_wait() -> None:
    """dequeue waits on this thread (no helper thread), asleep on a futex: still interruptible."""
    child = spawn(QUEUE_WAIT)
    try:
        check_interrupted(child, interrupt_when_blocked(child))
    finally:
        child.kill()


@pytest.mark.parametrize("what", ["recv", "all_reduce"])
def test_sigint_interrupts_peer_wait(what: str) -> None:
    """recv is interruptible by default; all_reduce with set_interruptible(collectives=True)."""
    method = f"tcp://127.0.0.1:{free_port()}"
    peer = spawn(PEER_WAIT, method, "0", what)
    child = spawn(PEER_WAIT, method, "1", what)
    try:
        check_interrupted(child, interrupt_when_blocked(child))
    finally:
        child.kill()
        peer.kill()
        peer.wait()


def test_sigint_interrupts_telling_the_readers() -> None:
    child = spawn(TELL_WAIT)
    try:
        check_interrupted(child, interrupt_when_blocked(child))
    finally:
        child.kill()
