"""The Python rank process: its worker loop and what it loads (worker_loop), what each case gets
before its body (case_setup, torch_allocator, unseen_work), the body run under its op capture
(case_body), and the template that forks ranks (template, fork_request, import_probe). The
highest room below the package's entry points (cprr.worker, cprr.pytest_plugin).
"""
