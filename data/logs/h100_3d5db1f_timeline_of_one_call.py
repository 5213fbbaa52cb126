# A timeline of one call (torch.profiler, CUPTI): each kernel's GPU time and the gaps between them,
# for the headline steps; the median over 5 calls after warm-up, us.
import statistics, sys, torch
from torch.profiler import profile, ProfilerActivity
from fusedkit import problems
from fusedkit.harness import worker
dev = torch.device("cuda")
cases = [a.split(":") for a in sys.argv[1:]]
for key, slug in cases:
    s = worker.Session(None, dev)
    s.do_build({"problem": key, "sizes": problems.get(key).sizes(None), "seed": 1, "spec": ["registered", key, slug]})
    fn = lambda: s.fn(*s.inputs)
    with torch.no_grad():
        for _ in range(3): fn()
        torch.cuda.synchronize()
        runs = []
        for _ in range(5):
            s.flush.zero_(); torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn(); torch.cuda.synchronize()
            ks = sorted([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                         and "memset" not in e.name.lower() and "memcpy" not in e.name.lower()],
                        key=lambda e: e.time_range.start)
            runs.append([(e.name[:60], e.time_range.start, e.time_range.end) for e in ks])
    n = min(len(r) for r in runs)
    print(f"== {key} {slug}: {n} kernels; span first start to last end "
          f"{statistics.median(r[n-1][2] - r[0][1] for r in runs):.1f} us", flush=True)
    for i in range(n):
        d = statistics.median(r[i][2] - r[i][1] for r in runs)
        g = statistics.median(r[i][1] - r[i-1][2] for r in runs) if i else 0.0
        print(f"   {runs[0][i][0]:60s} {d:8.1f} us  (gap before {g:5.1f})", flush=True)
