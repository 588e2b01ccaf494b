"""The case API's room: what a case body and its decorator use (``@cprr.case``, ``ctx``,
``cprr.accesses``), the case running on this thread, tensors as cprr names them, and which
exceptions skip a case. The lowest room: it imports no other room of cprr, and imports torch only
where a call needs it, so ``import cprr`` (the pytest plugin's, the controller's) stays torch-free.
"""
