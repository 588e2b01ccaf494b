"""CUDA graphs in a case, on the GPU: a graph captured with torch.cuda.graph
and replayed, whose kernels run at each replay and not when their ops were captured. A correct
use (replays on the current stream, outputs read after them) beside a replay on a side stream
read by the default stream with no wait, and its fixed twin.

cprr logs a graph's ops at each replay, on the replay's stream, not where they were captured
(cprr.capture.graphs, recorder/api/library_graphs.h). Run with
``cprecord --python corpus/python_graphs --backend cuda`` (tools/device/run_gpu_checks.sh
graphs). Listing them needs no GPU.
"""

import torch

import cprr

N = 1 << 16


def _graph(device):
    """y = x * 2 + 1 captured into a graph over static x and y (warmed up on a side stream first,
    as torch's documentation asks)."""
    x = torch.zeros(N, device=device)
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        y = x * 2 + 1
    torch.cuda.current_stream().wait_stream(warm)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2 + 1
    return g, x, y


@cprr.case(name="healthy/py_cuda_graph", world_sizes=[1],
           description="a graph replayed three times on the current stream, its static input "
           "refilled before and its output read after each replay: no finding")
def cuda_graph(ctx):
    g, x, y = _graph(ctx.device)
    sums = []
    for step in range(3):
        x.fill_(float(step))
        g.replay()
        sums.append(y.sum().reshape(1))
    ctx.output("sums", torch.cat(sums))


def _replay_on_side_stream(ctx, wait):
    g, x, y = _graph(ctx.device)
    x.fill_(3.0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    # The default stream is busy before its read, so the replay usually lands first: the race
    # shows in the outputs once a replay of the case delays the graph.
    torch.cuda._sleep(1 << 20)
    with torch.cuda.stream(side):
        g.replay()
    if wait:
        torch.cuda.current_stream().wait_stream(side)
    ctx.output("sum", (y * 2).sum().reshape(1))


@cprr.case(name="bug/py_cuda_graph_side_stream", world_sizes=[1], seeded_bug="stream_race",
           description="a graph replayed on a side stream writes y; the default stream reads y "
           "with no wait_stream")
def cuda_graph_side_stream(ctx):
    _replay_on_side_stream(ctx, wait=False)


@cprr.case(name="fixed/py_cuda_graph_side_stream", world_sizes=[1],
           description="the twin: current_stream().wait_stream(side) before the read")
def cuda_graph_side_stream_fixed(ctx):
    _replay_on_side_stream(ctx, wait=True)
