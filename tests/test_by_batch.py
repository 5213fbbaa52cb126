"""The by-batch steps (fusedkit.problems.base.by_batch): each call goes to the step that won at
its batch size, the first runnable one of its band; bad route tables are refused in one line."""

import pytest
import torch

from fusedkit import problems
from fusedkit.harness import measure
from fusedkit.problems.base import Route, Variant, by_batch

P12 = problems.get("p12")
SMALL = {"batch_size": 5, "in_features": 24, "out_features": 16}


def spy(monkeypatch, slugs):
    """Wrap the builds of ``slugs`` so each call is logged as (slug, rows)."""
    calls = []
    for slug in slugs:
        v = P12.variant(slug)

        def build(model, _v=v):
            fn = _v.build(model)
            return lambda x: (calls.append((_v.slug, x.shape[0])), fn(x))[1]
        monkeypatch.setitem(P12.variants, slug, Variant(v.number, v.slug, v.title, v.summary, build,
                                                        precision=v.precision, baseline=v.baseline))
    return calls


def test_each_call_goes_to_its_band(monkeypatch):
    calls = spy(monkeypatch, ["eager", "addmm_alpha_beta"])
    routes = (Route(2, ("eager",)), Route(None, ("addmm_alpha_beta",)))
    model = P12.make_model(SMALL, seed=3)
    run = by_batch(lambda: P12, routes)(model)
    for rows in (1, 2, 3, 7):
        x = torch.rand(rows, SMALL["in_features"])
        torch.testing.assert_close(run(x), model(x), rtol=1e-5, atol=1e-6)
    assert calls == [("eager", 1), ("eager", 2), ("addmm_alpha_beta", 3), ("addmm_alpha_beta", 7)]


def test_a_step_the_device_cannot_run_gives_way_to_the_next(monkeypatch):
    calls = spy(monkeypatch, ["eager"])
    # small_batch_stream needs a CUDA GPU: on this CPU the band falls back to eager
    routes = (Route(None, ("small_batch_stream", "eager")),)
    run = by_batch(lambda: P12, routes)(P12.make_model(SMALL, seed=3))
    run(torch.rand(3, SMALL["in_features"]))
    assert calls == [("eager", 3)]
    only_gpu = (Route(None, ("small_batch_stream",)),)
    with pytest.raises(RuntimeError, match="no step of the band of the largest batches runs on cpu"):
        by_batch(lambda: P12, only_gpu)(P12.make_model(SMALL, seed=3))


@pytest.mark.parametrize("routes,words", [
    ((), "must end with a Route"),
    ((Route(4, ("eager",)),), "must end with a Route"),
    ((Route(8, ("eager",)), Route(4, ("eager",)), Route(None, ("eager",))), "must rise strictly"),
    ((Route(0, ("eager",)), Route(None, ("eager",))), "must rise strictly"),
])
def test_bad_route_tables_are_refused(routes, words):
    with pytest.raises(ValueError, match=words):
        by_batch(lambda: P12, routes)


def test_a_by_batch_step_goes_through_the_measuring_path():
    routes = (Route(4, ("eager",)), Route(None, ("addmm_alpha_beta",)))
    v = Variant(99, "demo_by_batch", "demo", "eager up to 4 rows, addmm above",
                by_batch(lambda: P12, routes), routes=routes)
    m = measure(P12, v, SMALL, device="cpu", time_it=False)
    assert m.ok and m.tier in ("reference", "fp32-faithful"), m.failure


def test_the_registered_choices_name_steps_of_their_ladder():
    for key in ("p12", "p45"):
        p = problems.get(key)
        chosen = [v for v in p.ladder() if v.routes]
        assert len(chosen) == 1 and chosen[0].precision == "fp16x3" and chosen[0].needs_gpu
        for r in chosen[0].routes:
            assert r.why and all(s in p.variants and not p.variant(s).routes for s in r.slugs)
