# Why the pool's worker times p12's steps 0.08-0.2 ms longer than one process does (H100).
# A: worker.Session in this process; P: the same after a seccomp filter installed the old way
# (prctl: some kernels then force the speculative-store-bypass mitigation on the task);
# B: after worker.lock_in() (seccomp(2) with SPEC_ALLOW); C: through pool.worker.
# Each: median and p10/p90 of 40 timed spans, us; and the task's Speculation_Store_Bypass line.
import ctypes, os, platform, statistics, struct, sys, time, torch
from fusedkit import problems
from fusedkit.harness import pool, worker
mode = sys.argv[1]
dev = torch.device("cuda")
spec = lambda pid="self": [l.split(":", 1)[1].strip() for l in open(f"/proc/{pid}/status")
                           if l.startswith(("Speculation_Store", "SpeculationIndirect", "Seccomp:"))]
print(mode, "host:", open("/sys/devices/system/cpu/vulnerabilities/spec_store_bypass").read().strip(), "|",
      open("/sys/devices/system/cpu/vulnerabilities/spectre_v2").read().strip(), flush=True)
if mode == "P":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)
    audit, calls, _ = worker._SYSCALLS[platform.machine()]
    program = worker._filter(audit, calls, os.getpid())
    buf = ctypes.create_string_buffer(program, len(program))
    prog = struct.pack("HxxxxxxQ", len(program) // 8, ctypes.addressof(buf))
    print("prctl seccomp rc", libc.prctl(22, 2, ctypes.c_char_p(prog), 0, 0), flush=True)
if mode == "B":
    print("lock_in:", worker.lock_in() or "seccomp on", flush=True)
if mode in "APB":
    print(mode, "task:", spec(), flush=True)
cases = [("p12", None, "wgmma_persistent"), ("p12", None, "wgmma_fp16x3"), ("p12", None, "eager"),
         ("p12", 1, "small_batch_stream")]
q = lambda v: f"{statistics.median(v):7.1f} (p10 {sorted(v)[3]:6.1f}, p90 {sorted(v)[-4]:6.1f})"
for key, batch, slug in cases:
    p = problems.get(key)
    sizes = p.sizes({"batch_size": batch} if batch else None)
    spans = []
    if mode in "APB":
        s = worker.Session(None, dev)
        s.do_build({"problem": key, "sizes": sizes, "seed": 1, "spec": ["registered", key, slug]})
        for i in range(45):
            kind, body = s.do_time({"seed": 1000 + i})
            spans.append(body["ms"] * 1e3)
            s.do_rows({"rows": [0]})
    else:
        with pool.worker(dev) as w:
            w.ask({"op": "build", "problem": key, "sizes": sizes, "seed": 1,
                   "spec": ["registered", key, slug]}, 300, "build")
            if slug == cases[0][2]:
                print(mode, "worker task:", spec(w.pid), flush=True)
            for i in range(45):
                kind, body = w.ask({"op": "time", "seed": 1000 + i}, 60, "time")
                spans.append(body["ms"] * 1e3)
                w.ask({"op": "rows", "rows": [0]}, 60, "rows")
    print(f"{mode} {key} {batch or 'default'} {slug:20s} {q(spans[5:])} us", flush=True)
