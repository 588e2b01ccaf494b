"""torch.distributed inside a case: its calls fingerprinted into cprr's logs (collectives,
fingerprint, work), its process groups numbered (groups) and the default one made
(process_group), messages staged through host memory where cprr chose Gloo (staging), and a
suite's own set-up of the default group run unchanged (shim). Imports the capture's and the case
API's rooms.
"""
