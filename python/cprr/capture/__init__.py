"""The op capture's room, the Python side of python/native/capture file for file where both
exist (op_capture, op_schema, outside, stream_order, tensor_table; native_capture is the
bindings' side): a case's torch ops, streams, memory, CUDA graphs and symmetric windows in its op
log, and where in the case's code each was made. Imports no other room: the running case
reaches it as an argument.
"""
