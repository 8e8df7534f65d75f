"""Step-by-step smoke run with faulthandler on (locates a crash on a new platform)."""
import faulthandler
import os

faulthandler.enable()
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")


def step(msg):
    print(f"[{rank}] {msg}", flush=True)


step("import numpy")
import numpy as np  # noqa: E402

step(f"numpy {np.__version__}; import groupcoord")
import groupcoord as gc  # noqa: E402

if os.environ.get("GC_INLINE") == "1":
    gc.set_interruptible(False)  # everything on the calling thread
step("init_distributed_environment")
gc.init_distributed_environment(backend="gloo", timeout=60)
w = gc.get_world_group()
step(f"world {w!r}")
gc.initialize_model_parallel(w.world_size, backend="gloo")
tp = gc.get_tp_group()
step(f"tp {tp!r}")
x = np.ones(4, np.float32)
step("all_reduce")
step(f"-> {tp.all_reduce(x)!r}")
step("broadcast_object")
step(f"-> {tp.broadcast_object({'a': 1} if tp.rank_in_group == 0 else None)!r}")
step("broadcast_tensor_dict")
d = tp.broadcast_tensor_dict({"a": np.arange(3)} if tp.rank_in_group == 0 else None)
step(f"-> {d!r}")
gc.set_interruptible(False)
step("all_reduce inline")
step(f"-> {tp.all_reduce(x)!r}")
w.barrier()
gc.destroy_distributed_environment()
step("done")
