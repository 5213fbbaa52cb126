"""How often the timing's verification catches a kernel wrong on one call in n: the figures in the
README's table of guards. Run from the repository root: ``python tests/catch_rates.py 200``
(measurements per case; CPU, through fusedkit.measure like every other caller)."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import adversarial as bad  # noqa: E402
from fusedkit import measure, problems  # noqa: E402

P12 = problems.get("p12")
SMALL = P12.sizes(batch_size=32, in_features=48, out_features=40)
CHECKED_CALLS = 8   # two seeds and the nearby odd shape, two calls each


def main(trials: int) -> None:
    for warmup_ms, rep_ms in ((2, 10), (0, 1)):
        budget = dict(seeds=2, warmup_ms=warmup_ms, rep_ms=rep_ms)
        for n in (5, 50):
            tally = bad.Tally(os.path.join(tempfile.mkdtemp(), "tally"))
            builder = bad.wrong_one_call_in(n, tally)
            caught = wrong_at_all = 0
            calls = []
            for _ in range(trials):
                tally.reset()
                m = measure.measure(P12, builder, SMALL, device="cpu", name=builder.__name__, **budget)
                counts = tally.counts()
                calls.append(counts["call"] - CHECKED_CALLS)
                wrong_at_all += counts.get("wrong", 0) > 0
                caught += m.refused.startswith(measure.TIMED_DIFFER)
            print(f"{warmup_ms} + {rep_ms} ms, wrong on one call in {n}: caught in {caught} of "
                  f"{trials}, wrong at all in {wrong_at_all}; {min(calls)} to {max(calls)} timed calls",
                  flush=True)
        tally = bad.Tally(os.path.join(tempfile.mkdtemp(), "tally"))
        for _ in range(max(1, trials // 10)):
            measure.measure(P12, bad.memo_by_content(tally), SMALL, device="cpu", **budget)
        print(f"{warmup_ms} + {rep_ms} ms, a content memo: {tally.counts().get('hit', 0)} hits in "
              f"{max(1, trials // 10)} measurements", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
